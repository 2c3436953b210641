//! `--rows N` across ranks: [`crate::sampler::allocate_rows`] over the whole tree (the running total of the
//! quotas rounded, in code order), each rank computing its own leaves' shares from the weight of the ranks
//! before it, which is all the running total needs.

use super::Communicator;
use crate::sampler::allocate_from;

/// This rank's leaves' rows when the whole tree's `root_count` released rows become `rows`. `own_counts`
/// are the consistent counts of the leaves this rank owns, in code order; `total_leaves` the leaves of the
/// whole tree.
pub fn allocate_part_rows(comm: &dyn Communicator, own_counts: &[u64], total_leaves: usize, root_count: u64, rows: u64) -> Vec<u64> {
    // An empty release spreads the rows evenly over every leaf, as on one machine.
    if root_count == 0 {
        let before = rows_before(comm, own_counts.len() as u64);
        return allocate_from(std::iter::repeat_n(1, own_counts.len()), u128::from(before), total_leaves as u128, rows);
    }
    let before = rows_before(comm, own_counts.iter().sum());
    allocate_from(own_counts.iter().copied(), u128::from(before), u128::from(root_count), rows)
}

/// What the ranks before this one hold together (rows, or leaves), given what this rank holds.
pub fn rows_before(comm: &dyn Communicator, own_rows: u64) -> u64 {
    let mut rows = vec![0u64; comm.size()];
    rows[comm.rank()] = own_rows;
    comm.sum(&mut rows);
    rows[..comm.rank()].iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::even_starts;
    use crate::cluster::local::run_local;
    use crate::sampler::allocate_rows;

    #[test]
    fn the_parts_allocate_what_one_machine_allocates() {
        let cases: Vec<Vec<u64>> = vec![
            (0..1000u64).map(|leaf| (leaf * 7919) % 13).collect(),
            vec![0; 64],
            vec![5; 96],
            (0..500u64).map(|leaf| u64::from(leaf % 50 == 0) * 1_000_003).collect(),
        ];
        for counts in &cases {
            let root: u64 = counts.iter().sum();
            for rows in [0, 1, 7, 999, root + 1, 123_457, 10_000_000_019] {
                let whole = allocate_rows(counts, rows);
                for ranks in [1, 2, 3, 7] {
                    let starts = even_starts(counts.len(), ranks);
                    let parts = run_local(ranks, |comm| {
                        let own = &counts[starts[comm.rank()]..starts[comm.rank() + 1]];
                        allocate_part_rows(comm, own, counts.len(), root, rows)
                    });
                    let joined: Vec<u64> = parts.into_iter().flatten().collect();
                    assert_eq!(joined, whole, "{ranks} ranks, {rows} rows");
                }
            }
        }
    }
}
