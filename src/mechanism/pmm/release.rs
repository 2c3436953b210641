//! PMM's release, written once for one machine and for a rank of many (docs/design.md, "Past one machine").
//! The control flow lives here: the first bin at the planned depth, n̂ and the plan it picks, coarsening or
//! binning again, the quantile partition's marginal pass first, the marginals, the tree's noise and
//! consistency, the refined leaves, the marginal maps, the pairs, and the release put together. A
//! [`Backend`] does the few steps that differ: how the true leaf counts are held and reach the tree, how the
//! tree is noised and its leaves refined, and how rows are drawn from them. [`OneMachine`] holds the whole
//! tree; `crate::cluster` implements a rank's, whose tree is split by subtrees. Every sum over the ranks goes
//! through [`Backend::ranks`] ([`OneRank`] on one machine), so both run the same steps in the same order.

use std::sync::Arc;

use super::consistency::Consistency;
use super::marginals::{axis_counts, BinnedMarginals, CalibratedRows, MarginalPlan, MonotoneMap, ReleasedMarginals};
use super::pair_axis::{grouped, PairAxis};
use super::pairs::{candidate_pairs, DrawnRows, PairMap, PairParameters, PairPlan};
use super::plan::PmmPlan;
use super::refine::{binned_with_the_tree, AxisShapes, FinerCounts, LeafRefinement, LeafRefinementParameters};
use super::{coarsen_leaves, release_leaf_counts};
use super::schedule::LevelSchedule;
use crate::binner::device::DeviceChoice;
use crate::binner::pass::{DataPass, PairCut};
use crate::binner::ScanStats;
use crate::error::{Error, Result};
use crate::geometry::cdf::CellCdf;
use crate::geometry::partition::CellGeometry;
use crate::mechanism::{leaf_value_cells, Release, ReleasedMeasure};
use crate::privacy::RunSeeds;
use crate::progress::Timings;
use crate::ranks::{agree, OneRank, RankSums};
use crate::sampler::{Placement, RowGenerator, RowOrder};

/// Where a PMM release holds its counts: the steps of [`PmmPlan::release_on`] that differ between one
/// machine and a rank of many. Every rank calls them in the same order; a rank runs its collectives where
/// they are called and its work on its pool ([`Backend::work`]).
pub trait Backend {
    /// True leaf counts at one depth, as held before the tree is noised: a histogram, or a rank's own counts
    /// before they reach the ranks that own their leaves.
    type Counts: Send;
    /// The true counts of the finer leaves `--refine-share` cuts the tree's leaves into.
    type Finer: Send;
    /// The released tree's leaves held here: all of them, or a rank's part.
    type Leaves;

    /// The data as a pass reads it: the whole table, or a rank's share of the row groups.
    fn data(&self) -> &DataPass<'_>;
    /// The sums over the ranks.
    fn ranks(&self) -> &dyn RankSums;
    /// Runs `work` where the release's work runs (a rank's pool).
    fn work<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T;

    /// The tree's true leaf counts on `geometry` (each axis cut at the quantiles of `warps` when given) on
    /// `device`, with the scan statistics of the whole table and the binner's words.
    fn bin(
        &self,
        geometry: CellGeometry,
        warps: Option<&[Arc<CellCdf>]>,
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(Self::Counts, ScanStats, String)>;
    /// The counts of the ancestors at depth `to` of the leaves at depth `from`.
    fn coarsen(&self, counts: Self::Counts, from: u32, to: u32) -> Self::Counts;
    /// The finer leaves' true counts on `geometry` ([`Self::bin`]'s arguments).
    fn bin_finer(
        &self,
        geometry: CellGeometry,
        warps: Option<&[Arc<CellCdf>]>,
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(Self::Finer, ScanStats, String)>;
    /// The true counts of the `tree`'s leaves, `levels` above the `finer` ones.
    fn tree_leaves(&self, finer: &Self::Finer, levels: u32, tree: CellGeometry) -> Self::Counts;
    /// Noise on every level `schedule` noises (the root is `n_hat` where the plan released it), then the tree
    /// made consistent as `consistency` says: the released leaves.
    fn noised(
        &self,
        counts: Self::Counts,
        schedule: &LevelSchedule,
        n_hat: Option<u64>,
        consistency: Consistency,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Self::Leaves;
    /// The released `leaves` cut `levels` deeper onto `fine`'s leaves by `refinement` (`fine_and_levels`),
    /// from the `finer` leaves' true counts; with the report's words for the whole tree.
    fn refined(
        &self,
        leaves: Self::Leaves,
        finer: Self::Finer,
        refinement: &LeafRefinement,
        fine_and_levels: (CellGeometry, u32),
        shapes: Option<&AxisShapes>,
        seeds: &RunSeeds,
    ) -> Result<(Self::Leaves, LeafRefinementParameters)>;
    /// The counts of the `leaves` held here summed along each axis of `geometry` ([`axis_counts`]).
    fn axis_counts(&self, leaves: &Self::Leaves, geometry: &CellGeometry) -> Result<Vec<Vec<u64>>>;
    /// The released total of the whole tree.
    fn released_rows(&self, leaves: &Self::Leaves) -> u64;
    /// Rows of the whole table drawn from the released `leaves` on `geometry` (`rows` of them, or the released
    /// total) with `placement`, in `order`, with their seed, each column mapped onto its released marginal
    /// where there are `maps`: all of them, or a rank's even share.
    fn rows<'r>(
        &'r self,
        leaves: &'r Self::Leaves,
        geometry: CellGeometry,
        rows: Option<u64>,
        placement: (Placement, RowOrder, u64),
        maps: Option<&'r [Option<MonotoneMap>]>,
    ) -> Result<Box<dyn RowGenerator + 'r>>;
    /// The released measure of the `leaves` held here.
    fn measure(&self, leaves: Self::Leaves, geometry: CellGeometry) -> ReleasedMeasure;

    /// A pass over the data that a rank may fail alone, run as [`Self::work`] and agreed by every rank.
    fn pass<T: Send>(&self, pass: impl FnOnce(&DataPass) -> Result<T> + Send) -> Result<T> {
        let data = self.data();
        agree(self.ranks(), self.work(|| pass(data)))
    }
}

/// One machine: the whole tree in one process, its leaves a [`ReleasedMeasure`].
pub struct OneMachine<'a> {
    pub data: &'a DataPass<'a>,
}

impl Backend for OneMachine<'_> {
    type Counts = Vec<u64>;
    type Finer = FinerCounts;
    /// The tree's leaves ([`ReleasedMeasure::Leaves`]), or the refined ones ([`ReleasedMeasure::SparseLeaves`]).
    type Leaves = ReleasedMeasure;

    fn data(&self) -> &DataPass<'_> {
        self.data
    }

    fn ranks(&self) -> &dyn RankSums {
        &OneRank
    }

    fn work<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        work()
    }

    fn bin(
        &self,
        geometry: CellGeometry,
        warps: Option<&[Arc<CellCdf>]>,
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(Vec<u64>, ScanStats, String)> {
        self.data.leaf_counts_on(geometry, &self.data.axes(&geometry, warps), device, timings)
    }

    fn coarsen(&self, counts: Vec<u64>, from: u32, to: u32) -> Vec<u64> {
        coarsen_leaves(counts, from, to)
    }

    /// A histogram, or the rows' sorted codes where the leaves outnumber the rows.
    fn bin_finer(
        &self,
        geometry: CellGeometry,
        warps: Option<&[Arc<CellCdf>]>,
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(FinerCounts, ScanStats, String)> {
        let data = self.data;
        let axes = data.axes(&geometry, warps);
        if geometry.leaf_count() as u64 <= data.file_rows() {
            let (counts, scan, binning) = data.leaf_counts_on(geometry, &axes, device, timings)?;
            return Ok((FinerCounts::Histogram(counts), scan, binning));
        }
        if device == DeviceChoice::Gpu {
            return Err(Error::bad_input(format!(
                "--device gpu: this run's refined leaves (2^{} of them, more than the table's rows) are binned as \
                 sorted leaf codes, which run on the CPU only; give --device cpu or auto (or leave out --refine-share)",
                geometry.depth()
            )));
        }
        timings.time("read and sort", || {
            let (codes, scan, binning) = data.sorted_leaf_codes(geometry, &axes)?;
            Ok((FinerCounts::SortedCodes(codes), scan, binning))
        })
    }

    fn tree_leaves(&self, finer: &FinerCounts, levels: u32, tree: CellGeometry) -> Vec<u64> {
        finer.tree_leaves(levels, tree.leaf_count())
    }

    fn noised(
        &self,
        counts: Vec<u64>,
        schedule: &LevelSchedule,
        n_hat: Option<u64>,
        consistency: Consistency,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> ReleasedMeasure {
        let counts =
            release_leaf_counts(counts, schedule, n_hat, &seeds.noise, consistency, seeds.consistency(), timings);
        ReleasedMeasure::Leaves { geometry: CellGeometry::new(schedule.dims, schedule.depth), counts }
    }

    fn refined(
        &self,
        leaves: ReleasedMeasure,
        finer: FinerCounts,
        refinement: &LeafRefinement,
        (fine, levels): (CellGeometry, u32),
        shapes: Option<&AxisShapes>,
        seeds: &RunSeeds,
    ) -> Result<(ReleasedMeasure, LeafRefinementParameters)> {
        let ReleasedMeasure::Leaves { counts, .. } = leaves else {
            return Err(Error::internal("the tree's leaves are refined once"));
        };
        let coins = (&seeds.noise, seeds.placement());
        let (leaves, parameters) = refinement.refine((0, &counts), (fine, &finer), levels, coins, shapes);
        Ok((ReleasedMeasure::SparseLeaves { geometry: fine, leaves }, parameters))
    }

    fn axis_counts(&self, leaves: &ReleasedMeasure, geometry: &CellGeometry) -> Result<Vec<Vec<u64>>> {
        match leaves {
            ReleasedMeasure::Leaves { counts, .. } => Ok(axis_counts(geometry, (0..).zip(counts.iter().copied()))),
            ReleasedMeasure::SparseLeaves { leaves, .. } => Ok(axis_counts(geometry, leaves.cells())),
            _ => Err(Error::internal("a PMM release holds leaf counts")),
        }
    }

    fn released_rows(&self, leaves: &ReleasedMeasure) -> u64 {
        leaves.total()
    }

    fn rows<'r>(
        &'r self,
        leaves: &'r ReleasedMeasure,
        _geometry: CellGeometry,
        rows: Option<u64>,
        (placement, order, seed): (Placement, RowOrder, u64),
        maps: Option<&'r [Option<MonotoneMap>]>,
    ) -> Result<Box<dyn RowGenerator + 'r>> {
        let rows = leaves.rows(rows, placement, order, seed)?;
        Ok(match maps {
            Some(maps) => Box::new(CalibratedRows { inner: rows, maps }),
            None => rows,
        })
    }

    fn measure(&self, leaves: ReleasedMeasure, _geometry: CellGeometry) -> ReleasedMeasure {
        leaves
    }
}

/// The one release's outcome before its leaves become a measure: a rank draws its part of the table from its
/// leaves and the maps, then makes the report's release ([`Self::into_release`]).
pub struct TreeRelease<'p, L> {
    /// The plan that released it: the run's, or the one n̂ picked ([`PmmPlan::for_n_hat`]).
    plan: &'p PmmPlan,
    schedule: LevelSchedule,
    /// The released leaves' geometry: the tree's, or deeper with `--refine-share`.
    pub geometry: CellGeometry,
    pub leaves: L,
    /// The released total of the whole tree.
    root_count: u64,
    /// `--marginal-share`: the released marginals, and each column's map onto its own.
    marginals: Option<(ReleasedMarginals, Vec<Option<MonotoneMap>>)>,
    /// `--refine-share`: the report's words, for the whole tree.
    refined: Option<LeafRefinementParameters>,
    /// `--pair-share`: the gated pairs' maps in the order they apply, and the report's words.
    pairs: Option<(Vec<PairMap>, PairParameters)>,
    /// The scan statistics of the whole table, and the binner's words.
    scan: ScanStats,
    binning: String,
}

impl<L> TreeRelease<'_, L> {
    /// `--marginal-share`: each column's map onto its released marginal.
    pub fn maps(&self) -> Option<&[Option<MonotoneMap>]> {
        self.marginals.as_ref().map(|(_, maps)| maps.as_slice())
    }

    /// `--pair-share`: the gated pairs' maps, in the order they apply.
    pub fn pair_maps(&self) -> Option<&[PairMap]> {
        self.pairs.as_ref().map(|(maps, _)| maps.as_slice())
    }

    /// The cells each column's values are spread over: the released measure's
    /// ([`ReleasedMeasure::value_cells`]).
    pub fn value_cells(&self) -> Vec<Option<u64>> {
        match &self.marginals {
            Some((marginals, maps)) => marginals.value_cells(maps),
            None => leaf_value_cells(&self.geometry),
        }
    }

    /// The release of the measure of the `leaves` ([`Backend::measure`]): the plan's budget, parameters and
    /// bound, with the marginals', the refinement's and the pairs' joining them.
    pub fn into_release<B: Backend<Leaves = L>>(self, backend: &B) -> Release {
        let TreeRelease { plan, schedule, geometry, leaves, root_count, marginals, refined, pairs, scan, binning } =
            self;
        let joint = backend.measure(leaves, geometry);
        let mut release = match marginals {
            Some((marginals, maps)) => {
                plan.finish_calibrated(&schedule, joint, maps, marginals, root_count, scan, binning)
            }
            None => plan.finish(&schedule, joint, root_count, scan, binning),
        };
        plan.with_refined_leaves(&mut release, refined);
        match pairs {
            Some((maps, parameters)) => plan.with_pair_maps(release, maps, parameters),
            None => release,
        }
    }
}

/// One histogram per column, or per pair of columns.
type Histograms = Vec<Vec<u64>>;

/// The most cells, summed over the pairs, the marginals' pass counts the pairs' data histograms on (per
/// thread; 32 MB), before their cells are known: a number's [`PAIR_CELLS`](super::pair_axis::PAIR_CELLS), a
/// coded column's codes. A number beside a 1 480-code list takes 2^16; two long lists together may
/// take more than a table of numbers all its pairs: then a pass of their own bins the pairs on their cells
/// once the 1-D release has said which they are.
const FUSED_PAIR_CELLS: usize = 1 << 22;

/// What the marginals' pass gives ([`DataPass::marginal_and_pair_counts`]): each column's leaves, the data's
/// histograms of the pairs it was given, and the scan statistics.
type MarginalPass = (Histograms, Histograms, ScanStats);

/// The joint tree released (noised and made consistent) and what its partition's path left for the rest of
/// the release.
struct JointTree<'p, B: Backend> {
    /// The plan the rest of the release follows (see [`TreeRelease::plan`]).
    plan: &'p PmmPlan,
    schedule: LevelSchedule,
    leaves: B::Leaves,
    /// `--refine-share`: the finer leaves' true counts, when they were binned with the tree's.
    finer: Option<B::Finer>,
    /// The quantile partition's axes, when the tree is cut at its marginals' quantiles.
    warps: Option<Vec<Arc<CellCdf>>>,
    marginals: Option<ReleasedMarginals>,
    /// The data's histograms of [`candidate_pairs`], when the marginals' pass binned them (a rank's own).
    pair_counts: Option<Histograms>,
    scan: ScanStats,
    binning: String,
}

impl PmmPlan {
    /// Bins the data, releases n̂ when the plan says so, noises the tree and makes it consistent; then the
    /// refined leaves, the marginals' maps and the pairs the plan has: on one machine or on a rank of many,
    /// as `backend` holds the counts.
    pub fn release_on<'p, B: Backend>(
        &'p self,
        backend: &B,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<TreeRelease<'p, B::Leaves>> {
        let joint = match self.quantile_marginals() {
            Some(marginals) => self.joint_on_quantiles(marginals, backend, seeds, timings)?,
            None => self.joint_on_midpoints(backend, seeds, timings)?,
        };
        let JointTree { plan, schedule, leaves, finer, warps, marginals, pair_counts, scan, binning } = joint;
        let warps_and_marginals = (warps.as_deref(), marginals.as_ref());
        let (geometry, leaves, refined) =
            plan.refined(backend, &schedule, (leaves, finer), warps_and_marginals, seeds, timings)?;
        // Each column is mapped onto its released marginal from the joint release's own (every rank's part
        // summed).
        let marginals = match marginals {
            Some(marginals) => {
                let mut axes = backend.axis_counts(&leaves, &geometry)?;
                axes.iter_mut().for_each(|axis| backend.ranks().sum(axis));
                let maps = marginals.maps_from(&axes);
                Some((marginals, maps))
            }
            None => None,
        };
        let root_count = backend.released_rows(&leaves);
        let pairs = match plan.pairs() {
            Some(pairs) => {
                let axes = pairs.axes(marginals.as_ref().map(|(released, _)| released), root_count);
                let maps = marginals.as_ref().map(|(_, maps)| maps.as_slice());
                let joint = (&leaves, geometry, maps);
                let step = backend.data().progress.step("pairs");
                let counted = (axes, pair_counts);
                let released = timings.time("pairs", || plan.released_pairs(pairs, backend, joint, counted, seeds))?;
                step.finish();
                Some(released)
            }
            None => None,
        };
        Ok(TreeRelease { plan, schedule, geometry, leaves, root_count, marginals, refined, pairs, scan, binning })
    }

    /// The midpoint partition: the joint leaves at the planned depth, coarsened to the depth n̂ gives (or
    /// binned again when n̂ asks for a deeper tree) and released; then the marginals when the plan has them.
    fn joint_on_midpoints<B: Backend>(
        &self,
        backend: &B,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<JointTree<'_, B>> {
        let planned = self.planned_depth();
        let (counts, scan, binning) = timings.time_in_parts("bin", |parts| {
            backend.bin(CellGeometry::new(self.dims(), planned), None, self.device(), parts)
        })?;
        let (plan, schedule, n_hat, leaves) = timings.time_in_parts("noise and consistency", |parts| {
            let (plan, schedule, n_hat) = self.plan_for_rows(scan.rows_binned, seeds)?;
            let counts = if schedule.depth <= planned {
                parts.time("coarsen", || backend.coarsen(counts, planned, schedule.depth))
            } else {
                let geometry = CellGeometry::new(self.dims(), schedule.depth);
                backend.bin(geometry, None, self.device(), parts)?.0
            };
            let leaves = backend.noised(counts, &schedule, n_hat, plan.consistency(), seeds, parts);
            Ok::<_, Error>((plan, schedule, n_hat, leaves))
        })?;
        let marginals = plan.released_marginals(backend, n_hat, None, seeds, timings)?;
        let (finer, warps, pair_counts) = (None, None, None);
        Ok(JointTree { plan, schedule, leaves, finer, warps, marginals, pair_counts, scan, binning })
    }

    /// The quantile partition (`--partition quantile`): n̂ first when the plan releases it (from a pass
    /// that only counts), then the marginals, then the joint tree binned with each axis cut at its
    /// released marginal's quantiles and released as usual (mapped back through the marginals later).
    fn joint_on_quantiles<B: Backend>(
        &self,
        marginals: &MarginalPlan,
        backend: &B,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<JointTree<'_, B>> {
        let mut pass = |depth, pairs: &[(usize, usize)], cuts: &[PairCut]| {
            let counted = || backend.pass(|data| data.marginal_and_pair_counts(depth, pairs, cuts));
            timings.time("count and marginals", counted)
        };
        let (plan, schedule, n_hat, binned, pair_counts) = match self.releases_n_hat() {
            None => {
                let schedule = self.schedule().ok_or_else(|| Error::internal("a plan without n̂ knows its depth"))?;
                let first = self.marginals_first_at(marginals)?;
                let binned = first.map(|depth| self.binned_marginals(depth, |pairs, cuts| pass(depth, pairs, cuts)));
                let binned = binned.transpose()?;
                let (binned, pair_counts) = binned.map_or((None, None), |(binned, pairs, _)| (Some(binned), pairs));
                (self, schedule.clone(), None, binned, pair_counts)
            }
            Some(row_count) => {
                // One pass counts the rows for n̂ and bins the marginals at the depth planned for n̂'s
                // headroom; once n̂ fixes the trees' depth, their leaves are coarsened to it. Where a plan n̂
                // may pick maps pairs, the same pass bins the data's histograms of the pairs.
                let planned = self.marginal_pass_depth(marginals, row_count)?;
                let (binned, pair_counts, scan) = self.binned_marginals(planned, |pairs, cuts| pass(planned, pairs, cuts))?;
                let n_hat = row_count.release(scan.summed_over(backend.ranks()).rows_binned, &seeds.noise);
                let plan = self.for_n_hat(n_hat);
                let schedule = plan.schedule_for_n_hat(n_hat, row_count)?;
                (plan, schedule, Some(n_hat), Some(binned), pair_counts)
            }
        };
        // The plan n̂ picked may cut its tree at midpoints: the smaller table's (no marginals) and, at d = 3,
        // the larger table's (marginals on midpoint cells).
        let marginals = plan.released_marginals(backend, n_hat, binned, seeds, timings)?;
        let geometry = CellGeometry::new(plan.dims(), schedule.depth);
        let warps = marginals.as_ref().filter(|_| plan.cuts_at_quantiles()).map(|released| released.warps(&geometry));
        // With --refine-share the tree's depth is known before its pass, so one pass bins the finer leaves and
        // the tree's leaves are summed from them.
        let (counts, finer, scan, binning) = match plan.refinement(schedule.depth) {
            None => {
                let bin = |parts: &mut Timings| backend.bin(geometry, warps.as_deref(), plan.device(), parts);
                let (counts, scan, binning) = timings.time_in_parts("bin", bin)?;
                (counts, None, scan, binning)
            }
            Some((_, levels)) => {
                let finer = CellGeometry::new(plan.dims(), schedule.depth + levels);
                let (counts, truth, scan, binning) = timings.time_in_parts("bin", |parts| {
                    let (truth, scan, binning) = backend.bin_finer(finer, warps.as_deref(), plan.device(), parts)?;
                    let tree_leaves = || backend.tree_leaves(&truth, levels, geometry);
                    let counts = parts.time("sum the tree's leaves", tree_leaves);
                    Ok::<_, Error>((counts, truth, scan, binning))
                })?;
                (counts, Some(truth), scan, binned_with_the_tree(&binning, levels))
            }
        };
        let leaves = timings.time_in_parts("noise and consistency", |parts| {
            backend.noised(counts, &schedule, n_hat, plan.consistency(), seeds, parts)
        });
        Ok(JointTree { plan, schedule, leaves, finer, warps, marginals, pair_counts, scan, binning })
    }

    /// Each column's marginal leaves at `depth` and, where pairs may be mapped, `depth` is as fine as their
    /// fine cells ([`PairPlan::fine_cuts`]) and these fit in [`FUSED_PAIR_CELLS`], the data's histograms of
    /// [`candidate_pairs`] on them, from one `pass(pairs, cuts)` ([`DataPass::marginal_and_pair_counts`]).
    fn binned_marginals(
        &self,
        depth: u32,
        pass: impl FnOnce(&[(usize, usize)], &[PairCut]) -> Result<MarginalPass>,
    ) -> Result<(BinnedMarginals, Option<Histograms>, ScanStats)> {
        let candidates = candidate_pairs(self.dims());
        let fused = |cuts: &Vec<PairCut>| {
            let cells: usize = candidates.iter().map(|&(a, b)| cuts[a].cells * cuts[b].cells).sum();
            cuts.iter().all(|cut| cut.bits <= depth) && cells <= FUSED_PAIR_CELLS
        };
        let cuts = self.any_pairs().map(PairPlan::fine_cuts).filter(fused).unwrap_or_default();
        let pairs = if cuts.is_empty() { Vec::new() } else { candidates };
        let (leaves, pair_counts, scan) = pass(&pairs, &cuts)?;
        Ok((BinnedMarginals { depth, leaves }, (!pairs.is_empty()).then_some(pair_counts), scan))
    }

    /// Without n̂ (replace), the depth the marginals' own pass bins at when it runs before the joint tree's so
    /// as to bin the pairs' data histograms too: where pairs are mapped; else `None` (the marginals bin later).
    fn marginals_first_at(&self, marginals: &MarginalPlan) -> Result<Option<u32>> {
        if self.any_pairs().is_none() {
            return Ok(None);
        }
        Ok(Some(marginals.tree(None)?.pass_depth()))
    }

    /// The released `leaves` with the dense ones cut finer when the plan has `--refine-share`: from the finer
    /// leaves' true counts when they were binned with the tree's (`finer`), else from a pass binning the data
    /// that much deeper, on the same axes (`warps`: the quantile partition's, so that the finer cells nest in
    /// the leaves). On midpoint cells the rows no sub-cell places follow the released `marginals` inside their
    /// cells when there are some. Returns the released leaves' geometry with them, and the report's words.
    fn refined<B: Backend>(
        &self,
        backend: &B,
        schedule: &LevelSchedule,
        (leaves, finer): (B::Leaves, Option<B::Finer>),
        (warps, marginals): (Option<&[Arc<CellCdf>]>, Option<&ReleasedMarginals>),
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<(CellGeometry, B::Leaves, Option<LeafRefinementParameters>)> {
        let Some((refinement, levels)) = self.refinement(schedule.depth) else {
            return Ok((CellGeometry::new(self.dims(), schedule.depth), leaves, None));
        };
        let fine = CellGeometry::new(self.dims(), schedule.depth + levels);
        let finer = match finer {
            Some(finer) => finer,
            None => {
                let bin = |parts: &mut Timings| backend.bin_finer(fine, warps, self.device(), parts);
                timings.time_in_parts("bin the refined leaves", bin)?.0
            }
        };
        let shapes = AxisShapes::of_run(&fine, marginals, warps.is_some());
        let (leaves, parameters) = timings.time("refine the dense leaves", || {
            backend.refined(leaves, finer, refinement, (fine, levels), shapes.as_ref(), seeds)
        })?;
        Ok((fine, leaves, Some(parameters)))
    }

    /// The marginals' release when the plan has them, sized by n̂ when this plan released it: each column's
    /// leaves at its tree's depth, coarsened from `binned` where that pass went as deep (else binned by a pass
    /// of their own, every column in one), summed over the ranks and released alike on every rank
    /// ([`MarginalPlan::release_leaves`]).
    fn released_marginals<B: Backend>(
        &self,
        backend: &B,
        n_hat: Option<u64>,
        binned: Option<BinnedMarginals>,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<Option<ReleasedMarginals>> {
        let Some(marginals) = self.marginals() else { return Ok(None) };
        let row_count = self.released_row_count(n_hat);
        let released = timings.time("marginals", || {
            let tree = marginals.tree(row_count)?;
            let mut leaves = backend.pass(|data| MarginalPlan::leaves(&tree, data, binned))?;
            leaves.iter_mut().for_each(|column| backend.ranks().sum(column));
            backend.work(|| marginals.release_leaves(&tree, leaves, seeds))
        })?;
        Ok(Some(released))
    }

    /// `--pair-share`: releases the pair histograms, on `axes`' cells, of the tree chosen from rows drawn from
    /// the joint release (its `leaves` on `geometry`, each column mapped by `maps` onto its released marginal)
    /// and fits the maps of the pairs the gate lets through; the maps come back in the order they apply. The
    /// data's histograms of [`candidate_pairs`] are `counted` where the marginals' pass binned them on their
    /// fine cells (then grouped into `axes`' cells), else binned here. Every histogram of either is summed
    /// over the ranks, so each rank releases the same pairs and fits the same maps as one machine.
    fn released_pairs<B: Backend>(
        &self,
        pairs: &PairPlan,
        backend: &B,
        (leaves, geometry, maps): (&B::Leaves, CellGeometry, Option<&[Option<MonotoneMap>]>),
        (axes, counted): (Vec<PairAxis>, Option<Histograms>),
        seeds: &RunSeeds,
    ) -> Result<(Vec<PairMap>, PairParameters)> {
        let released_rows = backend.released_rows(leaves);
        let mut columns = vec![Vec::new(); self.dims()];
        if released_rows > 0 {
            let drawn = pairs.drawn_rows(released_rows);
            // Every drawn row is counted, so their order does not matter: cell order, the cheaper one.
            let seeded = (self.placement(), RowOrder::Cells, seeds.pair_sample());
            // All of them on one machine; a rank's even share of them.
            let rows = backend.rows(leaves, geometry, Some(drawn as u64), seeded, maps)?;
            backend.work(|| rows.sample_rows(0, rows.total_rows() as usize, &mut columns));
        }
        let ranks = backend.ranks();
        let cuts = pairs.cuts(&axes);
        let regroupings = pairs.regroupings(&axes);
        let pair_counts = |candidates: &[(usize, usize)]| -> Result<Histograms> {
            let mut counts = match counted {
                Some(fine) => (fine.iter().zip(candidates))
                    .map(|(fine, &(a, b))| grouped(fine, &regroupings[a], &regroupings[b]))
                    .collect(),
                None => backend.pass(|data| data.pair_counts(candidates, &cuts))?.0,
            };
            counts.iter_mut().for_each(|histogram| ranks.sum(histogram));
            Ok(counts)
        };
        pairs.release_on(DrawnRows { columns, released_rows, ranks }, &axes, pair_counts, seeds)
    }
}
