//! PMM's release split by subtrees. The tree's level k (the top level) is cut into contiguous shares of
//! cells, one per rank; a rank owns the subtrees under its share. Every rank releases levels 0..k from
//! the summed level-k counts (the same noise and coins everywhere, so the same result), then noises and
//! makes consistent only its own subtrees. Noise is keyed by (level, chunk of cells) and coins by (level,
//! cell), never by rank or thread, so each cell gets what it gets in the single-machine release.

use rayon::prelude::*;

use super::even_starts;
use crate::geometry::tree::CountTree;
use crate::mechanism::pmm::averaging::{average_cells, average_levels, settle, BottomUp, LevelWeights};
use crate::mechanism::pmm::consistency::{enforce_consistency, split_children, Consistency};
use crate::mechanism::pmm::noise::{add_level_noise, add_noise_to_cells};
use crate::mechanism::pmm::refine::SparseLeaves;
use crate::noise::discrete_laplace::RationalScale;
use crate::privacy::NoiseKey;

/// Top-level cells per rank at least: shares then differ by at most 1/16 of one.
const TOP_CELLS_PER_RANK: u64 = 16;

/// Which subtrees each rank owns at one depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ownership {
    /// The level k whose cells are shared out (never below the leaves).
    pub top_level: u32,
    pub depth: u32,
    /// Rank r owns the level-k cells `cell_starts[r] .. cell_starts[r + 1]`.
    pub cell_starts: Vec<usize>,
}

impl Ownership {
    pub fn new(depth: u32, ranks: usize) -> Self {
        let wanted = (ranks as u64 * TOP_CELLS_PER_RANK).next_power_of_two().trailing_zeros();
        let top_level = wanted.min(depth);
        Ownership { top_level, depth, cell_starts: even_starts(1 << top_level, ranks) }
    }

    /// The leaves each rank owns: `leaf_starts[r] .. leaf_starts[r + 1]`.
    pub fn leaf_starts(&self) -> Vec<usize> {
        self.cell_starts.iter().map(|&cell| cell << (self.depth - self.top_level)).collect()
    }
}

/// One rank's share of a released tree: the consistent counts of its leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartRelease {
    /// The code of the first leaf it owns.
    pub first_leaf: usize,
    /// The released rows in the leaves before it (of all ranks before this one).
    pub first_row: u64,
    pub leaves: PartLeaves,
    /// The released total of the whole tree.
    pub root_count: u64,
}

/// A part's released leaf counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartLeaves {
    /// Every leaf the rank owns, from the first on.
    Every(Vec<u64>),
    /// The leaves cut finer by `--refine-share` (2^6 times the tree's, mostly empty): those that hold rows, of
    /// the `owned` the rank owns.
    Listed { owned: usize, leaves: SparseLeaves },
}

impl PartRelease {
    /// (leaf code, count) of each leaf it owns (those that hold rows where they are listed).
    pub fn cells(&self) -> Box<dyn Iterator<Item = (usize, u64)> + '_> {
        match &self.leaves {
            PartLeaves::Every(counts) => Box::new((self.first_leaf..).zip(counts.iter().copied())),
            PartLeaves::Listed { leaves, .. } => Box::new(leaves.cells()),
        }
    }

    /// The counts of its leaves in code order: every leaf's, or the listed ones'.
    pub fn counts(&self) -> &[u64] {
        match &self.leaves {
            PartLeaves::Every(counts) => counts,
            PartLeaves::Listed { leaves, .. } => &leaves.counts,
        }
    }

    /// How many leaves the rank owns.
    pub fn leaves_owned(&self) -> usize {
        match &self.leaves {
            PartLeaves::Every(counts) => counts.len(),
            PartLeaves::Listed { owned, .. } => *owned,
        }
    }
}

/// The true counts of one rank's subtrees, levels k..=r. Its release takes these steps, so that the caller
/// runs the collectives on its own thread and the work on its pool: [`PartTree::new`], summing
/// [`PartTree::top_counts`] over the ranks, [`PartTree::noise`], summing [`NoisedPart::top_estimates`]
/// over the ranks (with the bottom-up pass only), [`NoisedPart::release`].
pub struct PartTree {
    top: u32,
    depth: u32,
    first_cell: usize,
    end_cell: usize,
    /// Level k + i holds the cells first_cell << i .. end_cell << i.
    levels: Vec<Vec<i64>>,
}

impl PartTree {
    pub fn new(own_leaves: Vec<u64>, ownership: &Ownership, rank: usize) -> Self {
        let (top, depth) = (ownership.top_level, ownership.depth);
        let (first_cell, end_cell) = (ownership.cell_starts[rank], ownership.cell_starts[rank + 1]);
        assert_eq!(own_leaves.len(), (end_cell - first_cell) << (depth - top));
        let mut levels: Vec<Vec<i64>> = vec![own_leaves.into_iter().map(|count| count as i64).collect()];
        for _ in top..depth {
            let children = levels.last().expect("the leaf level");
            levels.push(children.par_chunks_exact(2).map(|pair| pair[0] + pair[1]).collect());
        }
        levels.reverse();
        PartTree { top, depth, first_cell, end_cell, levels }
    }

    /// Level k of the whole tree with this rank's true counts in its cells and zeros elsewhere: summed
    /// over the ranks, the whole true level k.
    pub fn top_counts(&self) -> Vec<u64> {
        let mut counts = vec![0u64; 1 << self.top];
        for (total, &count) in counts[self.first_cell..self.end_cell].iter_mut().zip(&self.levels[0]) {
            *total = count as u64;
        }
        counts
    }

    /// Noises this part, given the whole true level k: levels 0..=k as on every rank, then this rank's
    /// subtrees. With the bottom-up pass, this part's subtrees are averaged up to level k here.
    pub fn noise(
        self,
        top_counts: Vec<u64>,
        scales: &[Option<RationalScale>],
        released_root: Option<u64>,
        key: &NoiseKey,
        consistency: Consistency,
    ) -> NoisedPart {
        let PartTree { top, depth, first_cell, end_cell, mut levels } = self;
        let mut top_tree = CountTree::from_leaves(top_counts, top);
        let mut top_scales = scales[..=top as usize].to_vec();
        if let Some(root) = released_root {
            top_tree.level_mut(0)[0] = root as i64;
            top_scales[0] = None;
        }
        add_level_noise(&mut top_tree, &top_scales, key);
        for level in top + 1..=depth {
            if let Some(scale) = scales[level as usize] {
                let first = (first_cell as u64) << (level - top);
                add_noise_to_cells(&mut levels[(level - top) as usize], level, first, scale, key);
            }
        }
        let averaging = (consistency.bottom_up == BottomUp::Average).then(|| {
            let weights = LevelWeights::new(scales);
            // Level k's cells of this part, noised as on every rank, take the place of its true counts.
            levels[0].copy_from_slice(&top_tree.level(top)[first_cell..end_cell]);
            let own_estimates = average_levels(&mut levels, top, &weights);
            (weights, own_estimates)
        });
        let floors = consistency.floors(scales);
        NoisedPart { top, depth, first_cell, end_cell, levels, top_tree, floors, averaging }
    }
}

/// One rank's part, noised: levels 0..=k of the whole tree and this rank's subtrees below, with (when the
/// bottom-up pass runs) the weights and this part's level-k estimates.
pub struct NoisedPart {
    top: u32,
    depth: u32,
    first_cell: usize,
    end_cell: usize,
    levels: Vec<Vec<i64>>,
    top_tree: CountTree,
    /// The pruning floors of every level.
    floors: Vec<i64>,
    averaging: Option<(LevelWeights, Vec<f64>)>,
}

impl NoisedPart {
    /// With the bottom-up pass: the bits of this part's level-k estimates in its cells and zeros elsewhere.
    /// Each cell has one owner, so their sum over the ranks is the whole level's estimates, bit for bit.
    pub fn top_estimates(&self) -> Option<Vec<u64>> {
        let (_, own) = self.averaging.as_ref()?;
        let mut bits = vec![0u64; 1 << self.top];
        for (total, estimate) in bits[self.first_cell..self.end_cell].iter_mut().zip(own) {
            *total = estimate.to_bits();
        }
        Some(bits)
    }

    /// The release of this part: levels 0..=k (averaged from `top_estimates`, summed over the ranks, when
    /// the pass runs) made consistent as on every rank, then this rank's subtrees.
    pub fn release(self, top_estimates: Option<Vec<u64>>, consistency: Consistency, coin_seed: u64) -> PartRelease {
        let NoisedPart { top, depth, first_cell, end_cell, mut levels, mut top_tree, floors, averaging } = self;
        if let Some((weights, _)) = averaging {
            let estimates: Vec<f64> =
                top_estimates.expect("the summed level-k estimates").into_iter().map(f64::from_bits).collect();
            top_tree.level_mut(top).iter_mut().zip(&estimates).for_each(|(count, &estimate)| *count = settle(estimate));
            let mut below = estimates;
            for level in (0..top).rev() {
                below = average_cells(top_tree.level_mut(level), &below, |z: f64| z, level, &weights);
            }
        }
        enforce_consistency(&mut top_tree, consistency.rule, &floors, coin_seed);
        let released_top = top_tree.level(top);
        levels[0].copy_from_slice(&released_top[first_cell..end_cell]);
        for level in top..depth {
            let (upper, lower) = levels.split_at_mut((level - top) as usize + 1);
            let first = (first_cell as u64) << (level - top);
            let floor = floors[level as usize + 1];
            let parents = &upper[(level - top) as usize];
            split_children(parents, &mut lower[0], level, first, consistency.rule, floor, coin_seed);
        }
        let leaves = levels.pop().expect("the leaf level").into_iter().map(|count| count as u64).collect();
        PartRelease {
            first_leaf: first_cell << (depth - top),
            first_row: released_top[..first_cell].iter().map(|&count| count as u64).sum(),
            leaves: PartLeaves::Every(leaves),
            root_count: released_top.iter().map(|&count| count as u64).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::local::run_local;
    use crate::cluster::RankSums;
    use crate::mechanism::pmm::consistency::ConsistencyRule;
    use crate::mechanism::pmm::release_leaf_counts;
    use crate::mechanism::pmm::schedule::LevelSchedule;
    use crate::privacy::Neighbours;
    use crate::progress::Timings;

    /// The parts of every rank count, put together, are the whole release, for roots noised or given,
    /// trees shallower than the top level, ranks that own nothing, pruning or none, and the bottom-up pass
    /// or none.
    #[test]
    fn the_parts_of_any_rank_count_are_the_whole_release() {
        let key = NoiseKey::from_user_seed(9);
        for (depth, root) in [(14, None), (14, Some(5000)), (3, None), (0, Some(12))] {
            let leaves: Vec<u64> = (0..1u64 << depth).map(|cell| (cell * 2654435761) % 7).collect();
            let scales: Vec<_> = (0..=depth).map(|level| RationalScale::round_up(1.5 + level as f64)).collect();
            let schedule = LevelSchedule { neighbours: Neighbours::AddRemove, dims: 2, depth, scales: scales.clone() };
            for (bottom_up, rule, prune_sigmas) in [
                (BottomUp::None, ConsistencyRule::Uniform, 0.0),
                (BottomUp::None, ConsistencyRule::Uniform, 2.0),
                (BottomUp::None, ConsistencyRule::Proportional, 2.0),
                (BottomUp::Average, ConsistencyRule::Uniform, 0.0),
                (BottomUp::Average, ConsistencyRule::Proportional, 2.0),
            ] {
                let consistency = Consistency { bottom_up, rule, prune_sigmas };
                let whole = release_leaf_counts(
                    leaves.clone(),
                    &schedule,
                    root,
                    &key,
                    consistency,
                    77,
                    &mut Timings::default(),
                );
                for ranks in [1, 2, 3, 7, 40] {
                    let ownership = Ownership::new(depth, ranks);
                    let starts = ownership.leaf_starts();
                    let parts = run_local(ranks, |comm| {
                        let own = leaves[starts[comm.rank()]..starts[comm.rank() + 1]].to_vec();
                        let tree = PartTree::new(own, &ownership, comm.rank());
                        let mut top_counts = tree.top_counts();
                        comm.sum(&mut top_counts);
                        let noised = tree.noise(top_counts, &scales, root, &key, consistency);
                        let estimates = noised.top_estimates().map(|mut bits| {
                            comm.sum(&mut bits);
                            bits
                        });
                        noised.release(estimates, consistency, 77)
                    });
                    let joined: Vec<u64> = parts.iter().flat_map(|part| part.counts().to_vec()).collect();
                    assert_eq!(joined, whole, "depth {depth}, {ranks} ranks, {consistency:?}");
                    let mut rows = 0;
                    for part in &parts {
                        assert_eq!(part.first_row, rows);
                        assert_eq!(part.root_count, whole.iter().sum::<u64>());
                        rows += part.counts().iter().sum::<u64>();
                    }
                }
            }
        }
    }
}
