//! The MPI world (feature `mpi`): `mpirun -n P dpsynth synth ... --output DIR` (or `srun` under Slurm)
//! runs [`super::driver::synthesize_across`] with one rank per process. Collectives are called from the
//! main thread only (MPI initialised for one thread); each rank's work runs on its own rayon pool.

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives, Root};

use super::driver::{synthesize_across, PartsOutput};
use super::RankSums as _;
use crate::error::{compact_number, Error, Result, EXIT_OK};
use crate::options::SynthRequest;
use crate::progress::Progress;

/// Environment variables that mpirun / mpiexec (Open MPI, MPICH, PMIx) or srun set in every rank.
const LAUNCHER_VARIABLES: [&str; 4] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"];

/// Whether this process was started as a rank by an MPI launcher.
pub fn launched_by_mpi() -> bool {
    LAUNCHER_VARIABLES.iter().any(|variable| std::env::var_os(variable).is_some())
}

pub struct MpiWorld {
    world: SimpleCommunicator,
    /// Finalises MPI when dropped, after the world's last use.
    _universe: Universe,
}

impl MpiWorld {
    pub fn initialize() -> Result<Self> {
        let universe = mpi::initialize().ok_or_else(|| Error::internal("MPI was initialised twice"))?;
        Ok(MpiWorld { world: universe.world(), _universe: universe })
    }
}

impl super::RankSums for MpiWorld {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn sum(&self, values: &mut [u64]) {
        let send = values.to_vec();
        self.world.all_reduce_into(&send[..], values, SystemOperation::sum());
    }
}

impl super::Communicator for MpiWorld {
    fn broadcast(&self, bytes: &mut [u8]) {
        self.world.process_at_rank(0).broadcast_into(bytes);
    }

    fn all_to_all(&self, sends: Vec<Vec<u64>>) -> Vec<Vec<u64>> {
        let send_counts: Vec<i32> = sends.iter().map(|send| count(send.len())).collect();
        let mut receive_counts = vec![0i32; sends.len()];
        self.world.all_to_all_into(&send_counts[..], &mut receive_counts[..]);
        let displacements = |counts: &[i32]| -> Vec<i32> {
            counts.iter().scan(0i32, |at, &count| Some(std::mem::replace(at, *at + count))).collect()
        };
        let (send_displacements, receive_displacements) = (displacements(&send_counts), displacements(&receive_counts));
        let flat: Vec<u64> = sends.into_iter().flatten().collect();
        let mut received = vec![0u64; receive_counts.iter().map(|&count| count as usize).sum()];
        {
            let send = Partition::new(&flat[..], &send_counts[..], &send_displacements[..]);
            let mut receive = PartitionMut::new(&mut received[..], &receive_counts[..], &receive_displacements[..]);
            self.world.all_to_all_varcount_into(&send, &mut receive);
        }
        receive_counts
            .iter()
            .zip(&receive_displacements)
            .map(|(&count, &at)| received[at as usize..(at + count) as usize].to_vec())
            .collect()
    }

    fn reduce_scatter(&self, local: &[u64], starts: &[usize]) -> Vec<u64> {
        // MPI's reduce-scatter takes equal blocks: each rank's block is padded to the largest.
        let size = self.size();
        let block = (0..size).map(|rank| starts[rank + 1] - starts[rank]).max().unwrap_or(0);
        let mut mine = vec![0u64; block];
        if block > 0 {
            let mut send = vec![0u64; block * size];
            for rank in 0..size {
                let len = starts[rank + 1] - starts[rank];
                send[rank * block..rank * block + len].copy_from_slice(&local[starts[rank]..starts[rank + 1]]);
            }
            self.world.reduce_scatter_block_into(&send[..], &mut mine[..], SystemOperation::sum());
        }
        let rank = self.rank();
        mine.truncate(starts[rank + 1] - starts[rank]);
        mine
    }
}

/// A message length as MPI's 32-bit count (a rank's share of a release stays below 2^31 values).
fn count(len: usize) -> i32 {
    i32::try_from(len).expect("a message of fewer than 2^31 values")
}

/// `synth` as one rank of an MPI job: `--output` names the directory of the parts. Returns the exit
/// code; a rank that fails aborts the whole job (MPI_Abort), so no rank waits forever for it.
pub fn run_synth(request: SynthRequest) -> i32 {
    let world = match MpiWorld::initialize() {
        Ok(world) => world,
        Err(error) => {
            eprintln!("error: {error}");
            return error.exit_code();
        }
    };
    let rank = world.world.rank();
    let outputs = PartsOutput {
        directory: request.outputs.table.clone(),
        report: request.outputs.report.clone(),
        diagnostics: request.outputs.diagnostics.clone(),
    };
    let progress = Progress::for_terminal(request.quiet || rank != 0);
    match synthesize_across(&world, &request.input, &outputs, &request.options, &progress) {
        Ok(report) => {
            if let (Some(report), false) = (report, request.quiet) {
                eprintln!(
                    "wrote {} synthetic rows in {} parts to {} (ε = {}, {})",
                    report.release.synthetic_rows,
                    world.world.size(),
                    outputs.directory.display(),
                    compact_number(report.guarantee.epsilon),
                    report.parameters.summary(),
                );
            }
            EXIT_OK
        }
        Err(error) => {
            eprintln!("error (rank {rank}): {error}");
            world.world.abort(error.exit_code())
        }
    }
}
