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
use super::summed_blocks;

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

    /// The sampler of the sub-cells' Lap_Z(σ): one per release, since its table is built in exact arithmetic
    /// (one per refined leaf took most of the refinement's time).
    pub fn noise(&self) -> ScaleSampler {
        ScaleSampler::new(self.scale)
    }

    /// The true counts of one refined leaf's `sub_cells` with a draw of `noise` ([`LeafRefinement::noise`])
    /// on each, empty ones included, in order from the leaf's own stream (so the noise does not depend on the
    /// thread count).
    pub fn noisy_sub_cells(noise: &ScaleSampler, sub_cells: &[u64], leaf: u64, key: &NoiseKey) -> Vec<i64> {
        noise.noisy_counts(sub_cells, &mut key.stream(NoiseStream::PmmRefinedLeaf, leaf))
    }

    /// The released `leaves` (the tree's consistent counts, from leaf `first_leaf` on: all of them, or a rank's
    /// part) on `fine` leaves `levels` deeper, from the true counts there (`truth`): a refined leaf's count
    /// shared out over its sub-cells as their release says, the rows of each sub-cell (and of an unrefined
    /// leaf) drawn over its finer leaves as `shapes` weigh them (evenly without), with coins from `placement`
    /// keyed by the leaf. Returns the finer leaves that hold rows, and the report's words.
    pub fn refine(
        &self,
        (first_leaf, leaves): (usize, &[u64]),
        (fine, truth): (CellGeometry, &FinerCounts),
        levels: u32,
        (key, placement): (&NoiseKey, u64),
        shapes: Option<&AxisShapes>,
    ) -> (SparseLeaves, LeafRefinementParameters) {
        let width = 1usize << levels;
        assert!((first_leaf + leaves.len()) * width <= fine.leaf_count());
        if let FinerCounts::Histogram(counts) = truth {
            assert_eq!(counts.len(), leaves.len() * width, "the true counts lie `levels` below the leaves");
        }
        let draw = BlockDraw::new(&fine, levels, shapes);
        let noise = self.noise();
        let pieces: Vec<(SparseLeaves, u64, u64)> = leaves
            .par_chunks(LEAVES_PER_TASK)
            .enumerate()
            .map(|(task, task_leaves)| {
                let (mut piece, mut refined, mut sub_cells) = (SparseLeaves::default(), 0, 0);
                let mut finer = vec![0u64; width];
                let mut scratch = draw.scratch();
                for (offset, &count) in task_leaves.iter().enumerate().filter(|(_, &count)| count > 0) {
                    let index = task * LEAVES_PER_TASK + offset;
                    let leaf = first_leaf + index;
                    let k = self.levels_for(count, levels);
                    let mut coins =
                        Xoshiro256PlusPlus::seed_from_u64(placement ^ (leaf as u64).wrapping_mul(LEAF_MIX));
                    let first = leaf * width;
                    if k == 0 {
                        draw.draw_into((first as u32, &mut finer), count, &mut coins, &mut scratch);
                    } else {
                        let true_sub = truth.sub_cells(index, leaf, width, 1 << k);
                        let noisy = Self::noisy_sub_cells(&noise, &true_sub, leaf as u64, key);
                        let released: Vec<u64> = (noisy.into_iter())
                            .map(|noisy| noisy.max(0) as u64)
                            .collect();
                        let per_sub_cell = width >> k;
                        let sub_counts = apportion(count, &released);
                        let sub_cells = finer.chunks_exact_mut(per_sub_cell).zip(sub_counts).enumerate();
                        for (sub_cell, (cells, rows)) in sub_cells {
                            let sub_first = (first + sub_cell * per_sub_cell) as u32;
                            draw.draw_into((sub_first, cells), rows, &mut coins, &mut scratch);
                        }
                    }
                    piece.push_nonzero(first, &finer);
                    if k > 0 {
                        (refined, sub_cells) = (refined + 1, sub_cells + (1u64 << k));
                    }
                }
                (piece, refined, sub_cells)
            })
            .collect();
        let (refined, sub_cells) = pieces.iter().fold((0, 0), |(a, b), (_, refined, cells)| (a + refined, b + cells));
        let parameters = LeafRefinementParameters {
            share: self.share,
            epsilon: self.epsilon,
            sigma: self.scale.to_f64(),
            max_levels: levels,
            threshold_scales: REFINE_THRESHOLD_SCALES,
            leaves_refined: refined,
            sub_cells,
        };
        (SparseLeaves::concat(pieces.into_iter().map(|(piece, ..)| piece).collect()), parameters)
    }
}

/// The binner's words for a pass that bins the finer leaves `levels` below the tree's and sums the tree's
/// leaves from them.
pub fn binned_with_the_tree(binning: &str, levels: u32) -> String {
    format!("{binning}, {levels} levels below the tree's leaves, which are summed from them")
}

/// Leaves refined by one task: enough to pay for its buffers, few enough to share the work out evenly.
const LEAVES_PER_TASK: usize = 1 << 12;

/// The finer leaves' true counts, which a cut leaf's sub-cells sum: their histogram (from the part's first
/// finer leaf), or every row's finer code, sorted, where the finer leaves outnumber the rows and a histogram
/// would be mostly zeros (2^28 of them, 2 GB, at n = 10^7 and d = 3), or the leaves that hold rows with their
/// counts (what the ranks' sparse exchange brings a rank).
pub enum FinerCounts {
    Histogram(Vec<u64>),
    SortedCodes(Vec<u32>),
    Listed(SparseLeaves),
}

impl FinerCounts {
    /// The true counts of the `leaves` leaves `levels` above them (a whole tree's, from its first leaf): what
    /// binning the rows at the tree's own depth would give, on axes the finer cells nest in.
    pub fn tree_leaves(&self, levels: u32, leaves: usize) -> Vec<u64> {
        match self {
            FinerCounts::Histogram(counts) => summed_blocks(counts, levels),
            FinerCounts::SortedCodes(codes) => {
                let mut counts = vec![0u64; leaves];
                codes.iter().for_each(|&code| counts[(code >> levels) as usize] += 1);
                counts
            }
            FinerCounts::Listed(listed) => {
                let mut counts = vec![0u64; leaves];
                listed.cells().for_each(|(code, count)| counts[code >> levels] += count);
                counts
            }
        }
    }

    /// The true counts of `sub_cells` equal sub-cells of leaf `leaf` (the part's `index`-th), `width` finer
    /// leaves.
    fn sub_cells(&self, index: usize, leaf: usize, width: usize, sub_cells: usize) -> Vec<u64> {
        let per_sub_cell = width / sub_cells;
        match self {
            FinerCounts::Histogram(counts) => {
                counts[index * width..][..width].chunks_exact(per_sub_cell).map(|cells| cells.iter().sum()).collect()
            }
            FinerCounts::SortedCodes(codes) => {
                let first = leaf * width;
                let mut counts = vec![0u64; sub_cells];
                for &code in &codes[codes_within(codes, first, width)] {
                    counts[(code as usize - first) / per_sub_cell] += 1;
                }
                counts
            }
            FinerCounts::Listed(listed) => {
                let first = leaf * width;
                let mut counts = vec![0u64; sub_cells];
                let within = codes_within(&listed.codes, first, width);
                for (&code, &count) in listed.codes[within.clone()].iter().zip(&listed.counts[within]) {
                    counts[(code as usize - first) / per_sub_cell] += count;
                }
                counts
            }
        }
    }
}

/// Where the ascending `codes` lie in `first .. first + width`.
fn codes_within(codes: &[u32], first: usize, width: usize) -> std::ops::Range<usize> {
    let start = codes.partition_point(|&code| (code as usize) < first);
    start..start + codes[start..].partition_point(|&code| (code as usize) < first + width)
}

/// Counts on the leaves of a dyadic partition, listed where they are not 0 (`codes` ascending): the refined
/// leaves' release (2^6 times the tree's leaves, but no more of them hold rows than there are rows), or a
/// rank's true finer counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseLeaves {
    pub codes: Vec<u32>,
    pub counts: Vec<u64>,
}

impl SparseLeaves {
    /// `counts` of the leaves from `first` on, those that are not 0.
    fn push_nonzero(&mut self, first: usize, counts: &[u64]) {
        for (offset, &count) in counts.iter().enumerate().filter(|(_, &count)| count > 0) {
            self.codes.push((first + offset) as u32);
            self.counts.push(count);
        }
    }

    /// `pieces` one after the other (their codes in order).
    fn concat(pieces: Vec<SparseLeaves>) -> Self {
        let len = pieces.iter().map(|piece| piece.codes.len()).sum();
        let mut whole = SparseLeaves { codes: Vec::with_capacity(len), counts: Vec::with_capacity(len) };
        for piece in pieces {
            whole.codes.extend(piece.codes);
            whole.counts.extend(piece.counts);
        }
        whole
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// (code, count) of each leaf listed.
    pub fn cells(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.codes.iter().map(|&code| code as usize).zip(self.counts.iter().copied())
    }

    /// Every count of the `len` leaves from `first` on, 0 where none is listed (a rank's part of the leaves).
    pub fn to_dense(&self, first: usize, len: usize) -> Vec<u64> {
        let mut dense = vec![0u64; len];
        for (code, count) in self.cells() {
            dense[code - first] = count;
        }
        dense
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

    /// Each axis's running weights over a block's cells on it (`extents` of them from `base`, its first cell's
    /// axis indices) into `cumulative`; false where an axis weighs nothing there.
    fn cumulative_in(&self, base: &[u32], extents: &[usize], cumulative: &mut [Vec<f64>]) -> bool {
        let axes = cumulative.iter_mut().zip(&self.weights).zip(base.iter().zip(extents));
        for ((running, weights), (&base, &extent)) in axes {
            running.clear();
            let mut sum = 0.0;
            running.extend(weights[base as usize..][..extent].iter().map(|&weight| {
                sum += weight;
                sum
            }));
            if sum <= 0.0 {
                return false;
            }
        }
        true
    }
}

/// Draws rows over an aligned block of finer leaves (a leaf, or one of its sub-cells): with the marginals'
/// shapes axis by axis, each axis's cell from its weights over the block's cells on it, so that a cell comes in
/// proportion to the product of its axes' weights without the block's cells being weighed one by one; evenly
/// without shapes, or where an axis weighs nothing in the block.
struct BlockDraw<'a> {
    decoder: LeafDecoder,
    shapes: Option<&'a AxisShapes>,
    /// By the log2 of a block's size: each axis's extent in the block, and each cell's code offset in it by
    /// its axis offsets (mixed radix, axis 0 first).
    layouts: Vec<(Vec<usize>, Vec<u32>)>,
}

/// One task's buffers for [`BlockDraw::draw_into`]: a block's first axis indices, each axis's running weights.
struct DrawScratch {
    base: Vec<u32>,
    cumulative: Vec<Vec<f64>>,
}

impl<'a> BlockDraw<'a> {
    /// For blocks of up to 2^`levels` leaves of `fine`.
    fn new(fine: &CellGeometry, levels: u32, shapes: Option<&'a AxisShapes>) -> Self {
        let decoder = LeafDecoder::new(fine);
        let dims = fine.dims();
        let layouts = (0..=levels)
            .map(|bits| {
                // A block's cells are its first's code with the low `bits` set: their axis indices are the
                // first's with those of the low code set in their low bits.
                let low: Vec<Vec<u32>> = (0..1u32 << bits)
                    .map(|code| {
                        let mut indices = vec![0u32; dims];
                        decoder.axis_indices(code, &mut indices);
                        indices
                    })
                    .collect();
                let extents: Vec<usize> = (0..dims)
                    .map(|axis| low.iter().map(|indices| indices[axis] as usize + 1).max().unwrap_or(1))
                    .collect();
                let mut offsets = vec![0u32; low.len()];
                for (code, indices) in low.iter().enumerate() {
                    let radix = |index: usize, (&at, &extent): (&u32, &usize)| index * extent + at as usize;
                    offsets[indices.iter().zip(&extents).fold(0, radix)] = code as u32;
                }
                (extents, offsets)
            })
            .collect();
        BlockDraw { decoder, shapes, layouts }
    }

    fn scratch(&self) -> DrawScratch {
        let dims = self.layouts[0].0.len();
        DrawScratch { base: vec![0; dims], cumulative: vec![Vec::new(); dims] }
    }

    /// `rows` drawn one by one over the block of `cells.len()` finer leaves from code `first`, into `cells`.
    fn draw_into(&self, (first, cells): (u32, &mut [u64]), rows: u64, coins: &mut impl Rng, scratch: &mut DrawScratch) {
        cells.fill(0);
        if cells.len() == 1 {
            cells[0] = rows;
            return;
        }
        if rows == 0 {
            return;
        }
        let (extents, offsets) = &self.layouts[cells.len().trailing_zeros() as usize];
        let DrawScratch { base, cumulative } = scratch;
        self.decoder.axis_indices(first, base);
        let weighed = self.shapes.is_some_and(|shapes| shapes.cumulative_in(base, extents, cumulative));
        if !weighed {
            for _ in 0..rows {
                cells[(coins.next_u64() % cells.len() as u64) as usize] += 1;
            }
            return;
        }
        for _ in 0..rows {
            let index = cumulative.iter().zip(extents).fold(0, |index, (running, &extent)| {
                let target = unit_interval(coins) * running[extent - 1];
                index * extent + running.partition_point(|&upto| upto <= target).min(extent - 1)
            });
            cells[offsets[index] as usize] += 1;
        }
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
        let fine = (CellGeometry::new(2, 2 + levels), &FinerCounts::Histogram(fine));
        let key = NoiseKey::from_user_seed(3);
        let (refined, parameters) = refinement.refine((0, &leaves), fine, levels, (&key, 1), None);
        let counts = refined.to_dense(0, 4 << levels);
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
        let truth = FinerCounts::Histogram(vec![0; 64]);
        let (refined, parameters) = refinement.refine((0, &leaves), (fine, &truth), 4, (&key, 2), Some(&shapes));
        let counts = refined.to_dense(0, 64);
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

    /// Drawn axis by axis, a block's cells come as often as the product of their axes' weights says, in a leaf
    /// and in a sub-cell of it; evenly where an axis weighs nothing in the block.
    #[test]
    fn a_block_draws_its_cells_in_proportion_to_their_axes_weights() {
        let fine = CellGeometry::new(3, 9);
        let marginals = [vec![1, 3, 0, 2, 5, 5, 1, 1], vec![2; 8], vec![4, 1, 0, 0, 1, 2, 3, 4]];
        let shapes = AxisShapes::from_marginals(&fine, &marginals);
        let draw = BlockDraw::new(&fine, 6, Some(&shapes));
        let decoder = LeafDecoder::new(&fine);
        let mut scratch = draw.scratch();
        let rows = 400_000u64;
        // Block 8..12 lies in axis 2's cells 2 and 3, which weigh nothing.
        for (first, len) in [(0u32, 64usize), (64, 64), (448, 8), (132, 4), (8, 4)] {
            let mut cells = vec![0u64; len];
            draw.draw_into((first, &mut cells), rows, &mut Xoshiro256PlusPlus::seed_from_u64(7), &mut scratch);
            assert_eq!(cells.iter().sum::<u64>(), rows);
            let mut indices = [0u32; 3];
            let weights: Vec<f64> = (0..len as u32)
                .map(|offset| {
                    decoder.axis_indices(first + offset, &mut indices);
                    indices.iter().zip(&shapes.weights).map(|(&index, axis)| axis[index as usize]).product()
                })
                .collect();
            let total: f64 = weights.iter().sum();
            for (cell, (&drawn, &weight)) in cells.iter().zip(&weights).enumerate() {
                let expected = if total > 0.0 { weight / total } else { 1.0 / len as f64 } * rows as f64;
                let spread = 5.0 * expected.max(1.0).sqrt();
                let message = format!("block {first}, cell {cell}: {drawn} drawn for {expected}");
                assert!((drawn as f64 - expected).abs() <= spread, "{message}");
            }
        }
    }

    #[test]
    fn every_sub_cell_of_a_refined_leaf_is_noised_empty_ones_included() {
        let refinement = refinement(3.0);
        let noisy = LeafRefinement::noisy_sub_cells(&refinement.noise(), &[0; 256], 7, &NoiseKey::from_user_seed(1));
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
        let fine = (CellGeometry::new(3, 15), &FinerCounts::Histogram(fine));
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let key = NoiseKey::from_user_seed(9);
            pool.install(|| refinement.refine((0, &leaves), fine, 3, (&key, 4), None).0)
        };
        assert_eq!(run(1), run(3));
    }

    /// The rows' sorted codes, or the leaves that hold rows with their counts, stand for their histogram: the
    /// same refinement, listing only the leaves that hold rows.
    #[test]
    fn sorted_codes_refine_as_their_histogram() {
        let refinement = refinement(2.0);
        let leaves: Vec<u64> = (0..512u64).map(|leaf| (leaf * 7919) % 300).collect();
        let codes: Vec<u32> = (0..20_000u32).map(|row| row.wrapping_mul(2_654_435_761) % (512 << 3)).collect();
        let mut histogram = vec![0u64; 512 << 3];
        codes.iter().for_each(|&code| histogram[code as usize] += 1);
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        let geometry = CellGeometry::new(3, 12);
        let shapes = AxisShapes::from_marginals(&geometry, &[vec![5, 1], vec![1, 2, 3, 4], vec![9; 8]]);
        let key = NoiseKey::from_user_seed(5);
        let refine =
            |truth: &FinerCounts| refinement.refine((0, &leaves), (geometry, truth), 3, (&key, 6), Some(&shapes));
        let mut listed = SparseLeaves::default();
        listed.push_nonzero(0, &histogram);
        let (from_listed, _) = refine(&FinerCounts::Listed(listed));
        let (from_codes, parameters) = refine(&FinerCounts::SortedCodes(sorted));
        let (from_histogram, _) = refine(&FinerCounts::Histogram(histogram));
        assert_eq!(from_codes, from_histogram);
        assert_eq!(from_listed, from_histogram);
        assert!(parameters.leaves_refined > 0);
        assert!(from_codes.counts.iter().all(|&count| count > 0));
        assert_eq!(from_codes.total(), leaves.iter().sum::<u64>());
    }

    /// The tree's leaves summed from the finer counts (a histogram, sorted codes or listed leaves) are the rows'
    /// leaves.
    #[test]
    fn the_finer_counts_sum_to_the_tree_leaves() {
        let codes: Vec<u32> = (0..5_000u32).map(|row| row.wrapping_mul(2_654_435_761) % (64 << 6)).collect();
        let mut finer = vec![0u64; 64 << 6];
        let mut leaves = vec![0u64; 64];
        for &code in &codes {
            finer[code as usize] += 1;
            leaves[code as usize >> 6] += 1;
        }
        let mut sorted = codes;
        sorted.sort_unstable();
        let mut listed = SparseLeaves::default();
        listed.push_nonzero(0, &finer);
        assert_eq!(FinerCounts::Histogram(finer).tree_leaves(6, 64), leaves);
        assert_eq!(FinerCounts::SortedCodes(sorted).tree_leaves(6, 64), leaves);
        assert_eq!(FinerCounts::Listed(listed).tree_leaves(6, 64), leaves);
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
            let part = FinerCounts::Histogram(fine[first << 3..end << 3].to_vec());
            refinement.refine((first, &leaves[first..end]), (geometry, &part), 3, (&key, 4), Some(&shapes))
        };
        let (whole, parameters) = refine(0, 64);
        let parts = [refine(0, 20), refine(20, 21), refine(21, 64)];
        let joined: Vec<u64> = parts.iter().flat_map(|(part, _)| part.cells()).map(|(_, count)| count).collect();
        assert_eq!(joined, whole.counts);
        assert_eq!(parts[1].0.to_dense(20 << 3, 8), whole.to_dense(0, 64 << 3)[20 << 3..21 << 3]);
        let refined: u64 = parts.iter().map(|(_, part)| part.leaves_refined).sum();
        assert_eq!(refined, parameters.leaves_refined);
        assert!(refined > 0);
    }
}
