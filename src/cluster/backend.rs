//! PMM's release on one rank of many: the rank's side of `pmm::release::Backend`, so that the ranks run the
//! single machine's release (`PmmPlan::release_on`). Each rank bins its share of the row groups; its leaf
//! counts go to the ranks that own their subtrees ([`super::exchange`]); each rank noises and makes
//! consistent the subtrees it owns ([`super::part`]), cuts their dense leaves finer with `--refine-share`,
//! and draws its even share of the rows from them ([`super::rows`]). Collectives run on the calling thread
//! (MPI is initialised for one thread); the work runs on the rank's pool.

use std::sync::Arc;

use super::exchange::{Exchange, ExchangeRule, LocalCounts};
use super::part::{Ownership, PartLeaves, PartRelease, PartTree};
use super::rows::{allocate_part_rows, dealt_evenly, rows_before};
use crate::binner::device::DeviceChoice;
use crate::binner::pass::DataPass;
use crate::binner::ScanStats;
use crate::error::{Error, Result};
use crate::geometry::cdf::CellCdf;
use crate::geometry::partition::CellGeometry;
use crate::mechanism::pmm::consistency::Consistency;
use crate::mechanism::pmm::marginals::{axis_counts, CalibratedRows, MonotoneMap};
use crate::mechanism::pmm::refine::{AxisShapes, LeafRefinement, LeafRefinementParameters};
use crate::mechanism::pmm::release::Backend;
use crate::mechanism::pmm::schedule::LevelSchedule;
use crate::mechanism::ReleasedMeasure;
use crate::privacy::RunSeeds;
use crate::progress::Timings;
use crate::ranks::{agree, Communicator, RankSums};
use crate::sampler::{LeafSampler, Placement, RowGenerator, RowOrder};

/// One rank's side of PMM's release: its communicator and pool, its share of the data, and how its leaf
/// counts are held and exchanged.
pub struct RankBackend<'a> {
    comm: &'a dyn Communicator,
    pool: &'a rayon::ThreadPool,
    data: &'a DataPass<'a>,
    exchange: ExchangeRule,
    /// How the tree's leaves are held: as at the depth the run plans before n̂, where the first pass bins
    /// them (the finer leaves of `--refine-share` follow [`ExchangeRule::at`] their own depth).
    tree_exchange: Exchange,
}

impl<'a> RankBackend<'a> {
    /// The rank of `comm` binning `data` (its share), its tree planned at `planned_depth` before n̂.
    pub fn new(
        comm: &'a dyn Communicator,
        pool: &'a rayon::ThreadPool,
        data: &'a DataPass<'a>,
        exchange: ExchangeRule,
        planned_depth: u32,
    ) -> Self {
        RankBackend { comm, pool, data, exchange, tree_exchange: exchange.at(planned_depth) }
    }

    /// This rank's leaf counts on `geometry`, held as `exchange` says, with the scan statistics of every rank
    /// summed and the binner's words.
    fn counts(
        &self,
        geometry: CellGeometry,
        warps: Option<&[Arc<CellCdf>]>,
        device: DeviceChoice,
        exchange: Exchange,
        timings: &mut Timings,
    ) -> Result<(LocalCounts, ScanStats, String)> {
        let (comm, data) = (self.comm, self.data);
        let axes = data.axes(&geometry, warps);
        let binned = self.pool.install(|| LocalCounts::bin(data, geometry, &axes, device, exchange, timings));
        let (counts, scan, binning) = agree(comm, binned)?;
        Ok((counts, scan.summed_over(comm), binning))
    }
}

impl Backend for RankBackend<'_> {
    type Counts = LocalCounts;
    type Finer = LocalCounts;
    /// The leaves of the subtrees this rank owns.
    type Leaves = PartRelease;

    fn data(&self) -> &DataPass<'_> {
        self.data
    }

    fn ranks(&self) -> &dyn RankSums {
        self.comm
    }

    fn work<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        self.pool.install(work)
    }

    fn bin(
        &self,
        geometry: CellGeometry,
        warps: Option<&[Arc<CellCdf>]>,
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(LocalCounts, ScanStats, String)> {
        self.counts(geometry, warps, device, self.tree_exchange, timings)
    }

    fn coarsen(&self, counts: LocalCounts, from: u32, to: u32) -> LocalCounts {
        self.pool.install(|| counts.coarsen(from, to))
    }

    fn bin_finer(
        &self,
        geometry: CellGeometry,
        warps: Option<&[Arc<CellCdf>]>,
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(LocalCounts, ScanStats, String)> {
        self.counts(geometry, warps, device, self.exchange.at(geometry.depth()), timings)
    }

    fn tree_leaves(&self, finer: &LocalCounts, levels: u32, tree: CellGeometry) -> LocalCounts {
        self.pool.install(|| finer.coarsened(tree.depth() + levels, tree.depth()))
    }

    /// The leaves go to the ranks that own their subtrees; every rank releases the top levels alike from
    /// their summed counts, then its own subtrees ([`PartTree`]).
    fn noised(
        &self,
        counts: LocalCounts,
        schedule: &LevelSchedule,
        n_hat: Option<u64>,
        consistency: Consistency,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> PartRelease {
        let (comm, pool) = (self.comm, self.pool);
        let ownership = Ownership::new(schedule.depth, comm.size());
        let own = timings.time("exchange", || counts.to_owners(comm, &ownership.leaf_starts()));
        let rank = comm.rank();
        let tree = pool.install(|| PartTree::new(own, &ownership, rank));
        let mut top_counts = tree.top_counts();
        comm.sum(&mut top_counts);
        let noised = pool.install(|| tree.noise(top_counts, &schedule.scales, n_hat, &seeds.noise, consistency));
        let top_estimates = noised.top_estimates().map(|mut bits| {
            comm.sum(&mut bits);
            bits
        });
        pool.install(|| noised.release(top_estimates, consistency, seeds.consistency()))
    }

    /// Each rank's finer counts go to the ranks that own their leaves, and each rank refines its own part of
    /// the leaves. The noise and the coins are keyed by the leaf, so the parts are the single machine's
    /// refinement; the report's words are summed over the ranks.
    fn refined(
        &self,
        part: PartRelease,
        finer: LocalCounts,
        refinement: &LeafRefinement,
        (fine, levels): (CellGeometry, u32),
        shapes: Option<&AxisShapes>,
        seeds: &RunSeeds,
    ) -> Result<(PartRelease, LeafRefinementParameters)> {
        let comm = self.comm;
        let ownership = Ownership::new(fine.depth() - levels, comm.size());
        let starts: Vec<usize> = ownership.leaf_starts().iter().map(|&start| start << levels).collect();
        let own = finer.finer_to_owners(comm, &starts);
        let coins = (&seeds.noise, seeds.placement());
        let PartLeaves::Every(tree_leaves) = &part.leaves else {
            return Err(Error::internal("the tree's part lists every leaf"));
        };
        let (leaves, mut parameters) = self
            .pool
            .install(|| refinement.refine((part.first_leaf, tree_leaves), (fine, &own), levels, coins, shapes));
        let mut refined = [parameters.leaves_refined, parameters.sub_cells];
        comm.sum(&mut refined);
        [parameters.leaves_refined, parameters.sub_cells] = refined;
        let (first_leaf, owned) = (part.first_leaf << levels, tree_leaves.len() << levels);
        // An empty release spreads --rows over every leaf, as on one machine.
        let leaves = match part.root_count {
            0 => PartLeaves::Every(leaves.to_dense(first_leaf, owned)),
            _ => PartLeaves::Listed { owned, leaves },
        };
        Ok((PartRelease { first_leaf, leaves, ..part }, parameters))
    }

    fn axis_counts(&self, part: &PartRelease, geometry: &CellGeometry) -> Result<Vec<Vec<u64>>> {
        Ok(axis_counts(geometry, part.cells()))
    }

    fn released_rows(&self, part: &PartRelease) -> u64 {
        part.root_count
    }

    /// This rank's even share of the rows (`None`: the released counts; otherwise spread over the whole
    /// tree's leaves as on one machine). In cell order the parts in rank order are one machine's table; in
    /// random order each part's rows are permuted within the part (a rank holds only its own leaves): as many
    /// rows in each cell as one machine's table, each part in its own random order.
    fn rows<'r>(
        &'r self,
        part: &'r PartRelease,
        geometry: CellGeometry,
        rows: Option<u64>,
        (placement, order, seed): (Placement, RowOrder, u64),
        maps: Option<&'r [Option<MonotoneMap>]>,
    ) -> Result<Box<dyn RowGenerator + 'r>> {
        let comm = self.comm;
        let allocated = match rows {
            Some(rows) if rows != part.root_count => {
                let allocation = allocate_part_rows(comm, part.counts(), geometry.leaf_count(), part.root_count, rows);
                let first_row = rows_before(comm, allocation.iter().sum());
                Some((allocation, first_row))
            }
            _ => None,
        };
        let (counts, first_row) = match &allocated {
            Some((allocation, first_row)) => (allocation.as_slice(), *first_row),
            None => (part.counts(), part.first_row),
        };
        let total = rows.unwrap_or(part.root_count);
        // Each rank draws an even share of the rows, whichever ranks own their leaves (a skewed table's rows
        // sit in a few ranks' leaves).
        let leaves = part.cells().map(|(code, _)| code).zip(counts.iter().copied()).filter(|&(_, rows)| rows > 0);
        let (codes, counts, first_row) = dealt_evenly(comm, leaves, first_row, total);
        let sampler = LeafSampler::sparse(geometry, codes, &counts, first_row, placement, order, seed);
        Ok(match maps {
            Some(maps) => Box::new(CalibratedRows { inner: Box::new(sampler), maps }),
            None => Box::new(sampler),
        })
    }

    fn measure(&self, part: PartRelease, geometry: CellGeometry) -> ReleasedMeasure {
        match part.leaves {
            PartLeaves::Every(counts) => ReleasedMeasure::Leaves { geometry, counts },
            PartLeaves::Listed { leaves, .. } => ReleasedMeasure::SparseLeaves { geometry, leaves },
        }
    }
}
