//! The bottom-up pass before the top-down consistency (`--bottom-up average`): each cell's noisy count is
//! replaced by the inverse-variance average of itself and the sum of its children's averaged estimates,
//! from the leaves up (Hay, Rastogi, Miklau and Suciu, "Boosting the accuracy of differentially private
//! histograms through consistency", VLDB 2010, with unequal noise per level). The top-down uniform split
//! that follows is their second pass, so the pair is least squares over the whole tree, up to the clip at 0.
//!
//! Why it pays: a cell's count is measured once by its own noise and again by every level below it. Under
//! PMM's schedule σ_j ∝ 1/√Δ_{j−1} the children of a cell carry less noise than it does, so the sum of two
//! children is nearly as good a measurement as the cell's own; at d = 3 averaging the two cuts the variance
//! of the counts by 44% just above the leaves and by about 80% high in the tree.
//!
//! Privacy: post-processing. It reads the noisy counts and the public scales, never the data.
//!
//! Accuracy: each estimate z is unbiased with variance V_j ([`LevelWeights::variance`]), and the value the
//! split reads, max(0, round(z)), is off the true count n by at most |z − n| + ½. So E max(|e_θ0|, |e_θ1|)
//! ≤ √(2·V_j) + ½ takes the place of 2√2·σ_j in Theorem 3.9 (Lemma 3.16 reads the children's errors only).

use rayon::prelude::*;
use serde::Serialize;

use crate::geometry::tree::CountTree;
use crate::noise::discrete_laplace::RationalScale;

/// Cells per rayon task at least.
const PARALLEL_MIN_CELLS: usize = 1 << 12;

/// The pass before the top-down split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BottomUp {
    /// The split reads each cell's own noisy count (dissertation Algorithm 3 as written).
    None,
    /// The split reads each cell's count averaged with its children's, by inverse variance.
    Average,
}

/// `--mechanism pmm`'s pass: none, so that it stays the textbook mechanism others compare with (auto's is
/// [`super::auto::AUTO_BOTTOM_UP`]).
pub const PMM_BOTTOM_UP: BottomUp = BottomUp::None;

/// Per level: the weight of a cell's own noisy count in its estimate, and the estimate's variance.
#[derive(Clone, Debug, PartialEq)]
pub struct LevelWeights {
    /// w_j: z_θ = w_j·y_θ + (1 − w_j)·(z_θ0 + z_θ1); 1 at the leaves and on levels not noised.
    own: Vec<f64>,
    /// V_j = Var z_θ: the leaves' noise variance, then V_j = s_j·2V_{j+1} / (s_j + 2V_{j+1}).
    variance: Vec<f64>,
}

impl LevelWeights {
    /// The weights for a tree noised with `scales` (level 0 ..= r). The root is kept as it is (it is n̂,
    /// or the public n), and so is any level without a scale (variance 0).
    pub fn new(scales: &[Option<RationalScale>]) -> Self {
        let depth = scales.len() - 1;
        let mut own = vec![1.0; depth + 1];
        let mut variance: Vec<f64> = scales.iter().map(|scale| scale.map_or(0.0, |scale| scale.variance())).collect();
        for level in (1..depth).rev() {
            if scales[level].is_none() {
                continue;
            }
            let (noise, children) = (variance[level], 2.0 * variance[level + 1]);
            own[level] = children / (noise + children);
            variance[level] = noise * children / (noise + children);
        }
        LevelWeights { own, variance }
    }

    /// V_j, the variance of level j's estimates.
    pub fn variance(&self, level: u32) -> f64 {
        self.variance[level as usize]
    }

    /// Whether level j is averaged (noised, and not the leaves).
    fn averages(&self, level: u32) -> bool {
        self.own[level as usize] < 1.0
    }
}

/// Averages every noised level of `tree` between the root and the leaves, in place: each count becomes
/// [`settle`]d z, the leaves max(0, y).
pub fn average_tree(tree: &mut CountTree, weights: &LevelWeights) {
    average_levels(tree.levels_mut(), 0, weights);
}

/// Averages `levels`, consecutive levels `first_level ..` down to the leaves (of a whole tree, or of one
/// rank's subtrees), in place from the leaves up, as [`average_tree`] does; returns the estimates of
/// `levels[0]`. The level above the leaves reads them as they are, so no copy of the leaves is made.
pub fn average_levels(levels: &mut [Vec<i64>], first_level: u32, weights: &LevelWeights) -> Vec<f64> {
    let Some((leaves, upper)) = levels.split_last_mut() else {
        return Vec::new();
    };
    let Some((above_leaves, rest)) = upper.split_last_mut() else {
        let estimates = leaves.iter().map(|&count| count as f64).collect();
        clip_at_zero(leaves);
        return estimates;
    };
    let level = first_level + rest.len() as u32;
    let mut below = average_cells(above_leaves, leaves, |count: i64| count as f64, level, weights);
    clip_at_zero(leaves);
    for (offset, cells) in rest.iter_mut().enumerate().rev() {
        below = average_cells(cells, &below, |estimate: f64| estimate, first_level + offset as u32, weights);
    }
    below
}

/// The count the split reads for an estimate z: max(0, round(z)).
pub fn settle(estimate: f64) -> i64 {
    estimate.round().max(0.0) as i64
}

fn clip_at_zero(counts: &mut [i64]) {
    counts.par_iter_mut().with_min_len(PARALLEL_MIN_CELLS).for_each(|count| *count = (*count).max(0));
}

/// One level of the pass: `cells` (level `level`'s noisy counts) averaged with the sums of their children's
/// estimates `children` (read through `estimate`); the cells get [`settle`]d z, and the estimates z are
/// returned for the level above. A level not averaged (the root) returns its counts as they are.
pub fn average_cells<T: Copy + Sync>(
    cells: &mut [i64],
    children: &[T],
    estimate: impl Fn(T) -> f64 + Sync,
    level: u32,
    weights: &LevelWeights,
) -> Vec<f64> {
    assert_eq!(children.len(), 2 * cells.len(), "level {level}: two children per cell");
    if !weights.averages(level) {
        return cells.iter().map(|&count| count as f64).collect();
    }
    let own = weights.own[level as usize];
    cells
        .par_iter_mut()
        .zip(children.par_chunks_exact(2))
        .with_min_len(PARALLEL_MIN_CELLS)
        .map(|(count, pair)| {
            let z = own * *count as f64 + (1.0 - own) * (estimate(pair[0]) + estimate(pair[1]));
            *count = settle(z);
            z
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::laplace_table::ScaleSampler;
    use crate::privacy::{NoiseKey, NoiseStream};

    fn scales(sigmas: &[f64]) -> Vec<Option<RationalScale>> {
        sigmas.iter().map(|&sigma| RationalScale::round_up(sigma)).collect()
    }

    #[test]
    fn weights_follow_inverse_variance_from_the_leaves_up() {
        let weights = LevelWeights::new(&scales(&[5.0, 4.0, 3.0, 2.0]));
        let var = |sigma: f64| RationalScale::round_up(sigma).unwrap().variance();
        assert_eq!(weights.variance(3), var(2.0));
        let v2 = var(3.0) * 2.0 * var(2.0) / (var(3.0) + 2.0 * var(2.0));
        assert!((weights.variance(2) - v2).abs() < 1e-12);
        assert!((weights.own[2] - 2.0 * var(2.0) / (var(3.0) + 2.0 * var(2.0))).abs() < 1e-12);
        for level in 1..3 {
            assert!(weights.variance(level) < var([5.0, 4.0, 3.0][level as usize]));
        }
        // Lap_Z(σ) has variance close to 2σ² for σ well above 1.
        assert!((var(20.0) / 800.0 - 1.0).abs() < 1e-3);
        // A released root is not averaged; the levels below are.
        let released = LevelWeights::new(&[None, RationalScale::round_up(3.0), RationalScale::round_up(2.0)]);
        assert_eq!((released.own[0], released.variance(0)), (1.0, 0.0));
        assert!(released.averages(1) && !released.averages(0) && !released.averages(2));
        let noised_root = LevelWeights::new(&scales(&[5.0, 4.0, 3.0]));
        assert!(!noised_root.averages(0), "a noised root is n-hat too");
    }

    #[test]
    fn true_counts_come_back_unchanged() {
        // With no noise, a cell's count and its children's sum agree, so any weights return it.
        let depth: u32 = 8;
        let leaves: Vec<u64> = (0..1u64 << depth).map(|cell| (cell * 2654435761) % 11).collect();
        let truth = CountTree::from_leaves(leaves, depth);
        let mut tree = truth.clone();
        average_tree(&mut tree, &LevelWeights::new(&scales(&[4.0; 9])));
        assert_eq!(tree, truth);
    }

    /// The estimates' errors over many noise draws: their variance is V_j, below the noise's own, and any
    /// other weight does worse (a wrong weight or a wrong variance formula fails here).
    #[test]
    fn estimates_are_unbiased_with_the_variance_the_bound_uses() {
        let depth: u32 = 6;
        let sigmas: Vec<f64> = (0..=depth).map(|level| 6.0 * 0.8f64.powi(level as i32)).collect();
        let scales = scales(&sigmas);
        let weights = LevelWeights::new(&scales);
        let leaves: Vec<u64> = (0..1u64 << depth).map(|cell| 50 + cell % 5).collect();
        let truth = CountTree::from_leaves(leaves, depth);
        let key = NoiseKey::from_user_seed(3);
        let draws = 4000;
        // Errors of the level-1 estimates, with the chosen weight and with that weight moved by ±0.15.
        let mut errors = [Vec::new(), Vec::new(), Vec::new()];
        for draw in 0..draws {
            let mut rng = key.stream(NoiseStream::PmmLevel(0), draw);
            let mut noisy = truth.clone();
            for level in 1..=depth {
                let sampler = ScaleSampler::new(scales[level as usize].unwrap());
                noisy.level_mut(level).iter_mut().for_each(|count| *count += sampler.sample(&mut rng));
            }
            let mut below: Vec<f64> = noisy.level(depth).iter().map(|&count| count as f64).collect();
            for level in (2..depth).rev() {
                below = average_cells(&mut noisy.level(level).to_vec(), &below, |z: f64| z, level, &weights);
            }
            for (errors, shift) in errors.iter_mut().zip([0.0, -0.15, 0.15]) {
                let own = weights.own[1] + shift;
                for (cell, &count) in noisy.level(1).iter().enumerate() {
                    let estimate = own * count as f64 + (1.0 - own) * (below[2 * cell] + below[2 * cell + 1]);
                    errors.push(estimate - truth.level(1)[cell] as f64);
                }
            }
        }
        let moments = |errors: &[f64]| {
            let mean = errors.iter().sum::<f64>() / errors.len() as f64;
            (mean, errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64)
        };
        let (mean, variance) = moments(&errors[0]);
        let expected = weights.variance(1);
        assert!(mean.abs() < 4.0 * (expected / errors[0].len() as f64).sqrt(), "bias {mean}");
        assert!((variance / expected - 1.0).abs() < 0.06, "variance {variance}, V_1 {expected}");
        let noise = scales[1].unwrap().variance();
        assert!(expected < 0.75 * noise, "V_1 {expected} against the noise's {noise}");
        for other in &errors[1..] {
            assert!(moments(other).1 > variance, "a moved weight did no worse");
        }
    }
}
