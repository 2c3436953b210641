//! Past one machine (SPEC §9): PMM, lowdim, PSMM and PE over ranks that each read a share of the row groups,
//! started by `mpirun` / `srun` (the `mpi` feature, [`mpi`]), or as threads of one process for the tests
//! ([`local::run_local`]). The ranks compute one release, the single-machine one: with `--seed`, the
//! parts they write are, in rank order, the single-machine table, for any number of ranks. PMM's tree is
//! split by subtrees; lowdim, PSMM and PE are replicated: every rank's passes end in sums over the ranks
//! ([`RankSums`], `DataPass::ranks`), and each rank makes the whole release from them.
//!
//! - [`Communicator`]: the few collectives a run needs, called in the same order on every rank (with
//!   [`RankSums`], [`agree`] and the shares of [`even_starts`] and [`weighted_starts`], from `crate::ranks`,
//!   where the engine sums over ranks without knowing what carries the sums);
//! - [`backend`]: a rank's side of PMM's one release (`pmm::release`), which every rank runs as one machine
//!   would;
//! - [`exchange`]: a rank's leaf counts, dense or as sorted codes, sent to the ranks that own them;
//! - [`part`]: PMM's release split by subtrees: every rank releases the top levels (identically), then
//!   noises, makes consistent and samples the subtrees it owns;
//! - [`rows`]: `--rows` over the whole tree's leaves, each rank allocating its own;
//! - [`driver`]: `synth` across ranks: open, plan, release, write `part-RANK.parquet`, commit.

pub mod backend;
pub mod driver;
pub mod exchange;
pub mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod part;
pub mod rows;

use std::sync::{mpsc, Mutex, PoisonError};

pub use crate::ranks::{agree, even_starts, weighted_starts, Communicator, RankSums};

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
