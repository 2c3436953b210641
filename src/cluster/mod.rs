//! Past one machine (SPEC §9): PMM, lowdim, PSMM and PE over ranks that each read a share of the row groups,
//! started by `mpirun` / `srun` (the `mpi` feature, [`mpi`]), or as threads of one process for the tests
//! ([`local::run_local`]). The ranks compute one release, the single-machine one: with `--seed`, the
//! parts they write are, in rank order, the single-machine table, for any number of ranks. PMM's tree is
//! split by subtrees; lowdim, PSMM and PE are replicated: every rank's passes end in sums over the ranks
//! ([`RankSums`], `DataPass::ranks`), and each rank makes the whole release from them.
//!
//! - [`Communicator`]: the few collectives a run needs, called in the same order on every rank;
//! - [`exchange`]: a rank's leaf counts, dense or as sorted codes, sent to the ranks that own them;
//! - [`part`]: PMM's release split by subtrees: every rank releases the top levels (identically), then
//!   noises, makes consistent and samples the subtrees it owns;
//! - [`rows`]: `--rows` over the whole tree's leaves, each rank allocating its own;
//! - [`driver`]: `synth` across ranks: open, plan, bin, release, write `part-RANK.parquet`, commit.

pub mod driver;
pub mod exchange;
pub mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod part;
pub mod rows;

use std::sync::{mpsc, Mutex, PoisonError};

use crate::error::{Error, Result};

/// The one collective a replicated release's passes need ([`crate::binner::pass::DataPass::ranks`]): sums
/// over the ranks. Every rank calls it the same number of times, in the same order.
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

/// Runs `work` on `pool` and performs on this thread the sums it asks for through the [`RankSums`] it is
/// given: MPI is initialised for one thread, so its collectives stay on the thread that called this,
/// while a release's passes run on the pool.
pub fn with_sums_on_this_thread<T: Send>(
    comm: &dyn Communicator,
    pool: &rayon::ThreadPool,
    work: impl FnOnce(&(dyn RankSums + Sync)) -> T + Send,
) -> T {
    let (requests, asked) = mpsc::channel::<(Vec<u64>, mpsc::Sender<Vec<u64>>)>();
    let (rank, size) = (comm.rank(), comm.size());
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let funnel = SumFunnel { rank, size, requests: Mutex::new(requests) };
            pool.install(|| work(&funnel))
        });
        // Ends when the work has returned (or panicked) and dropped the funnel.
        for (mut values, reply) in asked {
            comm.sum(&mut values);
            let _ = reply.send(values);
        }
        worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// [`RankSums`] for the pool's threads: each sum is sent to the thread that owns the communicator.
struct SumFunnel {
    rank: usize,
    size: usize,
    requests: Mutex<mpsc::Sender<(Vec<u64>, mpsc::Sender<Vec<u64>>)>>,
}

impl RankSums for SumFunnel {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn sum(&self, values: &mut [u64]) {
        let (reply, summed) = mpsc::channel();
        let sent = self.requests.lock().unwrap_or_else(PoisonError::into_inner).send((values.to_vec(), reply));
        sent.expect("the communicator's thread serves sums until the work returns");
        values.copy_from_slice(&summed.recv().expect("the communicator's thread answers every sum"));
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
