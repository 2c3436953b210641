//! Private domains (`--private-bounds SHARE`): the bounds of a numeric, date or timestamp column without
//! public ones, released from a declared share of ε before the mechanism runs (docs/privacy.md, "Private
//! domains"). The mechanism then reads the released bounds as if they were public (post-processing).
//!
//! Method: for each end, the exponential mechanism over the cells between consecutive points of a public,
//! data-independent grid ([`BoundsGrid`]: 0 and ±m·2^k, m ∈ {1, 1.25, 1.5, 1.75}, in the column's stored
//! unit). The lower end picks the cell [c_i, c_{i+1}) that holds the t-th smallest value and releases c_i;
//! the upper end the cell (c_j, c_{j+1}] of the t-th largest and releases c_{j+1}. So about t values are
//! clamped at each end, with t = min(max(⌈n/1000⌉, τ), ⌊n/2⌋): the 0.1% quantile where ε·n allows, and
//! otherwise the smallest rank τ the mechanism can aim at without its tail of far cells winning.
//!
//! Utility of the lower end's cell i, with r(c) = #{x < c} and n the column's count of finite values:
//! u_i = −max(0, t − r(c_{i+1}), r(c_i) − t), 0 exactly when r(c_i) ≤ t ≤ r(c_{i+1}). Sensitivity 1 under
//! both relations: under replace a value that moves leaves n and t fixed and moves each r(c) by at most 1;
//! under add-remove (and under replace where a null becomes a value or back, which adds or removes one of
//! the column's n values) each r(c) and t (a non-decreasing function of n with steps of at most 1) move by
//! 0 or 1 in the same direction, so t − r(c) moves by at most 1; and max(0, a, b) is 1-Lipschitz. The upper end is the same
//! with #{x > c}. A rank utility, unlike a distance to the quantile, has no ties among the cells far below
//! the data to spread the choice over: they all score −t.
//!
//! Each end is one exponential mechanism, P(i) ∝ exp(ε_end·u_i/2), sampled exactly
//! ([`crate::noise::exponential_mechanism`]) with the scale 2/ε_end rounded up to a rational: ε_end-DP.
//! The share is split evenly: ε_end = SHARE·ε/(2·columns); the two ends and the columns compose by
//! summing. The released interval is the hull of the two chosen cells (post-processing: it also orders
//! ends that crossed).

use crate::error::{Error, Result};
use crate::noise::discrete_laplace::RationalScale;
use crate::noise::exponential_mechanism::sample_exponential_mechanism;
use crate::privacy::{noise_scale, Budget, NoiseKey, NoiseStream};

/// The grid's exponents k of m·2^k: from 2^−32 ≈ 2.3·10^−10 to 1.75·2^62 ≈ 8·10^18 (past any timestamp
/// in nanoseconds).
pub const GRID_EXPONENTS: std::ops::RangeInclusive<i32> = -32..=62;
/// The grid's mantissas m, in quarters: 1, 1.25, 1.5 and 1.75, so neighbouring points differ by at most
/// 25% and a released end wastes at most that much of the range.
const GRID_MANTISSA_QUARTERS: [u32; 4] = [4, 5, 6, 7];
/// The rank aimed at where n allows: ⌈n/1000⌉, the 0.1% quantile.
pub const TARGET_RANKS_PER_VALUE: u64 = 1000;
/// τ = ⌈σ·(ln K + TAIL_LOG_ODDS)⌉ (σ = 2/ε_end, K cells): every cell below the data scores at most −τ,
/// so all of them together are chosen with probability below e^−6 ≈ 0.25% at a rank target of τ or more.
pub const TAIL_LOG_ODDS: f64 = 6.0;

/// The public candidate ends of a column, ascending: at least two distinct finite points.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundsGrid {
    points: Vec<f64>,
}

impl BoundsGrid {
    /// `points` sorted and deduplicated; an error unless at least two distinct finite points remain.
    pub fn new(mut points: Vec<f64>) -> Result<Self> {
        if points.iter().any(|point| !point.is_finite()) {
            return Err(Error::internal("a bounds grid point is not finite"));
        }
        points.sort_by(f64::total_cmp);
        points.dedup();
        if points.len() < 2 {
            return Err(Error::internal("a bounds grid needs two points"));
        }
        Ok(BoundsGrid { points })
    }

    /// The log-scale grid: 0 and ±m·2^k ([`GRID_EXPONENTS`], m ∈ {1, 1.25, 1.5, 1.75}) inside the type's
    /// `range` (and the range's ends themselves, so that its extremes stay reachable), integers only for an
    /// integer column. Depends on the type alone, never on the data.
    pub fn log_scale(range: Option<(f64, f64)>, integers: bool) -> Self {
        let (min, max) = range.unwrap_or((f64::MIN, f64::MAX));
        let mut points = vec![0.0];
        for k in GRID_EXPONENTS {
            for quarters in GRID_MANTISSA_QUARTERS {
                // Exact: a small integer times a power of two.
                let magnitude = f64::from(quarters) * 2f64.powi(k - 2);
                points.extend([magnitude, -magnitude]);
            }
        }
        points.retain(|&point| point >= min && point <= max && (!integers || point.fract() == 0.0));
        if range.is_some() {
            points.extend([min, max]);
        }
        BoundsGrid::new(points).expect("0 and a positive point lie in every type's range")
    }

    pub fn points(&self) -> &[f64] {
        &self.points
    }

    /// The bucket of `value` among the grid's 2K + 1: 2i for the open gap below point i (above point
    /// i − 1), 2i + 1 for point i itself, 2K above the last point.
    pub fn bucket(&self, value: f64) -> usize {
        let below = self.points.partition_point(|&point| point < value);
        if self.points.get(below) == Some(&value) {
            2 * below + 1
        } else {
            2 * below
        }
    }

    pub fn buckets(&self) -> usize {
        2 * self.points.len() + 1
    }
}

/// A column's finite values counted in its grid's buckets ([`BoundsGrid::bucket`]): all a bounds release
/// reads of the data.
#[derive(Clone, Debug, PartialEq)]
pub struct GridCounts {
    buckets: Vec<u64>,
}

impl GridCounts {
    pub fn new(buckets: Vec<u64>) -> Self {
        GridCounts { buckets }
    }

    pub fn buckets(&self) -> &[u64] {
        &self.buckets
    }

    /// (#{x < c_i}, #{x > c_i}) for every grid point c_i, and n.
    fn ranks(&self) -> (Vec<u64>, Vec<u64>, u64) {
        let total: u64 = self.buckets.iter().sum();
        let points = self.buckets.len() / 2;
        let (mut below, mut above) = (Vec::with_capacity(points), Vec::with_capacity(points));
        let mut before = 0u64;
        for point in 0..points {
            before += self.buckets[2 * point];
            below.push(before);
            before += self.buckets[2 * point + 1];
            above.push(total - before);
        }
        (below, above, total)
    }
}

/// The released bounds of one column.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReleasedEnds {
    pub lo: f64,
    pub hi: f64,
}

/// Where the share of ε goes: SHARE·ε split evenly over the columns and their two ends.
#[derive(Clone, Debug)]
pub struct PrivateBoundsPlan {
    share: f64,
    epsilon: f64,
    columns: usize,
    /// σ of each end's exponential mechanism, 2/ε_end rounded up.
    scale: RationalScale,
}

impl PrivateBoundsPlan {
    /// The plan for `columns` columns (at least one) under a run budget of `epsilon`, `share` in (0, 1).
    pub fn new(epsilon: f64, share: f64, columns: usize) -> Result<Self> {
        if columns == 0 {
            return Err(Error::internal("a bounds release needs a column"));
        }
        let end_epsilon = share * epsilon / (2 * columns) as f64;
        // The exponential mechanism's factor 2 over a sensitivity of 1.
        let scale = noise_scale(2.0 / end_epsilon, "--private-bounds")?;
        Ok(PrivateBoundsPlan { share, epsilon, columns, scale })
    }

    /// What the mechanism may spend after the bounds: (1 − SHARE)·ε.
    pub fn mechanism_epsilon(&self) -> f64 {
        (1.0 - self.share) * self.epsilon
    }

    /// ε one end spends, from the rounded scale (at most SHARE·ε/(2·columns)).
    pub fn end_epsilon(&self) -> f64 {
        2.0 / self.scale.to_f64()
    }

    /// The spends of the release, one per end of each column, on a budget of the whole run's ε.
    pub fn budget(&self, columns: &[String]) -> Budget {
        let mut budget = Budget::new(self.epsilon);
        for column in columns {
            for end in ["lower", "upper"] {
                budget.spend(format!("bounds of {column}: {end} end"), self.end_epsilon());
            }
        }
        budget
    }

    /// Which rank from each end is aimed at, for `n` values on a grid of `cells` cells.
    pub fn target_rank(&self, n: u64, cells: usize) -> u64 {
        let tail = (self.scale.to_f64() * ((cells as f64).ln() + TAIL_LOG_ODDS)).ceil() as u64;
        n.div_ceil(TARGET_RANKS_PER_VALUE).max(tail).min(n / 2)
    }

    /// Releases column `column`'s bounds (its index among the released columns: its noise streams) from its
    /// grid counts.
    pub fn release_column(&self, grid: &BoundsGrid, counts: &GridCounts, key: &NoiseKey, column: usize) -> ReleasedEnds {
        debug_assert_eq!(counts.buckets().len(), grid.buckets());
        debug_assert!(column < self.columns);
        let (below, above, n) = counts.ranks();
        let cells = grid.points().len() - 1;
        let target = i128::from(self.target_rank(n, cells));
        let utility = |low_side: u64, high_side: u64| -> i64 {
            // The cell holds the target rank when low_side ≤ t ≤ high_side, counted from its end.
            let gap = 0.max(target - i128::from(high_side)).max(i128::from(low_side) - target);
            -(gap.min(i128::from(i64::MAX)) as i64)
        };
        let lower: Vec<i64> = (0..cells).map(|cell| utility(below[cell], below[cell + 1])).collect();
        let upper: Vec<i64> = (0..cells).map(|cell| utility(above[cell + 1], above[cell])).collect();
        let chunk = 2 * column as u64;
        let low_cell = sample_exponential_mechanism(&mut key.stream(NoiseStream::PrivateBounds, chunk), &lower, self.scale);
        let high_cell =
            sample_exponential_mechanism(&mut key.stream(NoiseStream::PrivateBounds, chunk + 1), &upper, self.scale);
        let points = grid.points();
        ReleasedEnds {
            lo: points[low_cell.min(high_cell)],
            hi: points[low_cell.max(high_cell) + 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_is_public_and_fits_the_type() {
        let floats = BoundsGrid::log_scale(None, false);
        assert_eq!(floats.points().len(), 1 + 2 * 4 * GRID_EXPONENTS.count());
        assert!(floats.points().contains(&0.0) && floats.points().contains(&-1.25) && floats.points().contains(&1.5e0));
        let bytes = BoundsGrid::log_scale(Some((0.0, 255.0)), true);
        assert_eq!(bytes.points().first(), Some(&0.0));
        assert_eq!(bytes.points().last(), Some(&255.0), "the type's top is a candidate");
        assert!(bytes.points().iter().all(|point| point.fract() == 0.0));
        assert!(bytes.points().windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn buckets_separate_points_and_gaps() {
        let grid = BoundsGrid::new(vec![0.0, 1.0, 2.0]).unwrap();
        let buckets: Vec<usize> = [-5.0, 0.0, 0.5, 1.0, 1.5, 2.0, 9.0].iter().map(|&v| grid.bucket(v)).collect();
        assert_eq!(buckets, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(grid.buckets(), 7);
        let (below, above, n) = GridCounts::new(vec![1, 2, 3, 4, 5, 6, 7]).ranks();
        assert_eq!(n, 28);
        assert_eq!(below, [1, 6, 15]);
        assert_eq!(above, [25, 18, 7]);
    }

    #[test]
    fn the_share_is_split_over_columns_and_ends() {
        let plan = PrivateBoundsPlan::new(2.0, 0.1, 4).unwrap();
        let budget = plan.budget(&["a", "b", "c", "d"].map(String::from));
        assert_eq!(budget.spends.len(), 8);
        let spent = budget.spent();
        assert!(spent <= 0.2 && spent > 0.2 * (1.0 - 1e-6), "the bounds spend SHARE·ε = 0.2, not {spent}");
        assert!((plan.mechanism_epsilon() - 1.8).abs() < 1e-12);
        assert_eq!(plan.target_rank(10, 700), 5, "never past the median");
        assert_eq!(plan.target_rank(10_000_000_000, 700), 10_000_000);
    }

    #[test]
    fn a_concentrated_column_gets_the_cells_around_it() {
        // Every value in (1000, 1010): the grid cell [896, 1024) holds both targets.
        let grid = BoundsGrid::log_scale(Some((i32::MIN as f64, i32::MAX as f64)), true);
        let mut buckets = vec![0; grid.buckets()];
        buckets[grid.bucket(1005.0)] = 100_000;
        let plan = PrivateBoundsPlan::new(1.0, 0.1, 1).unwrap();
        for seed in 0..5 {
            let ends = plan.release_column(&grid, &GridCounts::new(buckets.clone()), &NoiseKey::from_user_seed(seed), 0);
            assert_eq!(ends, ReleasedEnds { lo: 896.0, hi: 1024.0 });
        }
    }
}
