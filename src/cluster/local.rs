//! Ranks as threads of one process, exchanging through shared memory: the tests run the distributed
//! driver for any number of ranks without MPI, and compare it with the single-machine run.

use std::sync::{Barrier, Mutex, PoisonError};

use super::{Communicator, RankSums};

/// One thread's rank of a [`run_local`] group.
pub struct LocalRank<'a> {
    rank: usize,
    board: &'a Board,
}

/// Where the ranks of one group leave their contributions to a collective.
struct Board {
    slots: Mutex<Vec<Vec<u64>>>,
    barrier: Barrier,
}

/// Runs `work` on `size` ranks, each a thread with its own [`LocalRank`]; returns their results in rank
/// order.
pub fn run_local<T: Send>(size: usize, work: impl Fn(&LocalRank) -> T + Sync) -> Vec<T> {
    let board = Board { slots: Mutex::new(vec![Vec::new(); size]), barrier: Barrier::new(size) };
    std::thread::scope(|scope| {
        let ranks: Vec<_> = (0..size)
            .map(|rank| {
                let (board, work) = (&board, &work);
                scope.spawn(move || work(&LocalRank { rank, board }))
            })
            .collect();
        ranks.into_iter().map(|rank| rank.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

impl LocalRank<'_> {
    /// Every rank's `mine`, in rank order.
    fn exchange(&self, mine: Vec<u64>) -> Vec<Vec<u64>> {
        self.board.slots.lock().unwrap_or_else(PoisonError::into_inner)[self.rank] = mine;
        self.board.barrier.wait();
        let all = self.board.slots.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // Nobody deposits the next collective's values before everyone has read these.
        self.board.barrier.wait();
        all
    }
}

impl RankSums for LocalRank<'_> {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.board.barrier_size()
    }

    fn sum(&self, values: &mut [u64]) {
        let all = self.exchange(values.to_vec());
        for (index, value) in values.iter_mut().enumerate() {
            *value = all.iter().map(|rank| rank[index]).sum();
        }
    }
}

impl Communicator for LocalRank<'_> {
    fn broadcast(&self, bytes: &mut [u8]) {
        let all = self.exchange(bytes.iter().map(|&byte| u64::from(byte)).collect());
        for (byte, &value) in bytes.iter_mut().zip(&all[0]) {
            *byte = value as u8;
        }
    }

    fn all_to_all(&self, sends: Vec<Vec<u64>>) -> Vec<Vec<u64>> {
        // Each rank deposits [len_0, values_0.., len_1, values_1.., ...] and reads its own piece of each.
        let mut flat = Vec::new();
        for send in sends {
            flat.push(send.len() as u64);
            flat.extend(send);
        }
        self.exchange(flat)
            .into_iter()
            .map(|flat| {
                let mut at = 0;
                for _ in 0..self.rank {
                    at += 1 + flat[at] as usize;
                }
                flat[at + 1..at + 1 + flat[at] as usize].to_vec()
            })
            .collect()
    }

    fn reduce_scatter(&self, local: &[u64], starts: &[usize]) -> Vec<u64> {
        let all = self.exchange(local.to_vec());
        (starts[self.rank]..starts[self.rank + 1]).map(|index| all.iter().map(|rank| rank[index]).sum()).collect()
    }
}

impl Board {
    fn barrier_size(&self) -> usize {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_combine_every_rank() {
        let results = run_local(3, |comm| {
            let mut bytes = [comm.rank() as u8 + 7; 2];
            comm.broadcast(&mut bytes);
            let mut values = vec![comm.rank() as u64, 1];
            comm.sum(&mut values);
            let local: Vec<u64> = (0..6).map(|index| index * 10 + comm.rank() as u64).collect();
            let mine = comm.reduce_scatter(&local, &[0, 1, 4, 6]);
            let sends = (0..3).map(|to| vec![comm.rank() as u64 * 10 + to; to as usize]).collect();
            (bytes, values, mine, comm.all_to_all(sends))
        });
        for (rank, (bytes, values, mine, received)) in results.into_iter().enumerate() {
            let expected: Vec<Vec<u64>> = (0..3).map(|from| vec![from * 10 + rank as u64; rank]).collect();
            assert_eq!(received, expected);
            assert_eq!(bytes, [7, 7]);
            assert_eq!(values, vec![3, 3]);
            let expected: Vec<u64> = [0..1, 1..4, 4..6][rank].clone().map(|index| index * 30 + 3).collect();
            assert_eq!(mine, expected);
        }
    }
}
