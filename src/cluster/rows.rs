//! `--rows N` across ranks: [`crate::sampler::allocate_rows`] over the whole tree (⌊N·m_θ/m⌋ per leaf,
//! then one more for the largest remainders, ties to the lower cell code), each rank computing its own
//! leaves' shares. The remainders that get one more are found without gathering them: the cut-off value
//! by a binary search over global counts, the ties at it shared out in rank (= code) order.

use super::Communicator;

/// This rank's leaves' rows when the whole tree's `root_count` released rows become `rows`, and the rows
/// of all leaves before them. `own_counts` are the consistent counts of the leaves this rank owns, in
/// code order; `total_leaves` the leaves of the whole tree.
pub fn allocate_part_rows(comm: &dyn Communicator, own_counts: &[u64], total_leaves: usize, root_count: u64, rows: u64) -> Vec<u64> {
    // An empty release spreads the rows evenly over every leaf, as on one machine.
    let uniform = root_count == 0;
    let total = if uniform { total_leaves as u128 } else { u128::from(root_count) };
    let weight = |leaf: usize| if uniform { 1 } else { u128::from(own_counts[leaf]) };
    let mut allocation = Vec::with_capacity(own_counts.len());
    let mut remainders = Vec::with_capacity(own_counts.len());
    for leaf in 0..own_counts.len() {
        let share = u128::from(rows) * weight(leaf);
        allocation.push((share / total) as u64);
        remainders.push((share % total) as u64);
    }
    let mut given = [allocation.iter().sum::<u64>()];
    comm.sum(&mut given);
    let missing = rows - given[0];
    if missing == 0 {
        return allocation;
    }
    // The cut-off: the largest remainder value t ≥ 1 with at least `missing` remainders ≥ t everywhere.
    let at_least = |threshold: u64| -> u64 {
        let mut count = [remainders.iter().filter(|&&remainder| remainder >= threshold).count() as u64];
        comm.sum(&mut count);
        count[0]
    };
    let (mut low, mut high) = (1u64, u64::MAX);
    while low < high {
        let middle = low + (high - low).div_ceil(2);
        if at_least(middle) >= missing {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    let cut = low;
    let above = if cut == u64::MAX { 0 } else { at_least(cut + 1) };
    // Ties at the cut-off go to the lowest codes: the ranks before this one take theirs first.
    let ties_here = remainders.iter().filter(|&&remainder| remainder == cut).count() as u64;
    let mut ties = vec![0u64; comm.size()];
    ties[comm.rank()] = ties_here;
    comm.sum(&mut ties);
    let before: u64 = ties[..comm.rank()].iter().sum();
    let mut take = (missing - above).saturating_sub(before).min(ties_here);
    for (rows, &remainder) in allocation.iter_mut().zip(&remainders) {
        if remainder > cut {
            *rows += 1;
        } else if remainder == cut && take > 0 {
            *rows += 1;
            take -= 1;
        }
    }
    allocation
}

/// The rows of every rank before this one, given this rank's.
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
