//! PMM's privacy accounting (docs/mechanisms/pmm.md): the per-level noise schedule, the
//! depth rule and the accuracy bound. Everything here is a function of public inputs (ε, d, depth, the
//! public n under `replace`) or of already-released values (the noisy root count n̂), never of the data.

use super::averaging::{BottomUp, LevelWeights};
use crate::error::Result;
use crate::geometry::partition::{level_diameter_sum, MAX_DEPTH};
use crate::noise::discrete_laplace::RationalScale;
use crate::privacy::{noise_scale, Neighbours};

/// How the levels of one PMM run are noised.
#[derive(Clone, Debug, PartialEq)]
pub struct LevelSchedule {
    pub neighbours: Neighbours,
    pub dims: usize,
    pub depth: u32,
    /// Noise scale per level 0..=r; `None` where the count is public (the root under `replace`).
    pub scales: Vec<Option<RationalScale>>,
}

/// Where the root count's noise comes from under add-remove.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RootNoise {
    /// The root is one more level of the optimal schedule (`--depth` given).
    InSchedule,
    /// The root was released first at this scale, to choose the depth from n̂.
    Released(RationalScale),
}

impl LevelSchedule {
    /// The schedule for ε at depth r. Under add-remove the root is either part of the optimal schedule
    /// or already released (and its share of ε already subtracted from `epsilon` by the caller).
    pub fn new(
        neighbours: Neighbours,
        epsilon: f64,
        dims: usize,
        depth: u32,
        root: RootNoise,
    ) -> Result<Self> {
        let sensitivity = neighbours.histogram_sensitivity();
        let first_level = match (neighbours, root) {
            (Neighbours::AddRemove, RootNoise::InSchedule) => 0,
            _ => 1,
        };
        let mut scales = vec![None; depth as usize + 1];
        if let (Neighbours::AddRemove, RootNoise::Released(scale)) = (neighbours, root) {
            scales[0] = Some(scale);
        }
        for (level, sigma) in optimal_scales(dims, first_level, depth, epsilon, sensitivity) {
            let what = format!("epsilon {} at level {level}", crate::error::compact_number(epsilon));
            scales[level as usize] = Some(noise_scale(sigma, &what)?);
        }
        Ok(LevelSchedule {
            neighbours,
            dims,
            depth,
            scales,
        })
    }

    /// Cells whose count changes between neighbours, per noised level: 1 (add-remove) or 2 (replace).
    pub fn sensitivity(&self) -> f64 {
        self.neighbours.histogram_sensitivity()
    }

    /// ε spent by level j: sensitivity/σ_j (0 for a public count).
    pub fn level_epsilon(&self, level: u32) -> f64 {
        self.scales[level as usize].map_or(0.0, |scale| self.sensitivity() / scale.to_f64())
    }

    /// The total privacy loss Σ_j sensitivity/σ_j with the rounded scales actually used (Theorem 3.8).
    pub fn spent_epsilon(&self) -> f64 {
        (0..=self.depth)
            .map(|level| self.level_epsilon(level))
            .sum()
    }

    /// Theorem 3.9 for this schedule with the consistency's pruning `floors` (f_j, none where the slice
    /// ends): E W1 ≤ (1/n) Σ_j (e_j + f_j) Δ_{j−1} + 2^{−⌊r/d⌋}, in normalised ℓ∞ units, over noised
    /// levels; `n` is the public n (replace) or the released n̂ (add-remove). e_j bounds the mean of the
    /// larger error of two sibling counts the splits read: 2√2 σ_j for the noisy counts (E|λ| ≤ √2 σ, twice);
    /// after `bottom_up` averaging √(2 V_j) (Cauchy–Schwarz on the two unbiased estimates) plus ½ for the
    /// rounding above the leaves, the root kept as it is. A pruned count is off the true one by less than its
    /// error + f_j, which is all Lemma 3.16 changes.
    pub fn accuracy_bound(&self, n: f64, floors: &[i64], bottom_up: BottomUp) -> f64 {
        let sigmas = self
            .scales
            .iter()
            .enumerate()
            .filter_map(|(level, scale)| Some((level as u32, scale.as_ref()?.to_f64())));
        let (errors, per_error): (Vec<(u32, f64)>, f64) = match bottom_up {
            BottomUp::None => (sigmas.collect(), NOISY_COUNT_ERROR),
            BottomUp::Average => {
                let weights = LevelWeights::new(&self.scales);
                let error = |(level, sigma): (u32, f64)| match level {
                    0 => (level, NOISY_COUNT_ERROR * sigma),
                    _ if level == self.depth => (level, (2.0 * weights.variance(level)).sqrt()),
                    _ => (level, (2.0 * weights.variance(level)).sqrt() + 0.5),
                };
                (sigmas.map(error).collect(), 1.0)
            }
        };
        let pruning: f64 = floors
            .iter()
            .enumerate()
            .map(|(level, &floor)| floor as f64 * level_diameter_sum(self.dims, (level as u32).checked_sub(1)))
            .sum();
        theorem_3_9_bound(self.dims, self.depth, errors.into_iter(), per_error, n) + pruning / n.max(1.0)
    }
}

/// σ_j = c·S/(ε·√Δ_{j−1}), S = Σ √Δ_{j−1} over the noised levels (dissertation eq. 3.7, normalised):
/// then Σ_j c/σ_j = ε exactly (in real arithmetic).
fn optimal_scales(
    dims: usize,
    first_level: u32,
    depth: u32,
    epsilon: f64,
    sensitivity: f64,
) -> Vec<(u32, f64)> {
    let root_delta = |level: u32| level_diameter_sum(dims, level.checked_sub(1)).sqrt();
    let s: f64 = (first_level..=depth).map(root_delta).sum();
    (first_level..=depth)
        .map(|level| (level, sensitivity * s / (epsilon * root_delta(level))))
        .collect()
}

/// e_j / σ_j for noisy counts: E max(|λ_θ0|, |λ_θ1|) ≤ E|λ_θ0| + E|λ_θ1| ≤ 2·√2 σ_j.
const NOISY_COUNT_ERROR: f64 = 2.0 * std::f64::consts::SQRT_2;

/// (c/n) Σ_j t_j Δ_{j−1} + 2^{−⌊r/d⌋}: e_j = c·t_j over the levels' terms t_j (σ_j with c = 2√2 for the
/// noisy counts).
fn theorem_3_9_bound(
    dims: usize,
    depth: u32,
    terms: impl Iterator<Item = (u32, f64)>,
    per_term: f64,
    n: f64,
) -> f64 {
    let noise: f64 = terms
        .map(|(level, term)| term * level_diameter_sum(dims, level.checked_sub(1)))
        .sum();
    per_term * noise / n.max(1.0) + crate::geometry::partition::cell_diameter(dims, depth)
}

/// The leaf depth for this relation and budget, from a size that is public (replace) or released
/// (n̂ under add-remove), capped at `max_depth`:
/// - d = 1: the depth that minimises the Theorem 3.9 bound (`root_sigma`, the scale already spent on
///   n̂ under add-remove, counts in it);
/// - d ≥ 2: [`deep_tree_depth`], because there the bound's minimiser is far too shallow for real tables
///   (see that function).
pub fn choose_depth(
    neighbours: Neighbours,
    epsilon_levels: f64,
    dims: usize,
    n: f64,
    root_sigma: Option<f64>,
    max_depth: u32,
) -> u32 {
    let max_depth = max_depth.min(rows_depth_cap(n));
    if dims >= 2 {
        return deep_tree_depth(epsilon_levels, n).min(max_depth.min(MAX_DEPTH));
    }
    bound_minimising_depth(neighbours, epsilon_levels, dims, n, root_sigma, max_depth)
}

/// The depth that minimises the Theorem 3.9 bound for this relation and budget, capped at `max_depth`.
/// `root_sigma` is the scale already spent on n̂ (add-remove), which then counts in the bound.
pub fn bound_minimising_depth(
    neighbours: Neighbours,
    epsilon_levels: f64,
    dims: usize,
    n: f64,
    root_sigma: Option<f64>,
    max_depth: u32,
) -> u32 {
    let sensitivity = neighbours.histogram_sensitivity();
    let first_level = match (neighbours, root_sigma) {
        (Neighbours::AddRemove, None) => 0,
        _ => 1,
    };
    let bound = |depth: u32| {
        let levels = optimal_scales(dims, first_level, depth, epsilon_levels, sensitivity);
        let root = root_sigma.map(|sigma| (0, sigma));
        theorem_3_9_bound(dims, depth, root.into_iter().chain(levels), NOISY_COUNT_ERROR, n)
    };
    (0..=max_depth.min(MAX_DEPTH))
        .min_by(|&a, &b| bound(a).total_cmp(&bound(b)))
        .expect("the range of depths is never empty")
}

/// Leaves beyond 2^4 per row add no accuracy (at most n of them hold a row) but cost time and memory:
/// ε = 1e300 on 1000 rows asked for depth 28 and ran for a minute.
pub const DEPTH_BEYOND_ROWS: u32 = 4;

/// The deepest tree the rule chooses for n rows: ⌈log2 n⌉ + [`DEPTH_BEYOND_ROWS`] (an explicit --depth
/// is not capped).
pub fn rows_depth_cap(n: f64) -> u32 {
    (n.max(1.0).log2().ceil().min(MAX_DEPTH as f64) as u32 + DEPTH_BEYOND_ROWS).min(MAX_DEPTH)
}

/// r = ⌈log2(εn)⌉ − 1 (at least 0): about εn/2 leaves, one below Corollary 3.11's ⌈log2(εn)⌉.
///
/// Why not the bound's minimiser in d ≥ 2: Theorem 3.9 charges every cell's noise at the cell's
/// diameter, which is tight only when the data fill the cube. Real tables fill a small part of their
/// public bounding box, and there the deep tree measured far lower W1: on the bundled flights table
/// (2 and 3 columns, ε = 0.1, 1, 10) 3–11× lower than at the minimiser's depth (4–6 levels shallower);
/// 1.3–6× on clustered generated data; on uniform data it is 1.3–1.8× worse. One level below
/// ⌈log2(εn)⌉ was within 1.8× of the best depth in every case measured and halves the cell arrays.
pub fn deep_tree_depth(epsilon: f64, n: f64) -> u32 {
    let cells = epsilon * n;
    if cells.is_nan() || cells <= 2.0 {
        return 0;
    }
    (cells.log2().ceil() - 1.0).min(MAX_DEPTH as f64) as u32
}

/// Bytes a PMM run at depth r needs for its cell arrays: the merged u64 leaf histogram, one u32
/// histogram per binning thread, the i64 tree (≈ 2·2^r cells) and the sampler's u64 leaf offsets.
pub fn cell_memory_bytes(depth: u32, threads: usize) -> u128 {
    (1u128 << depth) * (8 + 4 * threads as u128 + 16 + 8)
}

/// The deepest partition whose cell arrays fit in `memory_limit` bytes.
pub fn max_depth_for_memory(memory_limit: u64, threads: usize) -> u32 {
    (0..=MAX_DEPTH)
        .rev()
        .find(|&depth| cell_memory_bytes(depth, threads) <= memory_limit as u128)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, relative: f64) -> bool {
        (a - b).abs() <= relative * b.abs()
    }

    #[test]
    fn level_budgets_sum_to_epsilon_for_both_relations() {
        for &epsilon in &[0.01, 0.1, 1.0, 3.7, 50.0] {
            for dims in 1..=5 {
                for depth in [0u32, 1, 2, 7, 18, 26] {
                    for (neighbours, root) in [
                        (Neighbours::AddRemove, RootNoise::InSchedule),
                        (Neighbours::Replace, RootNoise::InSchedule),
                    ] {
                        let schedule =
                            LevelSchedule::new(neighbours, epsilon, dims, depth, root).unwrap();
                        let spent = schedule.spent_epsilon();
                        if neighbours == Neighbours::Replace && depth == 0 {
                            assert_eq!(spent, 0.0, "a public root alone spends nothing");
                            continue;
                        }
                        assert!(
                            spent <= epsilon,
                            "{neighbours:?} ε={epsilon} d={dims} r={depth}: spent {spent}"
                        );
                        assert!(
                            close(spent, epsilon, 1e-6),
                            "{neighbours:?} ε={epsilon} d={dims} r={depth}: spent {spent}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn pruning_floors_add_their_levels_diameters_to_the_bound() {
        let schedule = LevelSchedule::new(Neighbours::AddRemove, 1.0, 2, 4, RootNoise::InSchedule).unwrap();
        let n = 1000.0;
        let floors = [0, 3, 0, 5, 2];
        // In d = 2 the diameters of levels 0, 2 and 3 sum to Δ_0 = 1, Δ_2 = 2 and Δ_3 = 4.
        let added = (3.0 * 1.0 + 5.0 * 2.0 + 2.0 * 4.0) / n;
        for bottom_up in [BottomUp::None, BottomUp::Average] {
            let bare = schedule.accuracy_bound(n, &[], bottom_up);
            let pruned = schedule.accuracy_bound(n, &floors, bottom_up);
            assert!(close(pruned - bare, added, 1e-12), "{bottom_up:?}: {pruned} − {bare} against {added}");
            assert_eq!(schedule.accuracy_bound(n, &[0; 5], bottom_up), bare);
        }
    }

    #[test]
    fn averaging_puts_each_levels_estimate_error_in_the_bound() {
        // d = 1: every level's cells together have diameter 1, so the bound is (1/n) Σ_j e_j + 2^-r.
        let (depth, n) = (3, 500.0);
        let schedule = LevelSchedule::new(Neighbours::AddRemove, 0.7, 1, depth, RootNoise::InSchedule).unwrap();
        let weights = LevelWeights::new(&schedule.scales);
        let sigma = |level: usize| schedule.scales[level].unwrap().to_f64();
        let root = 2.0 * std::f64::consts::SQRT_2 * sigma(0);
        let inner: f64 = (1..depth).map(|level| (2.0 * weights.variance(level)).sqrt() + 0.5).sum();
        let leaves = (2.0 * weights.variance(depth)).sqrt();
        let expected = (root + inner + leaves) / n + 0.125;
        let averaged = schedule.accuracy_bound(n, &[], BottomUp::Average);
        assert!(close(averaged, expected, 1e-12), "{averaged} against {expected}");
        assert!(averaged < schedule.accuracy_bound(n, &[], BottomUp::None));
    }

    #[test]
    fn replace_keeps_the_root_public_and_doubles_the_sensitivity() {
        let replace =
            LevelSchedule::new(Neighbours::Replace, 1.0, 2, 10, RootNoise::InSchedule).unwrap();
        let add_remove =
            LevelSchedule::new(Neighbours::AddRemove, 1.0, 2, 10, RootNoise::InSchedule).unwrap();
        assert!(replace.scales[0].is_none());
        assert!(add_remove.scales.iter().all(Option::is_some));
        // Under replace each level pays for two changed cells: with the same levels 1..r and the same
        // ε, every scale must be exactly twice that of a sensitivity-1 schedule over levels 1..r.
        let root = RootNoise::Released(RationalScale::round_up(16.0).unwrap());
        let add_remove_levels =
            LevelSchedule::new(Neighbours::AddRemove, 1.0, 2, 10, root).unwrap();
        for level in 1..=10 {
            let ratio = replace.scales[level].unwrap().to_f64()
                / add_remove_levels.scales[level].unwrap().to_f64();
            assert!(close(ratio, 2.0, 1e-6), "level {level}: ratio {ratio}");
        }
    }

    #[test]
    fn released_root_and_levels_together_spend_epsilon() {
        let epsilon = 2.0;
        let root_epsilon = epsilon * crate::privacy::DEFAULT_NOISY_N_SHARE;
        let root_scale = RationalScale::round_up(1.0 / root_epsilon).unwrap();
        let schedule = LevelSchedule::new(
            Neighbours::AddRemove,
            epsilon - root_epsilon,
            3,
            15,
            RootNoise::Released(root_scale),
        )
        .unwrap();
        let spent = schedule.spent_epsilon();
        assert!(
            spent <= epsilon && close(spent, epsilon, 1e-6),
            "spent {spent}"
        );
        assert!(close(schedule.level_epsilon(0), root_epsilon, 1e-6));
    }

    #[test]
    fn scales_follow_the_normalised_optimal_rule() {
        // σ_j √Δ_{j−1} is the same on every noised level, and no other split of the budget lowers
        // Σ σ_j Δ_{j−1} (the quantity Theorem 3.9 charges).
        for dims in 1..=4 {
            let schedule =
                LevelSchedule::new(Neighbours::AddRemove, 1.0, dims, 12, RootNoise::InSchedule)
                    .unwrap();
            let sigma = |level: u32| schedule.scales[level as usize].unwrap().to_f64();
            let weight = |level: u32| level_diameter_sum(dims, level.checked_sub(1));
            let products: Vec<f64> = (0..=12)
                .map(|level| sigma(level) * weight(level).sqrt())
                .collect();
            for product in &products {
                assert!(close(*product, products[0], 1e-6));
            }
            let cost = |sigmas: &[f64]| {
                sigmas
                    .iter()
                    .enumerate()
                    .map(|(level, s)| s * weight(level as u32))
                    .sum::<f64>()
            };
            let optimal: Vec<f64> = (0..=12).map(sigma).collect();
            for moved in 0..12usize {
                // Shift a little budget from level `moved` to level `moved + 1`, keeping Σ 1/σ_j fixed.
                let mut other = optimal.clone();
                let shift = 0.05 / other[moved];
                other[moved] = 1.0 / (1.0 / other[moved] - shift);
                other[moved + 1] = 1.0 / (1.0 / other[moved + 1] + shift);
                assert!(cost(&other) > cost(&optimal));
            }
        }
    }

    #[test]
    fn bound_minimising_depth_is_the_global_minimum_and_grows_with_epsilon_n() {
        for dims in 1..=3 {
            let mut previous = 0;
            for &epsilon_n in &[1e3, 1e4, 1e5, 1e6, 1e8] {
                let (epsilon, n) = (1.0, epsilon_n);
                let depth =
                    bound_minimising_depth(Neighbours::Replace, epsilon, dims, n, None, MAX_DEPTH);
                if dims == 1 {
                    assert_eq!(
                        depth,
                        choose_depth(Neighbours::Replace, epsilon, dims, n, None, MAX_DEPTH),
                        "d = 1 chooses the bound's minimiser"
                    );
                }
                assert!(depth >= previous, "d={dims}: the depth must grow with εn");
                previous = depth;
                let bound_at = |r: u32| {
                    LevelSchedule::new(Neighbours::Replace, epsilon, dims, r, RootNoise::InSchedule)
                        .unwrap()
                        .accuracy_bound(n, &[], BottomUp::None)
                };
                let best = bound_at(depth);
                for r in 0..=MAX_DEPTH {
                    assert!(
                        best <= bound_at(r) * (1.0 + 1e-6),
                        "d={dims} εn={epsilon_n}: r={r} beats the chosen r={depth}"
                    );
                }
            }
        }
        for dims in 1..=3 {
            assert!(
                choose_depth(Neighbours::AddRemove, 1.0, dims, 1e12, None, 9) <= 9,
                "the memory cap holds"
            );
        }
    }

    #[test]
    fn depth_in_two_or_more_dimensions_is_one_below_log2_epsilon_n() {
        for dims in 2..=4 {
            for (epsilon, n, expected) in [
                (1.0, 1e5, 16),       // log2(10^5) = 16.6
                (0.1, 327_346.0, 14), // log2(32 734.6) = 14.998
                (1.0, 1024.0, 9),     // exactly 2^10
                (1.0, 1025.0, 10),
                (0.5, 3.0, 0),           // εn ≤ 2: one cell
                (1.0, 1e300, MAX_DEPTH), // capped at what cell codes hold
            ] {
                assert_eq!(
                    choose_depth(Neighbours::Replace, epsilon, dims, n, None, MAX_DEPTH),
                    expected,
                    "d={dims} ε={epsilon} n={n}"
                );
            }
        }
    }

    #[test]
    fn memory_cap_is_monotone_and_respected() {
        assert_eq!(max_depth_for_memory(0, 2), 0);
        let limit = 1u64 << 30;
        let depth = max_depth_for_memory(limit, 2);
        assert!(cell_memory_bytes(depth, 2) <= limit as u128);
        assert!(cell_memory_bytes(depth + 1, 2) > limit as u128);
        assert!(max_depth_for_memory(limit, 16) <= depth);
    }
}
