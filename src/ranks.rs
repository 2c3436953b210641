//! The ranks of a run as the engine sees them (SPEC §9): how many there are, which one this is, and the few
//! collectives a release across them calls. A foundation room: the binning pass and the mechanisms sum over
//! ranks through these traits without knowing what carries the sums (MPI, threads of one process, or
//! [`OneRank`] on one machine); `crate::cluster` implements them and runs the ranks.

use crate::error::{Error, Result};

/// The one collective a replicated release's passes need (`binner::pass::DataPass::ranks`): sums over the
/// ranks. Every rank calls it the same number of times, in the same order.
pub trait RankSums {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// The element-wise sum over the ranks of `values`, in place on every rank.
    fn sum(&self, values: &mut [u64]);
}

/// The collectives of a distributed run. Every rank calls each one, in the same order.
pub trait Communicator: RankSums {
    /// Rank 0's `bytes` on every rank (each rank passes a buffer of the same length).
    fn broadcast(&self, bytes: &mut [u8]);
    /// Each rank passes an array of the same length; rank r gets the element-wise sum over the ranks of
    /// its block `starts[r] .. starts[r + 1]` (`starts` has size + 1 entries, the same on every rank).
    fn reduce_scatter(&self, local: &[u64], starts: &[usize]) -> Vec<u64>;
    /// `sends[r]` goes to rank r; returns what every rank sent to this one, in rank order.
    fn all_to_all(&self, sends: Vec<Vec<u64>>) -> Vec<Vec<u64>>;
}

/// One machine as the only rank: its sums are its own values, so a release written over [`RankSums`] runs
/// on one machine unchanged.
pub struct OneRank;

impl RankSums for OneRank {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn sum(&self, _values: &mut [u64]) {}
}

/// Makes every rank agree on a step that may fail on some: a rank that failed returns its own error,
/// the others an error saying which ranks failed (each failing rank names its file and column).
pub fn agree<T>(comm: &dyn RankSums, outcome: Result<T>) -> Result<T> {
    let mut failed = vec![0u64; comm.size()];
    failed[comm.rank()] = u64::from(outcome.is_err());
    comm.sum(&mut failed);
    let outcome = outcome?;
    let ranks: Vec<String> = (0..failed.len()).filter(|&rank| failed[rank] != 0).map(|rank| rank.to_string()).collect();
    if ranks.is_empty() {
        Ok(outcome)
    } else {
        Err(Error::bad_input(format!(
            "rank {} failed (its message above names the file and the reason); nothing was written",
            ranks.join(", ")
        )))
    }
}

/// The contiguous share of `count` items (row groups, cells) that rank `rank` of `size` owns:
/// `starts[r] .. starts[r + 1]`, sizes differing by at most one.
pub fn even_starts(count: usize, size: usize) -> Vec<usize> {
    (0..=size).map(|rank| (count as u128 * rank as u128 / size as u128) as usize).collect()
}

/// Shares of items with the given weights (bytes of row groups), contiguous and in order: rank r takes
/// the items whose weight midpoint falls in the r-th 1/size of the total.
pub fn weighted_starts(weights: &[u64], size: usize) -> Vec<usize> {
    let total: u128 = weights.iter().map(|&weight| u128::from(weight)).sum();
    if total == 0 {
        return even_starts(weights.len(), size);
    }
    let mut starts = vec![0usize; size + 1];
    let mut before = 0u128;
    for (item, &weight) in weights.iter().enumerate() {
        // The rank whose share holds this item's midpoint.
        let midpoint = 2 * before + u128::from(weight);
        let rank = ((midpoint * size as u128) / (2 * total)).min(size as u128 - 1) as usize;
        for start in &mut starts[rank + 1..] {
            *start = item + 1;
        }
        before += u128::from(weight);
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_item_once_in_order() {
        for (count, size) in [(0, 3), (1, 4), (7, 3), (64, 7), (1000, 4)] {
            let starts = even_starts(count, size);
            assert_eq!((starts[0], starts[size]), (0, count));
            assert!(starts.windows(2).all(|pair| pair[0] <= pair[1] && pair[1] - pair[0] <= count / size + 1));
        }
        let weights = [10, 10, 10, 10, 1000, 10, 10, 10];
        let starts = weighted_starts(&weights, 2);
        assert_eq!((starts[0], starts[2]), (0, weights.len()));
        assert!(starts.windows(2).all(|pair| pair[0] <= pair[1]));
        // The heavy row group's midpoint is past half the bytes: it goes to rank 1 with what follows.
        assert_eq!(starts[1], 4);
        assert_eq!(weighted_starts(&[0, 0, 0], 2), even_starts(3, 2));
    }
}
