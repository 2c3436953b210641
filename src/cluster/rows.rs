//! The rows each rank writes. `--rows N` across ranks: [`crate::sampler::allocate_rows`] over the whole tree
//! (the running total of the quotas rounded, in code order), each rank computing its own leaves' shares from
//! the weight of the ranks before it, which is all the running total needs. Then the rows are dealt out evenly
//! over the ranks, whichever leaves they lie in.

use super::Communicator;
use crate::sampler::allocate_from;

/// This rank's leaves' rows when the whole tree's `root_count` released rows become `rows`. `own_counts`
/// are the consistent counts of the leaves this rank owns, in code order (of those that hold rows only, where
/// the release is not empty, as leaves without rows get none); `total_leaves` the leaves of the whole tree.
pub fn allocate_part_rows(
    comm: &dyn Communicator,
    own_counts: &[u64],
    total_leaves: usize,
    root_count: u64,
    rows: u64,
) -> Vec<u64> {
    // An empty release spreads the rows evenly over every leaf, as on one machine.
    if root_count == 0 {
        let before = rows_before(comm, own_counts.len() as u64);
        return allocate_from(std::iter::repeat_n(1, own_counts.len()), u128::from(before), total_leaves as u128, rows);
    }
    let before = rows_before(comm, own_counts.iter().sum());
    allocate_from(own_counts.iter().copied(), u128::from(before), u128::from(root_count), rows)
}

/// The rows of the whole table dealt out evenly: rank r draws and writes rows `rows·r/P .. rows·(r + 1)/P`
/// whichever leaves they lie in. `leaves` are this rank's (code, rows) in code order, their first row
/// `first_row`; each leaf's rows go to the ranks whose shares hold them, split where a share ends (released
/// counts moved between ranks: post-processing). Returns this rank's leaves (code order, strictly ascending:
/// a leaf has one owner, and reaches a rank in one piece) with their rows, and its first row.
pub fn dealt_evenly(
    comm: &dyn Communicator,
    leaves: impl Iterator<Item = (usize, u64)>,
    first_row: u64,
    rows: u64,
) -> (Vec<u32>, Vec<u64>, u64) {
    let ranks = comm.size();
    let starts: Vec<u64> = (0..=ranks).map(|rank| (u128::from(rows) * rank as u128 / ranks as u128) as u64).collect();
    let mut sends = vec![Vec::new(); ranks];
    let mut row = first_row;
    for (code, count) in leaves {
        let end = row + count;
        while row < end {
            // The rank whose share holds `row` (shares may be empty when rows are fewer than ranks).
            let rank = starts.partition_point(|&start| start <= row) - 1;
            let piece_end = end.min(starts[rank + 1]);
            sends[rank].extend([code as u64, piece_end - row]);
            row = piece_end;
        }
    }
    let (mut codes, mut counts) = (Vec::new(), Vec::new());
    for pairs in comm.all_to_all(sends) {
        for pair in pairs.chunks_exact(2) {
            codes.push(pair[0] as u32);
            counts.push(pair[1]);
        }
    }
    (codes, counts, starts[comm.rank()])
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
    use crate::cluster::RankSums;
    use crate::sampler::allocate_rows;

    #[test]
    fn the_rows_are_dealt_evenly_and_every_leaf_keeps_its_rows() {
        let cases: Vec<Vec<u64>> = vec![
            (0..1000u64).map(|leaf| (leaf * 7919) % 13).collect(),
            // Most rows in one leaf (a skewed table), and fewer rows than ranks.
            (0..200u64).map(|leaf| if leaf == 150 { 10_000 } else { leaf % 3 }).collect(),
            vec![0, 1, 0, 0, 1, 0],
        ];
        for counts in &cases {
            let total: u64 = counts.iter().sum();
            for ranks in [1, 2, 3, 7] {
                let owned = even_starts(counts.len(), ranks);
                let dealt = run_local(ranks, |comm| {
                    let (first, end) = (owned[comm.rank()], owned[comm.rank() + 1]);
                    let leaves = (first..end).map(|leaf| (leaf, counts[leaf])).filter(|&(_, rows)| rows > 0);
                    dealt_evenly(comm, leaves, counts[..first].iter().sum(), total)
                });
                let mut joined = vec![0u64; counts.len()];
                for (rank, (codes, rows, first_row)) in dealt.iter().enumerate() {
                    assert_eq!(*first_row, total * rank as u64 / ranks as u64, "{ranks} ranks");
                    let share = total * (rank as u64 + 1) / ranks as u64 - first_row;
                    assert_eq!(rows.iter().sum::<u64>(), share, "{ranks} ranks, rank {rank}");
                    assert!(codes.windows(2).all(|pair| pair[0] < pair[1]));
                    codes.iter().zip(rows).for_each(|(&code, &rows)| joined[code as usize] += rows);
                }
                assert_eq!(&joined, counts, "{ranks} ranks");
            }
        }
    }

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
