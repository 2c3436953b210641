//! The W1 estimates of an evaluation, and which one is the headline number (SPEC §7).
//!
//! - d = 1: exact (sorted CDFs).
//! - Any d, when the distinct points are few enough: exact dense transport between the two tables with
//!   duplicate rows merged into counts (synthetic tables placed at cell centres have many).
//! - Otherwise: exact transport between the two tables quantised to a regular grid (king-move min-cost
//!   flow), whose distance to the true W1 is bounded by the measured quantisation (each point's ℓ∞
//!   distance to its cell centre, averaged, for each table) plus any mass rounding.
//! - Always: the one-pass sandwich, max of the 1-D W1s ≤ W1 ≤ the dyadic-tree bound (best depth).
//!
//! `lower`/`upper` of the headline are valid bounds on the true W1: the intersection of the sandwich with
//! the chosen estimate's own interval.

use std::collections::HashMap;

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::eval::w1::{
    dyadic_upper_bound, w1_exact_small, w1_grid, Sample, W1Error, EXACT_COST_BITS, EXACT_SMALL_MAX_PAIRS, GRID_MAX_ARCS,
};
use crate::geometry::partition::{CellGeometry, MAX_DEPTH};

use super::summary::{grid_index, SUM_CHUNK_ROWS};

/// Largest product of distinct point counts solved by exact dense transport: all that
/// `w1_exact_small` takes. Measured on the 2-core development machine: 2000 × 2000 distinct points in d = 2
/// and 3 take under a second.
pub const EXACT_MAX_PAIRS: usize = EXACT_SMALL_MAX_PAIRS;

/// Arc budget of the default grid: the king-move graph of the finest side within it. About
/// 2^20 arcs solve in seconds (d = 2: side 362; d = 3: side 34).
pub const DEFAULT_GRID_ARCS: usize = 1 << 20;

/// A coarser default grid than this says too little to be worth solving; the headline is then the sandwich.
pub const MIN_DEFAULT_GRID_SIDE: usize = 4;

/// Deepest leaf level of the sandwich's dyadic histograms (2^22 cells: 32 MiB per table).
pub const SANDWICH_MAX_DEPTH: u32 = 22;

/// Which estimate the headline W1 is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum W1Method {
    /// d = 1: ∫ |F_real − F_synth|, exact.
    #[serde(rename = "exact-1d")]
    Exact1d,
    /// Dense transport between the tables, exact up to 2^−36.
    ExactTransport,
    /// Exact transport between the grid-quantised tables; within `grid.error_bound` of W1.
    Grid,
    /// Neither exact nor a useful grid fits (large d): the midpoint of the sandwich.
    Sandwich,
}

impl W1Method {
    /// The name the JSON report uses.
    pub fn name(self) -> &'static str {
        match self {
            W1Method::Exact1d => "exact-1d",
            W1Method::ExactTransport => "exact-transport",
            W1Method::Grid => "grid",
            W1Method::Sandwich => "sandwich",
        }
    }
}

/// The headline W1 with bounds that hold for the true value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct W1Estimate {
    pub value: f64,
    pub lower: f64,
    pub upper: f64,
    pub method: W1Method,
    /// Which estimate `value` is, in words.
    pub detail: String,
}

/// max_k W1(marginal k) ≤ W1 ≤ the dyadic-tree bound at its best depth.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sandwich {
    pub lower: f64,
    pub upper: f64,
    /// Leaf depth of the dyadic partition that gave the smallest upper bound.
    pub depth: u32,
}

/// Exact W1 between the tables quantised to a grid of side^d cells.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GridEstimate {
    pub side: usize,
    pub w1: f64,
    /// |W1 − w1| ≤ error_bound: measured quantisation of both tables plus mass rounding.
    pub error_bound: f64,
    /// The worst case of the quantisation part, 1/side.
    pub worst_case_error: f64,
}

/// Every W1 number of an evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct Distances {
    /// Exact W1 of each column's marginal, normalised units.
    pub columns: Vec<f64>,
    pub w1: W1Estimate,
    pub sandwich: Sandwich,
    pub grid: Option<GridEstimate>,
}

fn internal(error: W1Error) -> Error {
    Error::internal(format!("evaluation: {error}"))
}

/// All W1 estimates between two tables of normalised points (row-major, `dims` per row). `grid_side`
/// forces the grid estimate at that side (it is then always computed); `None` picks the default.
pub fn distances(real: &[f64], synth: &[f64], dims: usize, grid_side: Option<usize>) -> Result<Distances> {
    let (a, b) = (Sample::new(real, dims).map_err(internal)?, Sample::new(synth, dims).map_err(internal)?);
    let (columns, sandwich) = rayon::join(
        || {
            (0..dims)
                .into_par_iter()
                .map(|axis| crate::eval::w1::w1_marginal(&a, &b, axis))
                .collect::<Result<Vec<f64>, W1Error>>()
        },
        || dyadic_sandwich_upper(real, synth, dims),
    );
    let columns = columns.map_err(internal)?;
    let (upper, depth) = sandwich?;
    let sandwich = Sandwich { lower: columns.iter().copied().fold(0.0, f64::max), upper, depth };

    let exact = if dims == 1 {
        Some((
            columns[0],
            columns[0],
            columns[0],
            W1Method::Exact1d,
            "exact: integral of |F_real - F_synth| over the sorted values".to_string(),
        ))
    } else {
        exact_transport(real, synth, dims)?
    };
    let grid = match (grid_side, &exact) {
        (Some(side), _) => Some(grid_estimate(real, synth, dims, side).map_err(|error| match error {
            W1Error::TooLarge(reason) => Error::bad_input(format!("--grid-side {side}: {reason}")),
            other => internal(other),
        })?),
        (None, Some(_)) => None,
        (None, None) => match default_grid_side(dims) {
            Some(side) => Some(grid_estimate(real, synth, dims, side).map_err(internal)?),
            None => None,
        },
    };
    let (value, lower, upper, method, detail) = match (exact, &grid) {
        (Some(exact), _) => exact,
        (None, Some(grid)) => (
            grid.w1,
            grid.w1 - grid.error_bound,
            grid.w1 + grid.error_bound,
            W1Method::Grid,
            format!(
                "grid estimate: exact W1 between the tables quantised to a grid of side {} (king-move \
                 min-cost flow) is {:.4e}; the true W1 is within {:.3e} of it (measured quantisation of \
                 both tables)",
                grid.side, grid.w1, grid.error_bound
            ),
        ),
        (None, None) => (
            0.5 * (sandwich.lower + sandwich.upper),
            sandwich.lower,
            sandwich.upper,
            W1Method::Sandwich,
            format!(
                "midpoint of the sandwich: no exact method or grid fits d = {dims}; only the bounds are guaranteed"
            ),
        ),
    };
    let w1 = intersect(value, lower, upper, &sandwich, method, detail);
    Ok(Distances { columns, w1, sandwich, grid })
}

/// The headline with its own interval intersected with the sandwich (both hold, so the intersection does;
/// if floating-point rounding makes them miss each other by a hair, the estimate's own interval is kept).
fn intersect(value: f64, lower: f64, upper: f64, sandwich: &Sandwich, method: W1Method, detail: String) -> W1Estimate {
    let (own_lower, own_upper) = (lower, upper);
    let (both_lower, both_upper) = (lower.max(sandwich.lower), upper.min(sandwich.upper));
    let (lower, upper) = if both_lower <= both_upper { (both_lower, both_upper) } else { (lower.max(0.0), upper) };
    let clamped = value.clamp(lower, upper);
    // Say what the reader can rely on: the interval both give, and whether the value had to move into it.
    let detail = if clamped != value {
        format!(
            "{detail}; with the sandwich the true W1 lies in [{lower:.4e}, {upper:.4e}], so the headline is the \
             estimate moved into that interval"
        )
    } else if (lower, upper) != (own_lower, own_upper) {
        format!("{detail}; with the sandwich the true W1 lies in [{lower:.4e}, {upper:.4e}]")
    } else {
        detail
    };
    W1Estimate { value: clamped, lower, upper, method, detail }
}

/// Exact W1 by dense transport when the distinct points allow, as (value, lower, upper, method, detail).
fn exact_transport(real: &[f64], synth: &[f64], dims: usize) -> Result<Option<(f64, f64, f64, W1Method, String)>> {
    let Some(((points_a, counts_a), (points_b, counts_b))) = distinct_rows(real, synth, dims, EXACT_MAX_PAIRS) else {
        return Ok(None);
    };
    let (distinct_a, distinct_b) = (counts_a.len(), counts_b.len());
    let value = w1_exact_small(
        &Sample::with_counts(&points_a, dims, &counts_a).map_err(internal)?,
        &Sample::with_counts(&points_b, dims, &counts_b).map_err(internal)?,
    )
    .map_err(internal)?;
    let rounding = (-(EXACT_COST_BITS as f64)).exp2();
    Ok(Some((
        value,
        (value - rounding).max(0.0),
        value,
        W1Method::ExactTransport,
        format!(
            "exact: optimal transport between the tables ({distinct_a} and {distinct_b} distinct points), \
             solved as a min-cost flow; within 2^-{EXACT_COST_BITS} above the true value"
        ),
    )))
}

/// Distinct rows (row-major, in lexicographic order) and their multiplicities.
pub type DistinctRows = (Vec<f64>, Vec<u64>);

/// The distinct rows of both tables with their multiplicities, or `None` as soon as the product of the
/// two distinct counts passes `limit`. The tables are read in alternation, so tables of continuous values
/// are given up after about √limit rows each, and duplicate-heavy ones are merged in one pass.
pub fn distinct_rows(real: &[f64], synth: &[f64], dims: usize, limit: usize) -> Option<(DistinctRows, DistinctRows)> {
    let mut counts = [HashMap::<Vec<u64>, u64>::new(), HashMap::new()];
    let mut rows = [real.chunks_exact(dims), synth.chunks_exact(dims)];
    loop {
        let mut read = false;
        for (seen, table) in counts.iter_mut().zip(rows.iter_mut()) {
            if let Some(row) = table.next() {
                read = true;
                *seen.entry(row.iter().map(|x| x.to_bits()).collect()).or_insert(0) += 1;
            }
        }
        if counts[0].len().saturating_mul(counts[1].len()) > limit {
            return None;
        }
        if !read {
            break;
        }
    }
    let [a, b] = counts.map(|seen| {
        let mut distinct: Vec<(Vec<f64>, u64)> =
            seen.into_iter().map(|(bits, count)| (bits.into_iter().map(f64::from_bits).collect(), count)).collect();
        distinct.sort_unstable_by(|p, q| {
            p.0.iter()
                .zip(&q.0)
                .map(|(x, y)| x.total_cmp(y))
                .find(|ordering| ordering.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let counts = distinct.iter().map(|(_, count)| *count).collect();
        (distinct.into_iter().flat_map(|(row, _)| row).collect(), counts)
    });
    Some((a, b))
}

/// The finest side whose king-move graph has at most [`DEFAULT_GRID_ARCS`] arcs, if it is at least
/// [`MIN_DEFAULT_GRID_SIDE`].
pub fn default_grid_side(dims: usize) -> Option<usize> {
    let neighbours = 3usize.checked_pow(u32::try_from(dims).ok()?)? - 1;
    let arcs = |side: usize| side.checked_pow(dims as u32).and_then(|cells| cells.checked_mul(neighbours));
    let fits = |side: usize| arcs(side).is_some_and(|arcs| arcs <= DEFAULT_GRID_ARCS.min(GRID_MAX_ARCS));
    let mut side = 1;
    while fits(side + 1) {
        side += 1;
    }
    (side >= MIN_DEFAULT_GRID_SIDE).then_some(side)
}

/// The cell of a row's coordinates `axes` on the regular grid: row-major, the first axis most significant
/// (the layout of `w1::w1_grid`), and their ℓ∞ distance to the cell centre.
#[inline]
fn grid_cell_and_offset(row: &[f64], axes: &[usize], side: usize) -> (usize, f64) {
    axes.iter().fold((0, 0.0f64), |(index, offset), &axis| {
        let x = row[axis];
        let cell = grid_index(x, side);
        let centre = (cell as f64 + 0.5) / side as f64;
        (index * side + cell, offset.max((x - centre).abs()))
    })
}

/// Grid histogram of a table's coordinates `axes` and the mean ℓ∞ distance of those points to their cell
/// centres, which bounds W1(points, quantised points) (moving each point to its centre is a coupling).
fn grid_histogram_and_offset(
    points: &[f64],
    dims: usize,
    axes: &[usize],
    side: usize,
    cells: usize,
) -> (Vec<u64>, f64) {
    let cell_offsets: Vec<(Vec<u32>, f64)> = points
        .par_chunks(SUM_CHUNK_ROWS * dims)
        .map(|chunk| {
            let mut offset_sum = 0.0;
            let cells = chunk
                .chunks_exact(dims)
                .map(|row| {
                    let (cell, offset) = grid_cell_and_offset(row, axes, side);
                    offset_sum += offset;
                    cell as u32
                })
                .collect();
            (cells, offset_sum)
        })
        .collect();
    let mut hist = vec![0u64; cells];
    let mut offset_sum = 0.0;
    for (chunk_cells, chunk_offset) in cell_offsets {
        for cell in chunk_cells {
            hist[cell as usize] += 1;
        }
        offset_sum += chunk_offset;
    }
    (hist, offset_sum / (points.len() / dims) as f64)
}

/// The grid estimate at `side`, with its error bound.
pub fn grid_estimate(real: &[f64], synth: &[f64], dims: usize, side: usize) -> Result<GridEstimate, W1Error> {
    let axes: Vec<usize> = (0..dims).collect();
    grid_estimate_on_axes(real, synth, dims, &axes, side)
}

/// The grid estimate of W1 between the marginals of the coordinates `axes` (all of them: the tables' W1).
pub fn grid_estimate_on_axes(
    real: &[f64],
    synth: &[f64],
    dims: usize,
    axes: &[usize],
    side: usize,
) -> Result<GridEstimate, W1Error> {
    let grid_dims = axes.len();
    let cells = u32::try_from(grid_dims)
        .ok()
        .and_then(|d| side.checked_pow(d))
        .filter(|&cells| side >= 1 && cells <= GRID_MAX_ARCS)
        .ok_or_else(|| {
            W1Error::TooLarge(format!(
                "a grid of side {side} in d = {grid_dims} has more than {GRID_MAX_ARCS} cells (or side is 0)"
            ))
        })?;
    let ((hist_a, offset_a), (hist_b, offset_b)) = rayon::join(
        || grid_histogram_and_offset(real, dims, axes, side, cells),
        || grid_histogram_and_offset(synth, dims, axes, side, cells),
    );
    let grid = w1_grid(&hist_a, &hist_b, side, grid_dims)?;
    Ok(GridEstimate {
        side,
        w1: grid.value,
        error_bound: (offset_a + offset_b).min(grid.quantisation_error) + grid.rounding_error,
        worst_case_error: grid.quantisation_error,
    })
}

/// The smallest dyadic-tree upper bound over leaf depths 0..=R, and its depth. R grows with the table
/// sizes (≈ log2 n + d: deeper leaves cost more in sampling noise than they save in leaf diameter).
fn dyadic_sandwich_upper(real: &[f64], synth: &[f64], dims: usize) -> Result<(f64, u32)> {
    let rows = (real.len() / dims).max(synth.len() / dims);
    let depth = (usize::BITS - rows.leading_zeros() + dims as u32).min(SANDWICH_MAX_DEPTH).min(MAX_DEPTH);
    let geometry = CellGeometry::new(dims, depth);
    let (mut hist_a, mut hist_b) = rayon::join(|| leaf_histogram(real, &geometry), || leaf_histogram(synth, &geometry));
    let mut best = (f64::INFINITY, depth);
    for level in (0..=depth).rev() {
        let bound = dyadic_upper_bound(&hist_a, &hist_b, dims, level).map_err(internal)?;
        if bound <= best.0 {
            best = (bound, level);
        }
        if level > 0 {
            hist_a = hist_a.chunks_exact(2).map(|pair| pair[0] + pair[1]).collect();
            hist_b = hist_b.chunks_exact(2).map(|pair| pair[0] + pair[1]).collect();
        }
    }
    Ok(best)
}

/// Leaf histogram of the dyadic partition (SPEC §3 codes) of normalised points.
fn leaf_histogram(points: &[f64], geometry: &CellGeometry) -> Vec<u64> {
    let dims = geometry.dims();
    let scales: Vec<(f64, u32)> = (0..dims)
        .map(|axis| {
            let cells = 1u32 << geometry.axis_bits(axis);
            (cells as f64, cells - 1)
        })
        .collect();
    let codes: Vec<Vec<u32>> = points
        .par_chunks(SUM_CHUNK_ROWS * dims)
        .map(|chunk| {
            let mut indices = vec![0u32; dims];
            chunk
                .chunks_exact(dims)
                .map(|row| {
                    for ((index, &x), &(cells, top)) in indices.iter_mut().zip(row).zip(&scales) {
                        *index = ((x * cells) as u32).min(top);
                    }
                    geometry.leaf_code(&indices)
                })
                .collect()
        })
        .collect();
    let mut hist = vec![0u64; geometry.leaf_count()];
    for code in codes.into_iter().flatten() {
        hist[code as usize] += 1;
    }
    hist
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::w1::grid_histogram;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn random_points(rng: &mut Xoshiro256PlusPlus, n: usize, dims: usize, shift: f64) -> Vec<f64> {
        let lattice = rng.next_u64().is_multiple_of(3);
        (0..n * dims)
            .map(|_| {
                let x = if lattice {
                    (rng.next_u64() % 5) as f64 / 4.0
                } else {
                    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
                };
                (x * (1.0 - shift) + shift).min(1.0)
            })
            .collect()
    }

    #[test]
    fn sandwich_and_headline_bracket_the_exact_value_on_random_instances() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        for dims in 1..=3 {
            for _ in 0..40 {
                let (na, nb) = (1 + (rng.next_u64() % 30) as usize, 1 + (rng.next_u64() % 30) as usize);
                let shift = (rng.next_u64() % 4) as f64 / 8.0;
                let (a, b) = (random_points(&mut rng, na, dims, 0.0), random_points(&mut rng, nb, dims, shift));
                let exact = w1_exact_small(&Sample::new(&a, dims).unwrap(), &Sample::new(&b, dims).unwrap()).unwrap();
                let tolerance = 1e-12 + (-(EXACT_COST_BITS as f64)).exp2();
                for side in [None, Some(3), Some(7)] {
                    let found = distances(&a, &b, dims, side).unwrap();
                    let s = &found.sandwich;
                    assert!(s.lower <= exact + tolerance && exact <= s.upper + tolerance, "d {dims}: {s:?} vs {exact}");
                    let w = &found.w1;
                    assert!(w.lower <= exact + tolerance && exact <= w.upper + tolerance, "d {dims}: {w:?} vs {exact}");
                    assert!(w.lower <= w.value && w.value <= w.upper);
                    assert!((w.value - exact).abs() <= tolerance, "small inputs are solved exactly");
                    if let Some(grid) = &found.grid {
                        assert!((grid.w1 - exact).abs() <= grid.error_bound + 1e-12, "{grid:?} vs {exact}");
                        assert!(grid.error_bound <= grid.worst_case_error);
                    }
                }
            }
        }
    }

    #[test]
    fn method_names_are_the_json_names() {
        for method in [W1Method::Exact1d, W1Method::ExactTransport, W1Method::Grid, W1Method::Sandwich] {
            assert_eq!(serde_json::to_value(method).unwrap(), method.name());
        }
    }

    #[test]
    fn duplicates_merge_into_counts_until_the_pairs_pass_the_limit() {
        let points = [0.5, 0.25, 0.0, 1.0, 0.5, 0.25, 0.5, 0.0];
        let ((distinct, counts), (other, other_counts)) = distinct_rows(&points, &[0.5, 0.5], 2, 3).unwrap();
        assert_eq!(distinct, vec![0.0, 1.0, 0.5, 0.0, 0.5, 0.25]);
        assert_eq!(counts, vec![1, 1, 2]);
        assert_eq!((other, other_counts), (vec![0.5, 0.5], vec![1]));
        assert!(distinct_rows(&points, &[0.5, 0.5, 0.1, 0.1], 2, 5).is_none(), "3 × 2 pairs > 5");
        let long: Vec<f64> = (0..10_000).map(|i| i as f64 / 10_000.0).collect();
        assert!(distinct_rows(&long, &long, 1, 100).is_none());
    }

    #[test]
    fn grid_cells_use_the_layout_of_the_w1_grid_solver() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(22);
        for dims in 1..=3 {
            for side in 1..=6usize {
                let points = random_points(&mut rng, 50, dims, 0.0);
                let cells = side.pow(dims as u32);
                let axes: Vec<usize> = (0..dims).collect();
                let (mine, offset) = grid_histogram_and_offset(&points, dims, &axes, side, cells);
                let theirs = grid_histogram(&Sample::new(&points, dims).unwrap(), side).unwrap();
                assert_eq!(mine, theirs);
                assert!(offset <= 0.5 / side as f64 + 1e-15);
            }
        }
    }

    #[test]
    fn default_grid_fits_the_arc_budget() {
        assert_eq!(default_grid_side(2), Some(362));
        assert_eq!(default_grid_side(3), Some(34));
        for dims in 1..=12 {
            if let Some(side) = default_grid_side(dims) {
                assert!(side.pow(dims as u32) * (3usize.pow(dims as u32) - 1) <= DEFAULT_GRID_ARCS);
            }
        }
        assert_eq!(default_grid_side(9), None);
    }

    #[test]
    fn larger_tables_use_the_grid_and_its_bounds_hold_for_a_known_shift() {
        // 2100 × 2100 distinct points: above EXACT_MAX_PAIRS, so the headline is the grid. b is a shifted
        // by (0.25, 0): W1 ≤ ‖shift‖∞ = 0.25 (move every point back) and W1 ≥ the first marginal's 0.25.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(23);
        let dims = 2;
        let a: Vec<f64> =
            (0..2100 * dims).map(|_| 0.75 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64).collect();
        let b: Vec<f64> = a.chunks_exact(dims).flat_map(|row| [row[0] + 0.25, row[1]]).collect();
        for side in [None, Some(50)] {
            let found = distances(&a, &b, dims, side).unwrap();
            assert_eq!(found.w1.method, W1Method::Grid);
            let w = &found.w1;
            assert!(w.lower <= 0.25 + 1e-12 && 0.25 <= w.upper + 1e-12, "{w:?}");
            let grid = found.grid.as_ref().unwrap();
            assert!((grid.w1 - 0.25).abs() <= grid.error_bound + 1e-12, "{grid:?}");
            assert!((found.columns[0] - 0.25).abs() < 1e-12);
            assert!(found.sandwich.lower <= 0.25 + 1e-12 && 0.25 <= found.sandwich.upper);
        }
    }

    #[test]
    fn without_exact_method_or_grid_the_headline_is_the_sandwich() {
        // d = 6: no default grid fits the arc budget, and 2100 distinct points per table are too many
        // for exact transport. A shift of 0.25 along axis 0 has W1 = 0.25 exactly.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(24);
        let dims = 6;
        assert_eq!(default_grid_side(dims), None);
        let a: Vec<f64> =
            (0..2100 * dims).map(|_| 0.75 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64).collect();
        let b: Vec<f64> = a.iter().enumerate().map(|(i, &x)| if i % dims == 0 { x + 0.25 } else { x }).collect();
        let found = distances(&a, &b, dims, None).unwrap();
        assert_eq!(found.w1.method, W1Method::Sandwich);
        assert!(found.grid.is_none());
        let w = &found.w1;
        assert!(w.lower <= 0.25 + 1e-12 && 0.25 <= w.upper && w.lower <= w.value && w.value <= w.upper);
        assert_eq!((w.lower, w.upper), (found.sandwich.lower, found.sandwich.upper));
    }
}
