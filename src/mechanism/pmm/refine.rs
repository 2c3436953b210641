//! `--refine-share`: the joint tree's dense leaves cut finer. Where a column's rows sit in a small part of
//! its public bounds, most of them fall in a few leaves, and points spread uniformly in a leaf lose the
//! dependence between its rows' columns (flights d = 3: the dep–arr delay rank correlation). Each leaf whose
//! released count could fill 2^k sub-cells with [`REFINE_THRESHOLD_SCALES`] noise scales each is cut k
//! levels deeper (the Morton code continued, k ≤ [`REFINE_MAX_LEVELS`]), and its sub-cells' counts are
//! released as one histogram: Lap_Z(sensitivity / (share·ε)) on every sub-cell of every refined leaf,
//! empty ones included. A row lies in one sub-cell at most, and which leaves are refined is read from the
//! tree's release, so it is share·ε-DP by sequential composition. The leaf's count is then shared out over
//! its sub-cells in proportion to their release clipped at 0 (post-processing); rows stay in their leaf.
//!
//! Rows not placed by a released sub-cell (an unrefined leaf's, or a sub-cell's inside it) are spread over
//! the finer cells as the released 1-D marginals say when the run has them on midpoint cells ([`AxisShapes`]),
//! not evenly: otherwise a dense leaf's rows would crowd where its columns' mass is while its lighter
//! neighbours' stayed uniform, and independent skewed columns would come out correlated (a rank correlation
//! of 0.09 where the data have 0.00).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::Serialize;

use crate::error::Result;
use crate::geometry::partition::{CellGeometry, LeafDecoder, MAX_DEPTH};
use crate::mechanism::PublicInputs;
use crate::noise::discrete_laplace::RationalScale;
use crate::noise::laplace_table::ScaleSampler;
use crate::privacy::budget::Budget;
use crate::privacy::streams::NoiseStream;
use crate::privacy::{noise_scale, NoiseKey};
use crate::sampler::unit_interval;

use super::marginals::{apportion, ReleasedMarginals};

/// The most levels a leaf is cut below the tree's depth (2 per axis at d = 3). On flights (d = 3, ε = 1 and
/// 10, three seeds, share 0.05) 9 levels gave the same scores as 6 but the rank correlation error at ε = 10
/// (0.15× PMM's against 0.17×), at 8× the memory.
pub const REFINE_MAX_LEVELS: u32 = 6;

/// A leaf is cut k levels deeper while its released count reaches this many noise scales per sub-cell.
/// On flights (d = 3, share 0.2) 2, 4 and 8 scales gave rank correlation errors within 10% of each other.
pub const REFINE_THRESHOLD_SCALES: f64 = 4.0;

/// The refinement's share of ε and its noise.
#[derive(Clone, Copy, Debug)]
pub struct LeafRefinement {
    pub share: f64,
    pub epsilon: f64,
    pub scale: RationalScale,
}

/// What the report says about the refinement.
#[derive(Clone, Debug, Serialize)]
pub struct LeafRefinementParameters {
    pub share: f64,
    pub epsilon: f64,
    pub sigma: f64,
    /// The deepest a leaf could be cut below the tree's depth (fewer where memory is short).
    pub max_levels: u32,
    pub threshold_scales: f64,
    /// How many leaves were cut, and into how many sub-cells in all.
    pub leaves_refined: u64,
    pub sub_cells: u64,
}

impl LeafRefinement {
    /// `share` of the run's ε (`public.epsilon`, after any pair share).
    pub fn new(public: &PublicInputs, share: f64) -> Result<Self> {
        let epsilon = public.epsilon * share;
        let sigma = public.neighbours.histogram_sensitivity() / epsilon;
        Ok(LeafRefinement { share, epsilon, scale: noise_scale(sigma, "the refined leaves (--refine-share)")? })
    }

    pub fn spend(&self, budget: &mut Budget) {
        budget.spend("refined leaves", self.epsilon);
    }

    /// How many levels below a tree of `depth` the leaves may be cut: [`REFINE_MAX_LEVELS`], fewer where
    /// the finer leaves would pass `memory_depth` or [`MAX_DEPTH`].
    pub fn max_levels(depth: u32, memory_depth: u32) -> u32 {
        REFINE_MAX_LEVELS.min(memory_depth.min(MAX_DEPTH).saturating_sub(depth))
    }

    /// The levels a leaf of released `count` is cut (at most `max_levels`): the most k with
    /// count ≥ [`REFINE_THRESHOLD_SCALES`]·σ·2^k. Reads the released count only.
    pub fn levels_for(&self, count: u64, max_levels: u32) -> u32 {
        let per_sub_cell = REFINE_THRESHOLD_SCALES * self.scale.to_f64();
        (1..=max_levels).take_while(|&k| count as f64 >= per_sub_cell * (1u64 << k) as f64).last().unwrap_or(0)
    }

    /// The true counts of one refined leaf's `sub_cells` with Lap_Z(σ) on each, empty ones included, drawn
    /// in order from the leaf's own stream (so the noise does not depend on the thread count).
    pub fn noisy_sub_cells(&self, sub_cells: &[u64], leaf: u64, key: &NoiseKey) -> Vec<i64> {
        ScaleSampler::new(self.scale).noisy_counts(sub_cells, &mut key.stream(NoiseStream::PmmRefinedLeaf, leaf))
    }

    /// The released `leaves` (the tree's consistent counts, from leaf `first_leaf` on: all of them, or a rank's
    /// part) on `fine` leaves `levels` deeper, from the true counts there (`counts`, overwritten): a refined
    /// leaf's count shared out over its sub-cells as their release says, the rows of each sub-cell (and of an
    /// unrefined leaf) drawn over its finer leaves as `shapes` weigh them (evenly without), with coins from
    /// `placement` keyed by the leaf. Returns the counts and the report's words.
    pub fn refine(
        &self,
        (first_leaf, leaves): (usize, &[u64]),
        (fine, mut counts): (CellGeometry, Vec<u64>),
        levels: u32,
        (key, placement): (&NoiseKey, u64),
        shapes: Option<&AxisShapes>,
    ) -> (Vec<u64>, LeafRefinementParameters) {
        let width = 1usize << levels;
        assert_eq!(counts.len(), leaves.len() * width, "the true counts lie `levels` below the leaves");
        assert!((first_leaf + leaves.len()) * width <= fine.leaf_count());
        let decoder = LeafDecoder::new(&fine);
        let low_indices = shapes.map(|_| low_axis_indices(&decoder, fine.dims(), width));
        let (refined, sub_cells) = counts
            .par_chunks_mut(width)
            .zip(leaves.par_iter())
            .enumerate()
            .map(|(index, (block, &count))| {
                if count == 0 {
                    block.fill(0);
                    return (0, 0);
                }
                let leaf = first_leaf + index;
                let k = self.levels_for(count, levels);
                let per_sub_cell = width >> k;
                let released: Vec<u64> = match k {
                    0 => vec![0],
                    _ => {
                        let true_sub: Vec<u64> =
                            block.chunks_exact(per_sub_cell).map(|finer| finer.iter().sum()).collect();
                        (self.noisy_sub_cells(&true_sub, leaf as u64, key).into_iter())
                            .map(|noisy| noisy.max(0) as u64)
                            .collect()
                    }
                };
                let mut coins = Xoshiro256PlusPlus::seed_from_u64(placement ^ (leaf as u64).wrapping_mul(LEAF_MIX));
                let sub_counts = apportion(count, &released);
                let weights = shapes.zip(low_indices.as_deref()).map(|(shapes, low)| {
                    shapes.leaf_weights(&decoder, (leaf * width) as u32, low)
                });
                for (sub_cell, (finer, rows)) in block.chunks_exact_mut(per_sub_cell).zip(sub_counts).enumerate() {
                    let shape = weights.as_ref().map(|weights| &weights[sub_cell * per_sub_cell..][..per_sub_cell]);
                    draw_into(finer, rows, shape, &mut coins);
                }
                (u64::from(k > 0), if k > 0 { 1u64 << k } else { 0 })
            })
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let parameters = LeafRefinementParameters {
            share: self.share,
            epsilon: self.epsilon,
            sigma: self.scale.to_f64(),
            max_levels: levels,
            threshold_scales: REFINE_THRESHOLD_SCALES,
            leaves_refined: refined,
            sub_cells,
        };
        (counts, parameters)
    }
}

/// Spreads the leaf numbers over the placement seed's coin streams (the golden ratio's odd multiplier).
const LEAF_MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// Each column's released 1-D marginal as weights of the finer leaves' cells on its axis: where rows not
/// placed by a released sub-cell go inside their cell (post-processing of the marginals).
pub struct AxisShapes {
    weights: Vec<Vec<f64>>,
}

impl AxisShapes {
    /// From each column's released marginal counts (`ReleasedMarginals::counts`: equal cells of its bounds,
    /// so on the midpoint partition's axes) on the axes of `fine`; a marginal coarser than the axis is spread
    /// evenly inside its cells.
    pub fn from_marginals(fine: &CellGeometry, marginals: &[Vec<u64>]) -> Self {
        let weights = marginals
            .iter()
            .enumerate()
            .map(|(axis, released)| {
                let cells = 1usize << fine.axis_bits(axis);
                if released.iter().all(|&count| count == 0) {
                    return vec![1.0; cells];
                }
                if released.len() >= cells {
                    let per = released.len() / cells;
                    released.chunks_exact(per).map(|block| block.iter().sum::<u64>() as f64).collect()
                } else {
                    let per = cells / released.len();
                    (0..cells).map(|cell| released[cell / per] as f64 / per as f64).collect()
                }
            })
            .collect();
        AxisShapes { weights }
    }

    /// The shapes of a run's released `marginals` on `fine` when its cells are cut at midpoints; none when they
    /// are cut at quantiles (`quantile_cells`: the warps would need inverting) or there are no marginals.
    pub fn of_run(fine: &CellGeometry, marginals: Option<&ReleasedMarginals>, quantile_cells: bool) -> Option<Self> {
        marginals.filter(|_| !quantile_cells).map(|released| Self::from_marginals(fine, &released.counts))
    }

    /// The weights of one leaf's finer leaves (codes of `decoder`'s geometry from `first`, a multiple of their
    /// number): the product of their axes' weights. Their axis indices are the first's with the low codes'
    /// (`low`, from [`low_axis_indices`]) set in the low bits, so the first is decoded once.
    fn leaf_weights(&self, decoder: &LeafDecoder, first: u32, low: &[u32]) -> Vec<f64> {
        let mut base = vec![0u32; self.weights.len()];
        decoder.axis_indices(first, &mut base);
        low.chunks_exact(base.len())
            .map(|low| {
                let indices = low.iter().zip(&base).map(|(&low, &base)| (base | low) as usize);
                indices.zip(&self.weights).map(|(index, axis)| axis[index]).product()
            })
            .collect()
    }
}

/// The axis indices of codes `0 .. width` (`dims` each, flat): what the low bits of a block of `width` finer
/// leaves add to the first's.
fn low_axis_indices(decoder: &LeafDecoder, dims: usize, width: usize) -> Vec<u32> {
    let mut indices = vec![0u32; dims * width];
    for (code, out) in indices.chunks_exact_mut(dims).enumerate() {
        decoder.axis_indices(code as u32, out);
    }
    indices
}

/// `rows` drawn one by one over `cells` in proportion to `weights` (evenly without, or where they are all 0).
fn draw_into(cells: &mut [u64], rows: u64, weights: Option<&[f64]>, coins: &mut impl Rng) {
    cells.fill(0);
    if rows == 0 {
        return;
    }
    let cumulative: Option<Vec<f64>> = weights.map(|weights| {
        let mut sum = 0.0;
        weights
            .iter()
            .map(|&weight| {
                sum += weight;
                sum
            })
            .collect()
    });
    let total = cumulative.as_ref().and_then(|cumulative| cumulative.last().copied()).unwrap_or(0.0);
    for _ in 0..rows {
        let cell = match &cumulative {
            Some(cumulative) if total > 0.0 => {
                let target = unit_interval(coins) * total;
                cumulative.partition_point(|&upto| upto <= target).min(cells.len() - 1)
            }
            _ => (coins.next_u64() % cells.len() as u64) as usize,
        };
        cells[cell] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::Neighbours;

    fn refinement(sigma: f64) -> LeafRefinement {
        LeafRefinement { share: 0.1, epsilon: 1.0 / sigma, scale: RationalScale::round_up(sigma).unwrap() }
    }

    #[test]
    fn the_scale_is_the_sensitivity_over_the_share_of_epsilon() {
        for (neighbours, sensitivity) in [(Neighbours::AddRemove, 1.0), (Neighbours::Replace, 2.0)] {
            let public = PublicInputs {
                dims: 3,
                epsilon: 2.0,
                neighbours,
                file_rows: 1000,
                memory_limit: 1 << 30,
                threads: 1,
                placement: crate::sampler::Placement::Uniform,
                encoding: None,
            };
            let refinement = LeafRefinement::new(&public, 0.25).unwrap();
            assert_eq!(refinement.epsilon, 0.5);
            assert!((refinement.scale.to_f64() - sensitivity / 0.5).abs() < 1e-6, "{neighbours:?}");
            let mut budget = Budget::new(0.5);
            refinement.spend(&mut budget);
            assert_eq!(budget.spent(), 0.5);
        }
    }

    #[test]
    fn a_leaf_is_cut_as_deep_as_its_released_count_fills_the_sub_cells() {
        let refinement = refinement(5.0);
        // 4 scales of 5 per sub-cell: 40 rows fill 2 sub-cells, 80 fill 4, ...
        assert_eq!(refinement.levels_for(39, 6), 0);
        assert_eq!(refinement.levels_for(40, 6), 1);
        assert_eq!(refinement.levels_for(159, 6), 2);
        assert_eq!(refinement.levels_for(160, 6), 3);
        assert_eq!(refinement.levels_for(1 << 20, 6), 6);
        assert_eq!(refinement.levels_for(1 << 20, 2), 2);
        assert_eq!(LeafRefinement::max_levels(20, 30), REFINE_MAX_LEVELS);
        assert_eq!(LeafRefinement::max_levels(27, 30), 3);
        assert_eq!(LeafRefinement::max_levels(20, 18), 0);
    }

    #[test]
    fn every_leaf_keeps_its_released_count_and_dense_ones_follow_their_rows() {
        let refinement = refinement(1.0);
        let levels = 4;
        // Leaf 0 is dense with all its rows in its last sub-cell; leaf 1 is light; leaf 2 is dense but
        // its true rows are elsewhere (the released count is what is shared out).
        let leaves = [1000u64, 3, 500, 0];
        let mut fine = vec![0u64; 4 << levels];
        fine[15] = 990;
        fine[16] = 2;
        fine[40] = 7;
        let fine = (CellGeometry::new(2, 2 + levels), fine);
        let key = NoiseKey::from_user_seed(3);
        let (counts, parameters) = refinement.refine((0, &leaves), fine, levels, (&key, 1), None);
        for (leaf, block) in counts.chunks(1 << levels).enumerate() {
            assert_eq!(block.iter().sum::<u64>(), leaves[leaf], "leaf {leaf}");
        }
        assert!(counts[15] > 900, "the dense leaf's rows go where its sub-cells say: {:?}", &counts[..16]);
        let third = &counts[32..48];
        assert_eq!(third.iter().max(), Some(&third[8]), "the released count goes where the sub-cells' release says");
        assert_eq!((parameters.leaves_refined, parameters.sub_cells), (2, 32));
    }

    /// Independent columns, skewed inside one dense leaf and its light neighbour: with the marginals' shapes
    /// the light leaf's rows crowd where the dense one's do, as the data's; spread evenly they would not.
    #[test]
    fn unplaced_rows_follow_the_released_marginals_inside_their_cell() {
        // Noise too large for any leaf to be cut: every row is placed by the shapes.
        let refinement = refinement(1e6);
        // Tree depth 2 (one cut per axis), 4 levels below it: 8 cells per axis. Column 1's marginal puts nine
        // tenths of its lower half in its lowest cell; column 0's (2 cells) is spread evenly inside its cells.
        let fine = CellGeometry::new(2, 6);
        let shapes = AxisShapes::from_marginals(&fine, &[vec![1, 1], vec![90, 2, 2, 6, 10, 10, 10, 10]]);
        let leaves = [5_000u64; 4];
        let key = NoiseKey::from_user_seed(1);
        let (counts, parameters) = refinement.refine((0, &leaves), (fine, vec![0; 64]), 4, (&key, 2), Some(&shapes));
        assert_eq!(parameters.leaves_refined, 0);
        let decoder = LeafDecoder::new(&fine);
        let mut indices = [0u32; 2];
        let mut lowest = 0;
        for (code, &count) in counts.iter().enumerate() {
            decoder.axis_indices(code as u32, &mut indices);
            lowest += if indices[1] == 0 { count } else { 0 };
        }
        // The two leaves of axis 1's lower half hold 10 000 rows: 9 000 in its lowest cell (2 500 evenly).
        assert!((8_500..9_500).contains(&lowest), "{lowest} rows in axis 1's lowest cell");
    }

    #[test]
    fn every_sub_cell_of_a_refined_leaf_is_noised_empty_ones_included() {
        let refinement = refinement(3.0);
        let noisy = refinement.noisy_sub_cells(&[0; 256], 7, &NoiseKey::from_user_seed(1));
        // Lap_Z(3) is 0 with probability about 0.16: a skipped sub-cell would stay 0 every time.
        let touched = noisy.iter().filter(|&&count| count != 0).count();
        assert!(touched >= 180, "only {touched} of 256 empty sub-cells were noised");
        assert!(noisy.iter().any(|&count| count < 0), "the noise is not clipped before the release");
    }

    #[test]
    fn the_refined_counts_do_not_depend_on_the_thread_count() {
        let refinement = refinement(2.0);
        let leaves: Vec<u64> = (0..4096u64).map(|leaf| (leaf * 7919) % 300).collect();
        let fine: Vec<u64> = (0..4096u64 << 3).map(|cell| (cell * 104_729) % 40).collect();
        let fine = (CellGeometry::new(3, 15), fine);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let key = NoiseKey::from_user_seed(9);
            pool.install(|| refinement.refine((0, &leaves), fine.clone(), 3, (&key, 4), None).0)
        };
        assert_eq!(run(1), run(3));
    }

    /// A rank refines its own leaves (the cluster's parts): the parts put together are the whole refinement.
    #[test]
    fn refined_parts_put_together_are_the_whole_refinement() {
        let refinement = refinement(2.0);
        let leaves: Vec<u64> = (0..64u64).map(|leaf| (leaf * 7919) % 300).collect();
        let fine: Vec<u64> = (0..64u64 << 3).map(|cell| (cell * 104_729) % 40).collect();
        let geometry = CellGeometry::new(3, 9);
        let shapes = AxisShapes::from_marginals(&geometry, &[vec![5, 1], vec![1, 2, 3, 4], vec![9; 8]]);
        let key = NoiseKey::from_user_seed(9);
        let refine = |first: usize, end: usize| {
            let part = (geometry, fine[first << 3..end << 3].to_vec());
            refinement.refine((first, &leaves[first..end]), part, 3, (&key, 4), Some(&shapes))
        };
        let (whole, parameters) = refine(0, 64);
        let parts = [refine(0, 20), refine(20, 21), refine(21, 64)];
        let joined: Vec<u64> = parts.iter().flat_map(|(counts, _)| counts.clone()).collect();
        assert_eq!(joined, whole);
        let refined: u64 = parts.iter().map(|(_, part)| part.leaves_refined).sum();
        assert_eq!(refined, parameters.leaves_refined);
        assert!(refined > 0);
    }
}
