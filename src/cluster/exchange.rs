//! A rank's leaf counts and their way to the ranks that own them. Dense: a full histogram of the 2^r
//! leaves, reduce-scattered (cheapest when the rank's rows are many). Sparse: the rank's rows as sorted
//! runs of leaf codes, sent to their owners with an all-to-all, so a rank never holds more than its
//! rows and its own 2^r / P leaves: what lets the tree outgrow one machine's memory (the plan's memory
//! cap grows with the number of ranks).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Communicator;
use crate::binner::device::DeviceChoice;
use crate::binner::pass::DataPass;
use crate::binner::{AxisPlan, ScanStats};
use crate::error::Result;
use crate::geometry::partition::CellGeometry;
use crate::mechanism::pmm::refine::{FinerCounts, SparseLeaves};
use crate::mechanism::pmm::schedule::cell_memory_bytes;
use crate::mechanism::pmm::{coarsen_leaves, summed_blocks};
use crate::progress::Timings;

/// How the ranks of a run hold and exchange their leaf counts (the same on every rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    Dense,
    Sparse,
}

/// The public values, the same on every rank, that choose the [`Exchange`] at a depth.
#[derive(Clone, Copy, Debug)]
pub struct ExchangeRule {
    pub file_rows: u64,
    pub ranks: usize,
    pub rank_memory_limit: u64,
    pub threads: usize,
}

impl ExchangeRule {
    /// Dense while a full histogram of the leaves at `depth` fits a rank's own memory limit and the rank's
    /// rows are at least an eighth of them; sparse otherwise.
    pub fn at(&self, depth: u32) -> Exchange {
        let dense_fits = cell_memory_bytes(depth, self.threads) <= u128::from(self.rank_memory_limit);
        let rows_per_rank = self.file_rows / self.ranks as u64;
        if dense_fits && u128::from(rows_per_rank) * 8 >= 1u128 << depth {
            Exchange::Dense
        } else {
            Exchange::Sparse
        }
    }
}

/// One rank's true leaf counts at one depth.
pub enum LocalCounts {
    Dense(Vec<u64>),
    /// Ascending leaf codes and their counts.
    Sparse {
        codes: Vec<u32>,
        counts: Vec<u64>,
    },
}

impl LocalCounts {
    /// Bins the rank's share of the rows (`data`) at `geometry`, each column quantised by `axes`
    /// ([`DataPass::axes`]), the way `exchange` says; and what the scan saw, with the binner's line for
    /// the report.
    pub fn bin(
        data: &DataPass,
        geometry: CellGeometry,
        axes: &[AxisPlan],
        device: DeviceChoice,
        exchange: Exchange,
        timings: &mut Timings,
    ) -> Result<(LocalCounts, ScanStats, String)> {
        if exchange == Exchange::Dense {
            let (leaves, scan, binning) = data.leaf_counts_on(geometry, axes, device, timings)?;
            return Ok((LocalCounts::Dense(leaves), scan, binning));
        }
        let (codes, scan, binning) = timings.time("read and sort", || data.sorted_leaf_codes(geometry, axes))?;
        let (codes, counts) = runs(codes.into_iter().map(|code| (code, 1)));
        Ok((LocalCounts::Sparse { codes, counts }, scan, format!("{binning}, sent to their owners")))
    }

    /// The counts of the ancestors at depth `to` of the leaves at depth `from` (Morton order: a leaf's
    /// ancestor k levels up is its code shifted right by k).
    pub fn coarsen(self, from: u32, to: u32) -> LocalCounts {
        match self {
            LocalCounts::Dense(leaves) => LocalCounts::Dense(coarsen_leaves(leaves, from, to)),
            sparse => sparse.coarsened(from, to),
        }
    }

    /// [`Self::coarsen`], keeping these counts.
    pub fn coarsened(&self, from: u32, to: u32) -> LocalCounts {
        match self {
            LocalCounts::Dense(leaves) => LocalCounts::Dense(summed_blocks(leaves, from - to)),
            LocalCounts::Sparse { codes, counts } => {
                let (codes, counts) = runs(codes.iter().map(|&code| code >> (from - to)).zip(counts.iter().copied()));
                LocalCounts::Sparse { codes, counts }
            }
        }
    }

    /// Every rank's counts of the leaves this rank owns (`leaf_starts[rank] ..`), summed.
    pub fn to_owners(self, comm: &dyn Communicator, leaf_starts: &[usize]) -> Vec<u64> {
        match self {
            LocalCounts::Dense(leaves) => comm.reduce_scatter(&leaves, leaf_starts),
            LocalCounts::Sparse { codes, counts } => {
                let first = leaf_starts[comm.rank()];
                let mut own = vec![0u64; leaf_starts[comm.rank() + 1] - first];
                for pairs in sent_to_owners(comm, leaf_starts, &codes, &counts) {
                    for pair in pairs.chunks_exact(2) {
                        own[pair[0] as usize - first] += pair[1];
                    }
                }
                own
            }
        }
    }

    /// [`Self::to_owners`] for the finer leaves of `--refine-share`, 2^6 times the tree's: from the sparse
    /// exchange, only the leaves that hold rows, so that a rank never holds all of its finer leaves.
    pub fn finer_to_owners(self, comm: &dyn Communicator, leaf_starts: &[usize]) -> FinerCounts {
        match self {
            LocalCounts::Dense(_) => FinerCounts::Histogram(self.to_owners(comm, leaf_starts)),
            LocalCounts::Sparse { codes, counts } => {
                let (codes, counts) = merged_runs(&sent_to_owners(comm, leaf_starts, &codes, &counts));
                FinerCounts::Listed(SparseLeaves { codes, counts })
            }
        }
    }
}

/// Sends each (code, count) run to the rank that owns its leaf; returns the runs every rank sent this one,
/// as (code, count) pairs, ascending from each rank.
fn sent_to_owners(comm: &dyn Communicator, leaf_starts: &[usize], codes: &[u32], counts: &[u64]) -> Vec<Vec<u64>> {
    let mut sends = vec![Vec::new(); comm.size()];
    for (&code, &count) in codes.iter().zip(counts) {
        let owner = leaf_starts.partition_point(|&start| start <= code as usize) - 1;
        sends[owner].extend([u64::from(code), count]);
    }
    comm.all_to_all(sends)
}

/// The ranks' ascending (code, count) pairs merged into one run per code.
fn merged_runs(received: &[Vec<u64>]) -> (Vec<u32>, Vec<u64>) {
    let mut heads: BinaryHeap<Reverse<(u64, usize, usize)>> = (received.iter().enumerate())
        .filter(|(_, pairs)| !pairs.is_empty())
        .map(|(rank, pairs)| Reverse((pairs[0], rank, 0)))
        .collect();
    let ascending = std::iter::from_fn(|| {
        let Reverse((code, rank, at)) = heads.pop()?;
        let pairs = &received[rank];
        if at + 2 < pairs.len() {
            heads.push(Reverse((pairs[at + 2], rank, at + 2)));
        }
        Some((code as u32, pairs[at + 1]))
    });
    runs(ascending)
}

/// Runs of equal codes (given in ascending order) with their counts added.
fn runs(sorted: impl IntoIterator<Item = (u32, u64)>) -> (Vec<u32>, Vec<u64>) {
    let (mut codes, mut counts): (Vec<u32>, Vec<u64>) = (Vec::new(), Vec::new());
    for (code, count) in sorted {
        if codes.last() == Some(&code) {
            *counts.last_mut().expect("a count per code") += count;
        } else {
            codes.push(code);
            counts.push(count);
        }
    }
    (codes, counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::local::run_local;
    use crate::cluster::RankSums;

    #[test]
    fn sparse_and_dense_counts_reach_their_owners_alike() {
        let depth = 10;
        let leaves = 1usize << depth;
        let starts = [0, 100, 100, 700, leaves];
        let results = run_local(4, |comm| {
            // Each rank's rows: a few leaves, some shared with other ranks.
            let rows: Vec<u32> = (0..300u32).map(|row| (row * 37 + comm.rank() as u32 * 101) % leaves as u32).collect();
            let mut dense = vec![0u64; leaves];
            for &code in &rows {
                dense[code as usize] += 1;
            }
            let mut sorted = rows.clone();
            sorted.sort_unstable();
            let (codes, counts) = runs(sorted.into_iter().map(|code| (code, 1)));
            let sparse = LocalCounts::Sparse { codes, counts };
            let from_dense = LocalCounts::Dense(dense.clone()).coarsen(depth, depth - 3);
            let from_sparse = sparse.coarsen(depth, depth - 3);
            let coarse_starts: Vec<usize> = starts.iter().map(|start| start >> 3).collect();
            (from_dense.to_owners(comm, &coarse_starts), from_sparse.to_owners(comm, &coarse_starts))
        });
        for (dense, sparse) in &results {
            assert_eq!(dense, sparse);
        }
        let total: u64 = results.iter().flat_map(|(dense, _)| dense).sum();
        assert_eq!(total, 4 * 300);
    }

    #[test]
    fn finer_counts_reach_their_owners_listed_from_the_sparse_exchange() {
        let depth = 12;
        let starts = [0, 1000, 1000, 2500, 1 << depth];
        let results = run_local(4, |comm| {
            // Even rows are every rank's, odd ones this rank's.
            let rank = comm.rank() as u32;
            let mut rows: Vec<u32> = (0..500u32).map(|row| (row * 89 + row % 2 * rank * 7) % (1 << depth)).collect();
            rows.sort_unstable();
            let (codes, counts) = runs(rows.into_iter().map(|code| (code, 1)));
            let mut dense = vec![0u64; 1 << depth];
            codes.iter().zip(&counts).for_each(|(&code, &count)| dense[code as usize] += count);
            let from_dense = LocalCounts::Dense(dense).finer_to_owners(comm, &starts);
            (from_dense, LocalCounts::Sparse { codes, counts }.finer_to_owners(comm, &starts))
        });
        let mut total = 0;
        for (rank, (from_dense, from_sparse)) in results.into_iter().enumerate() {
            let (FinerCounts::Histogram(own), FinerCounts::Listed(listed)) = (from_dense, from_sparse) else {
                panic!("a histogram from the dense exchange, the listed leaves from the sparse one");
            };
            assert!(listed.counts.iter().all(|&count| count > 0));
            assert_eq!(listed.to_dense(starts[rank], starts[rank + 1] - starts[rank]), own, "rank {rank}");
            total += listed.total();
        }
        assert_eq!(total, 4 * 500);
    }
}
