//! W1 (1-Wasserstein) distance between two empirical measures on [0,1]^d, in normalised ℓ∞ units (SPEC §7).
//!
//! Which estimate each function gives:
//! - [`w1_exact_1d`], [`w1_marginal`]: exact (sorted CDFs), any size.
//! - [`w1_exact_small`]: exact up to 2^−[`EXACT_COST_BITS`] in any d, for small samples (dense transport).
//! - [`lower_bound_marginals`] ≤ W1 ≤ [`dyadic_upper_bound`]: the one-pass sandwich for any n.
//! - [`w1_grid`]: exact W1 of the two measures quantised to a regular grid, within `1/side` of W1.
//!
//! Measures are normalised by their own totals, so the two samples may differ in size. Points are rows of
//! a row-major `&[f64]`, optionally with integer multiplicities ([`Sample::with_counts`]), which keeps every
//! mass a rational and lets the transport problems be solved exactly in integers.

use std::fmt;

use crate::geometry::grid::add_king_move_arcs;
use crate::transport::{fill_holes, solve_min_cost_flow, FlowNetwork, NodeId, TransportError, INFINITE_CAPACITY};

/// [`w1_exact_small`] rounds ℓ∞ distances to multiples of 2^−EXACT_COST_BITS to solve in integers, then
/// prices the optimal plan with the exact distances: the result lies in [W1, W1 + 2^−EXACT_COST_BITS]
/// (plus floating-point rounding of the final sum).
pub const EXACT_COST_BITS: u32 = 36;

/// Largest n_a·n_b that [`w1_exact_small`] accepts (the dense transport has one arc per pair, about
/// 100 bytes each at peak: 0.4 GB).
pub const EXACT_SMALL_MAX_PAIRS: usize = 1 << 22;

/// Largest number of arcs of the king-move graph in [`w1_grid`] (about 100 bytes each at peak: 3.4 GB).
pub const GRID_MAX_ARCS: usize = 1 << 25;

/// Exact transport needs the common mass unit lcm(total_a, total_b); above this many units [`w1_grid`]
/// rounds both measures to [`GRID_ROUNDED_UNITS`] units instead.
pub const GRID_MAX_EXACT_UNITS: u128 = 1 << 58;

/// Mass units per measure when [`w1_grid`] must round (largest-remainder rounding).
pub const GRID_ROUNDED_UNITS: u64 = 1 << 52;

/// Largest total count of a sample or histogram (keeps the exact integer products within `u128`).
pub const MAX_TOTAL_COUNT: u64 = 1 << 62;

#[derive(Clone, Debug, PartialEq)]
pub enum W1Error {
    /// The input is malformed (wrong length, empty, out of [0,1], zero total); the message says which.
    Invalid(String),
    /// The problem is larger than the exact method supports; the message names the limit.
    TooLarge(String),
    /// The transport solver failed (cannot happen for well-formed inputs; kept for diagnosis).
    Transport(TransportError),
}

impl fmt::Display for W1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            W1Error::Invalid(reason) => write!(f, "W1: {reason}"),
            W1Error::TooLarge(reason) => write!(f, "W1: problem too large: {reason}"),
            W1Error::Transport(e) => write!(f, "W1: {e}"),
        }
    }
}

impl std::error::Error for W1Error {}

impl From<TransportError> for W1Error {
    fn from(e: TransportError) -> Self {
        W1Error::Transport(e)
    }
}

/// A weighted point set in [0,1]^d: the empirical measure Σ_i count_i·δ_{x_i} / Σ_i count_i.
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    coords: &'a [f64],
    dims: usize,
    counts: Option<&'a [u64]>,
    total: u64,
}

impl<'a> Sample<'a> {
    /// Points as rows of `coords` (row-major, `dims` values each), every point with weight 1.
    pub fn new(coords: &'a [f64], dims: usize) -> Result<Self, W1Error> {
        let points = check_coords(coords, dims)?;
        if points == 0 {
            return Err(W1Error::Invalid("empty sample".into()));
        }
        if points as u64 > MAX_TOTAL_COUNT {
            return Err(W1Error::TooLarge(format!("more than {MAX_TOTAL_COUNT} points")));
        }
        Ok(Sample { coords, dims, counts: None, total: points as u64 })
    }

    /// Points with integer multiplicities (e.g. cell centres with their counts); zero counts are allowed.
    pub fn with_counts(coords: &'a [f64], dims: usize, counts: &'a [u64]) -> Result<Self, W1Error> {
        let points = check_coords(coords, dims)?;
        if counts.len() != points {
            return Err(W1Error::Invalid(format!("{} counts for {points} points", counts.len())));
        }
        let total = checked_total(counts)?;
        Ok(Sample { coords, dims, counts: Some(counts), total })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn point_count(&self) -> usize {
        self.coords.len() / self.dims
    }

    /// Total mass (number of points, or sum of counts).
    pub fn total(&self) -> u64 {
        self.total
    }

    fn point(&self, i: usize) -> &[f64] {
        &self.coords[i * self.dims..(i + 1) * self.dims]
    }

    fn count(&self, i: usize) -> u64 {
        self.counts.map_or(1, |c| c[i])
    }

    /// (coordinate `axis`, count) of every point with a positive count.
    fn marginal(&self, axis: usize) -> Vec<(f64, u64)> {
        (0..self.point_count())
            .filter(|&i| self.count(i) > 0)
            .map(|i| (self.coords[i * self.dims + axis], self.count(i)))
            .collect()
    }
}

fn check_coords(coords: &[f64], dims: usize) -> Result<usize, W1Error> {
    if dims == 0 {
        return Err(W1Error::Invalid("dimension must be at least 1".into()));
    }
    if !coords.len().is_multiple_of(dims) {
        return Err(W1Error::Invalid(format!("{} coordinates is not a multiple of d = {dims}", coords.len())));
    }
    if let Some(i) = coords.iter().position(|x| !(0.0..=1.0).contains(x)) {
        return Err(W1Error::Invalid(format!(
            "point {} coordinate {} is {}, outside [0, 1] (normalise with the public bounds first)",
            i / dims,
            i % dims,
            coords[i]
        )));
    }
    Ok(coords.len() / dims)
}

/// Σ counts, which must be positive and at most [`MAX_TOTAL_COUNT`].
fn checked_total(counts: &[u64]) -> Result<u64, W1Error> {
    let total: u128 = counts.iter().map(|&c| c as u128).sum();
    if total == 0 {
        return Err(W1Error::Invalid("total mass is zero (empty sample or histogram)".into()));
    }
    if total > MAX_TOTAL_COUNT as u128 {
        return Err(W1Error::TooLarge(format!("total count {total} > {MAX_TOTAL_COUNT}")));
    }
    Ok(total as u64)
}

fn same_dims(a: &Sample, b: &Sample) -> Result<usize, W1Error> {
    if a.dims != b.dims {
        return Err(W1Error::Invalid(format!("samples have d = {} and d = {}", a.dims, b.dims)));
    }
    Ok(a.dims)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Exact W1 between two 1-D empirical measures of any sizes: ∫ |F_a − F_b|.
pub fn w1_exact_1d(a: &[f64], b: &[f64]) -> Result<f64, W1Error> {
    w1_marginal(&Sample::new(a, 1)?, &Sample::new(b, 1)?, 0)
}

/// Exact W1 between the marginals of coordinate `axis` of two weighted samples: ∫ |F_a − F_b| over the
/// merged breakpoints, with F_a·A·B − F_b·A·B held exactly in integers. O((n_a + n_b) log(n_a + n_b)).
pub fn w1_marginal(a: &Sample, b: &Sample, axis: usize) -> Result<f64, W1Error> {
    let dims = same_dims(a, b)?;
    if axis >= dims {
        return Err(W1Error::Invalid(format!("axis {axis} out of range for d = {dims}")));
    }
    let mut xa = a.marginal(axis);
    let mut xb = b.marginal(axis);
    xa.sort_unstable_by(|p, q| p.0.total_cmp(&q.0));
    xb.sort_unstable_by(|p, q| p.0.total_cmp(&q.0));
    let (total_a, total_b) = (a.total as i128, b.total as i128);
    let (mut i, mut j) = (0, 0);
    let (mut cum_a, mut cum_b) = (0i128, 0i128);
    let mut previous = 0.0;
    let mut integral = 0.0;
    while i < xa.len() || j < xb.len() {
        let x = match (xa.get(i), xb.get(j)) {
            (Some(p), Some(q)) => p.0.min(q.0),
            (Some(p), None) => p.0,
            (None, Some(q)) => q.0,
            (None, None) => break,
        };
        // Before the first breakpoint both CDFs are 0, so the first interval contributes nothing.
        integral += (x - previous) * (cum_a * total_b - cum_b * total_a).abs() as f64;
        while i < xa.len() && xa[i].0 == x {
            cum_a += xa[i].1 as i128;
            i += 1;
        }
        while j < xb.len() && xb[j].0 == x {
            cum_b += xb[j].1 as i128;
            j += 1;
        }
        previous = x;
    }
    Ok(integral / (a.total as f64 * b.total as f64))
}

/// Exact W1 of every coordinate marginal (per-column W1 of the evaluation report).
pub fn marginal_w1s(a: &Sample, b: &Sample) -> Result<Vec<f64>, W1Error> {
    (0..same_dims(a, b)?).map(|k| w1_marginal(a, b, k)).collect()
}

/// Lower bound on W1 in ℓ∞: max_k W1 of the k-th marginals. Exact, from the raw points. Valid because a
/// coordinate projection is 1-Lipschitz from ℓ∞ to ℝ, so it maps any coupling of (μ, ν) to a coupling of
/// the marginals at no greater cost.
pub fn lower_bound_marginals(a: &Sample, b: &Sample) -> Result<f64, W1Error> {
    Ok(marginal_w1s(a, b)?.into_iter().fold(0.0, f64::max))
}

/// W1 in ℓ∞ between two small weighted samples, solved as a dense transportation problem.
///
/// Masses are made integer with the common unit 1/lcm(A, B) (A, B the totals): point i of `a` supplies
/// count_i·B/g units and point j of `b` demands count_j·A/g units, g = gcd(A, B), so nothing is rounded.
/// Costs are the ℓ∞ distances rounded to multiples of 2^−[`EXACT_COST_BITS`]; the optimal plan for those
/// costs is then priced with the exact distances, so the result is in [W1, W1 + 2^−EXACT_COST_BITS].
pub fn w1_exact_small(a: &Sample, b: &Sample) -> Result<f64, W1Error> {
    same_dims(a, b)?;
    let support_a: Vec<usize> = (0..a.point_count()).filter(|&i| a.count(i) > 0).collect();
    let support_b: Vec<usize> = (0..b.point_count()).filter(|&j| b.count(j) > 0).collect();
    let pairs = support_a.len().saturating_mul(support_b.len());
    if pairs > EXACT_SMALL_MAX_PAIRS {
        return Err(W1Error::TooLarge(format!(
            "{pairs} point pairs > {EXACT_SMALL_MAX_PAIRS}; use the sandwich or w1_grid"
        )));
    }
    let g = gcd(a.total, b.total);
    let (unit_a, unit_b) = (b.total / g, a.total / g);
    let units = a.total as u128 * unit_a as u128;
    if units > GRID_MAX_EXACT_UNITS {
        return Err(W1Error::TooLarge(format!("lcm of the totals is {units} > {GRID_MAX_EXACT_UNITS}")));
    }
    let mut net = FlowNetwork::with_capacity(support_a.len() + support_b.len(), pairs);
    // Each supply is at most `units`, checked above, so the products fit in i64.
    let nodes_a: Vec<NodeId> = support_a.iter().map(|&i| net.add_node((a.count(i) * unit_a) as i64)).collect();
    let nodes_b: Vec<NodeId> = support_b.iter().map(|&j| net.add_node(-((b.count(j) * unit_b) as i64))).collect();
    let scale = (1u64 << EXACT_COST_BITS) as f64;
    let mut distances = Vec::with_capacity(pairs);
    for (&i, &u) in support_a.iter().zip(&nodes_a) {
        for (&j, &v) in support_b.iter().zip(&nodes_b) {
            let d = linf(a.point(i), b.point(j));
            distances.push(d);
            net.add_arc(u, v, INFINITE_CAPACITY, (d * scale).round() as i64);
        }
    }
    let solution = solve_min_cost_flow(&net)?;
    let cost: f64 = solution.flows.iter().zip(&distances).map(|(&f, &d)| f as f64 * d).sum();
    Ok(cost / units as f64)
}

fn linf(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max)
}

/// ℓ∞ diameter of a depth-j cell of the binary partition of [0,1]^d (SPEC §3): 2^−⌊j/d⌋.
fn cell_diameter(dims: usize, depth: u32) -> f64 {
    0.5f64.powi((depth as usize / dims) as i32)
}

/// Upper bound on W1 in ℓ∞ from the two leaf histograms of the binary partition at depth r (cell codes
/// per SPEC §3, `hist[θ]` for θ ∈ [0, 2^r)), each normalised by its own total. With D_j = 2^−⌊j/d⌋ the
/// ℓ∞ diameter of a depth-j cell and μ_θ, ν_θ the masses of cell θ:
///
///   U = D_r + Σ_{j=1..r} ((D_{j−1} − D_j)/2) · Σ_{|θ|=j} |μ_θ − ν_θ|.
///
/// D_{j−1} − D_j is zero unless d divides j (then it is D_j), so only the levels where cells are cubes count.
///
/// Why it bounds W1 (a transport plan of that cost): in each leaf, keep the common mass min(μ_θ, ν_θ) in
/// the leaf; it moves at most D_r, costing ≤ D_r·Σ_θ min(μ_θ, ν_θ) ≤ D_r·(1 − ½Σ_{|θ|=r}|μ_θ − ν_θ|).
/// Route the excess between leaves optimally for the ultrametric "D of the deepest common ancestor cell",
/// which dominates ℓ∞ because both points lie in that cell. That ultrametric is the path metric of the
/// partition tree with edge weights w_j = (D_{j−1} − D_j)/2 above depth j < r and w_r = D_{r−1}/2 above
/// the leaves (a path through a depth-i apex has length 2·Σ_{j>i} w_j = D_i), and W1 on a weighted tree is
/// Σ_edges w·|mass difference below the edge| (the excess has the same subtree differences as μ − ν).
/// Adding the two parts gives U.
///
/// SPEC §7 states Σ_{j≥1} Σ_{|θ|=j} (D_{j−1}/2)·|μ_θ − ν_θ| + 2·D_r, also a valid upper bound (tree weights
/// D_{j−1}/2 give paths ≥ D_i, and moving every point to a leaf representative costs ≤ D_r per measure)
/// but never smaller than U: each level weight is at least double, and the leaf term is 2·D_r instead of at
/// most D_r. For Dirac masses at opposite corners (W1 = 1) U = 1 exactly, while SPEC's formula gives
/// Σ_{j=1..r} D_{j−1} + 2·D_r (2 for d = 1, r = 1).
pub fn dyadic_upper_bound(hist_a: &[u64], hist_b: &[u64], dims: usize, depth: u32) -> Result<f64, W1Error> {
    if dims == 0 {
        return Err(W1Error::Invalid("dimension must be at least 1".into()));
    }
    if depth >= usize::BITS {
        return Err(W1Error::TooLarge(format!("depth {depth}")));
    }
    let leaves = 1usize << depth;
    if hist_a.len() != leaves || hist_b.len() != leaves {
        return Err(W1Error::Invalid(format!(
            "histograms have {} and {} cells; depth {depth} needs {leaves}",
            hist_a.len(),
            hist_b.len()
        )));
    }
    let (total_a, total_b) = (checked_total(hist_a)? as u128, checked_total(hist_b)? as u128);
    let mut level_a = hist_a.to_vec();
    let mut level_b = hist_b.to_vec();
    let mut bound = cell_diameter(dims, depth);
    let d = u32::try_from(dims).unwrap_or(u32::MAX);
    let mut j = depth;
    while j >= d {
        if j.is_multiple_of(d) {
            // Σ |μ_θ − ν_θ|·A·B, exact: each term ≤ 2^124 and the sum ≤ 2·A·B ≤ 2^125.
            let difference: u128 =
                level_a.iter().zip(&level_b).map(|(&x, &y)| (x as u128 * total_b).abs_diff(y as u128 * total_a)).sum();
            let mass = difference as f64 / (total_a as f64 * total_b as f64);
            bound += 0.5 * cell_diameter(dims, j) * mass;
        }
        level_a = parent_level(&level_a);
        level_b = parent_level(&level_b);
        j -= 1;
    }
    Ok(bound)
}

/// Counts of the parent level: children of θ are 2θ and 2θ + 1.
fn parent_level(level: &[u64]) -> Vec<u64> {
    level.chunks_exact(2).map(|pair| pair[0] + pair[1]).collect()
}

/// Index of the regular-grid cell of a point: coordinate k gets cell min(⌊x_k·side⌋, side − 1) (so 1.0 is
/// in the top cell) and the cell index is row-major with coordinate 0 most significant.
fn grid_cell(point: &[f64], side: usize) -> usize {
    point.iter().fold(0, |index, &x| index * side + ((x * side as f64) as usize).min(side - 1))
}

/// Number of cells side^d, if it is at most `limit`.
fn grid_cells(side: usize, dims: usize, limit: usize) -> Result<usize, W1Error> {
    if side == 0 || dims == 0 {
        return Err(W1Error::Invalid(format!("grid needs side ≥ 1 and d ≥ 1 (got side {side}, d {dims})")));
    }
    u32::try_from(dims)
        .ok()
        .and_then(|d| side.checked_pow(d))
        .filter(|&cells| cells <= limit)
        .ok_or_else(|| W1Error::TooLarge(format!("grid of side {side} in d = {dims} has more than {limit} cells")))
}

/// Histogram of a sample on the regular grid of side^d cells (layout of [`w1_grid`]).
pub fn grid_histogram(sample: &Sample, side: usize) -> Result<Vec<u64>, W1Error> {
    let cells = grid_cells(side, sample.dims, GRID_MAX_ARCS)?;
    let mut hist = vec![0u64; cells];
    for i in 0..sample.point_count() {
        hist[grid_cell(sample.point(i), side)] += sample.count(i);
    }
    Ok(hist)
}

/// W1 between two measures quantised to a regular grid, with what separates it from the true W1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridW1 {
    /// Exact W1 (ℓ∞, normalised units) between the quantised measures, mass at the cell centres
    /// (up to the mass rounding below, when it happened).
    pub value: f64,
    /// |W1(μ, ν) − W1(μ_grid, ν_grid)| ≤ 1/side: every point moves at most half a cell in ℓ∞, in each measure.
    pub quantisation_error: f64,
    /// Extra error from rounding the masses to integer units (0 when the exact common unit fits).
    pub rounding_error: f64,
}

/// Exact W1 between two grid histograms (side^d cells, layout of [`grid_histogram`]), each normalised by its
/// own total, with the mass of each cell at its centre.
///
/// Solved as a min-cost flow on the king-move graph: every cell is linked to its 3^d − 1 neighbours at cost
/// one grid step. A shortest path in that graph between cells i and j has max_k |i_k − j_k| steps, which is
/// side × the ℓ∞ distance of their centres, and a transport plan routes each unit along a shortest path, so
/// the sparse flow has the dense transport's optimum. Net supply of a cell: its μ-units minus its ν-units.
/// In d ≤ 4, between close measures, that flow is solved by [`fill_holes`] (see [`fills_holes`]), else by
/// cost scaling; both are exact.
///
/// Masses are integer units of 1/lcm(A, B) when lcm ≤ [`GRID_MAX_EXACT_UNITS`] (no rounding); otherwise each
/// measure is rounded to [`GRID_ROUNDED_UNITS`] units by largest remainder and `rounding_error` bounds the
/// effect: W1(μ, μ') ≤ diam·TV(μ, μ') with diam = (side − 1)/side between centres, for each measure.
pub fn w1_grid(a_hist: &[u64], b_hist: &[u64], side: usize, dims: usize) -> Result<GridW1, W1Error> {
    let cells = grid_cells(side, dims, usize::MAX)?;
    if a_hist.len() != cells || b_hist.len() != cells {
        return Err(W1Error::Invalid(format!(
            "histograms have {} and {} cells; side {side} in d = {dims} needs {cells}",
            a_hist.len(),
            b_hist.len()
        )));
    }
    let (total_a, total_b) = (checked_total(a_hist)?, checked_total(b_hist)?);
    let quantisation_error = 1.0 / side as f64;
    if side == 1 {
        return Ok(GridW1 { value: 0.0, quantisation_error, rounding_error: 0.0 });
    }
    // side ≥ 2 and side^d fits in usize, so d < 64 and 3^d − 1 is computed below without surprise.
    let arcs = 3usize
        .checked_pow(dims as u32)
        .and_then(|k| (k - 1).checked_mul(cells))
        .filter(|&arcs| arcs <= GRID_MAX_ARCS)
        .ok_or_else(|| {
            W1Error::TooLarge(format!(
                "king-move graph of side {side} in d = {dims} has more than {GRID_MAX_ARCS} arcs"
            ))
        })?;

    let g = gcd(total_a, total_b);
    let exact_units = total_a as u128 * (total_b / g) as u128;
    let (supplies, units, rounding_error) = if exact_units <= GRID_MAX_EXACT_UNITS {
        let (unit_a, unit_b) = ((total_b / g) as i64, (total_a / g) as i64);
        // |a·unit_a − b·unit_b| ≤ lcm ≤ GRID_MAX_EXACT_UNITS, so no overflow.
        let supplies: Vec<i64> =
            a_hist.iter().zip(b_hist).map(|(&x, &y)| x as i64 * unit_a - y as i64 * unit_b).collect();
        (supplies, exact_units as f64, 0.0)
    } else {
        let (ra, tv_a) = largest_remainder(a_hist, total_a, GRID_ROUNDED_UNITS);
        let (rb, tv_b) = largest_remainder(b_hist, total_b, GRID_ROUNDED_UNITS);
        let supplies = ra.iter().zip(&rb).map(|(&x, &y)| x as i64 - y as i64).collect();
        let diameter = (side - 1) as f64 / side as f64;
        (supplies, GRID_ROUNDED_UNITS as f64, diameter * (tv_a + tv_b))
    };

    let steps = if fills_holes(&supplies, units, side, dims) {
        fill_holes(side, dims, &supplies, 0).transport_steps
    } else {
        let net = king_move_network(&supplies, side, dims, arcs);
        solve_min_cost_flow(&net)?.cost as u128
    };
    let value = steps as f64 / (units * side as f64);
    Ok(GridW1 { value, quantisation_error, rounding_error })
}

/// Up to this many grid steps per unit of mass, by the 1-D marginals' lower bound, the grid W1 is solved by
/// the hole filling (measured in d = 2). Its searches follow the distance each unit travels, cost scaling's phases
/// do not: 10^6 against 10^6 rows on the default 362² grid (the `w1` phase, same run), synthetic tables
/// of PMM at ε = 1, 0.01 (bound 1.1 steps per unit), 0.001 (5.5) and an unrelated table (43), the hole
/// filling against cost scaling: 1.9 s against 4.6 s, 3.4 against 4.6, 6.8 against 5.5, 15.4 against 5.4.
/// In d = 3 and 4 (phases; whole `eval` runs, 10^6 rows each) the crossover moves with the grid:
/// unrelated tables at 13–18 steps per unit on 64³ cells took 6.8 and 15 s against 21 and 45 s (182 MB
/// against 816), but on the default 34³ grid 3.5 and 6.2 s against 2.3 and 5.2; on 16⁴, 5.1 steps per unit:
/// 5.4 s against 4.4 (193 MB against 527). Mixed, so one limit for every d.
const HOLE_FILLING_MAX_STEPS_PER_UNIT: f64 = 3.0;

/// The widest grids whose W1 the hole filling solves: from the coarse start in d ≤ 2, in phases in d = 3
/// and 4 (`fill_holes`). Against cost scaling, a synthetic table of 10^6 rows against its source (`eval
/// --grid-side`, 2-core machine): d = 3 (PSMM, ε = 1) on 64³ cells 3.2 s against 13.6 s (peak RSS 181
/// against 778 MB), on 100³ 37 s against 74 s (286 MB against 2.8 GB); d = 4 (PMM, ε = 1) on 16⁴ 1.7 s
/// against 4.1 s, on 24⁴ 4.1 s against 26.3 s (214 MB against 2.5 GB). Wider grids are not measured.
const HOLE_FILLING_MAX_DIMS: usize = 4;

/// Whether [`w1_grid`] solves `supplies` (Σ = 0; each measure `units` in all) by the hole filling: d ≤
/// [`HOLE_FILLING_MAX_DIMS`], and measures close enough ([`HOLE_FILLING_MAX_STEPS_PER_UNIT`], measured in
/// d = 2). The bound: a king move changes each coordinate by at most one step, so every axis' 1-D
/// transport of the marginals costs at most the flow.
fn fills_holes(supplies: &[i64], units: f64, side: usize, dims: usize) -> bool {
    if dims > HOLE_FILLING_MAX_DIMS {
        return false;
    }
    let lower_steps = (0..dims)
        .map(|axis| {
            let stride = side.pow((dims - 1 - axis) as u32);
            let mut marginal = vec![0i128; side];
            for (cell, &supply) in supplies.iter().enumerate() {
                marginal[cell / stride % side] += i128::from(supply);
            }
            // Units carried across each boundary between consecutive slices.
            let mut carried = 0i128;
            marginal
                .iter()
                .map(|&m| {
                    carried += m;
                    carried.unsigned_abs()
                })
                .sum::<u128>()
        })
        .max()
        .unwrap_or(0);
    lower_steps as f64 <= HOLE_FILLING_MAX_STEPS_PER_UNIT * units
}

/// The king-move graph on side^d cells (row-major, coordinate 0 most significant), unit cost per step.
fn king_move_network(supplies: &[i64], side: usize, dims: usize, arcs: usize) -> FlowNetwork {
    let mut net = FlowNetwork::with_capacity(supplies.len(), arcs);
    let nodes: Vec<NodeId> = supplies.iter().map(|&s| net.add_node(s)).collect();
    add_king_move_arcs(&mut net, &nodes, side, dims);
    net
}

/// Rounds counts/total to integers summing to `units` (floor, then +1 to the largest remainders).
/// Returns the rounded masses and the total variation ½Σ|count/total − rounded/units| it introduced.
fn largest_remainder(counts: &[u64], total: u64, units: u64) -> (Vec<u64>, f64) {
    let scaled: Vec<u128> = counts.iter().map(|&c| c as u128 * units as u128).collect();
    let mut rounded: Vec<u64> = scaled.iter().map(|&s| (s / total as u128) as u64).collect();
    let missing = units - rounded.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_unstable_by_key(|&i| std::cmp::Reverse(scaled[i] % total as u128));
    for &i in order.iter().take(missing as usize) {
        rounded[i] += 1;
    }
    let tv = 0.5
        * scaled.iter().zip(&rounded).map(|(&s, &r)| (s.abs_diff(r as u128 * total as u128)) as f64).sum::<f64>()
        / (total as f64 * units as f64);
    (rounded, tv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{below, case_rng, unit_points};
    use crate::transport::tests::permutations;
    use rand_xoshiro::rand_core::Rng;

    /// Leaf code at depth r per SPEC §3 (written independently of the crate's binner).
    fn morton(point: &[f64], depth: u32) -> usize {
        let d = point.len();
        let mut code = 0usize;
        for i in 0..depth as usize {
            let k = i % d;
            let halvings = (depth as usize + d - 1 - k) / d;
            let cell = ((point[k] * (1u64 << halvings) as f64) as u64).min((1u64 << halvings) - 1);
            let bit = (cell >> (halvings - 1 - i / d)) & 1;
            code = (code << 1) | bit as usize;
        }
        code
    }

    fn leaf_histogram(coords: &[f64], dims: usize, depth: u32) -> Vec<u64> {
        let mut hist = vec![0u64; 1 << depth];
        for p in coords.chunks_exact(dims) {
            hist[morton(p, depth)] += 1;
        }
        hist
    }

    /// SPEC §7's formula, computed naively from per-level cell masses.
    fn spec_upper_bound(coords_a: &[f64], coords_b: &[f64], dims: usize, depth: u32) -> f64 {
        let diam = |j: u32| 0.5f64.powi((j as usize / dims) as i32);
        let (na, nb) = ((coords_a.len() / dims) as f64, (coords_b.len() / dims) as f64);
        let mut bound = 2.0 * diam(depth);
        for j in 1..=depth {
            let (ha, hb) = (leaf_histogram(coords_a, dims, j), leaf_histogram(coords_b, dims, j));
            let diff: f64 = ha.iter().zip(&hb).map(|(&x, &y)| (x as f64 / na - y as f64 / nb).abs()).sum();
            bound += diam(j - 1) / 2.0 * diff;
        }
        bound
    }

    #[test]
    fn exact_1d_matches_sorted_pairing_for_equal_sizes() {
        let mut rng = case_rng(1);
        for n in 1..40 {
            let mut a = unit_points(&mut rng, n, 1);
            let mut b = unit_points(&mut rng, n, 1);
            let w = w1_exact_1d(&a, &b).expect("valid");
            a.sort_by(f64::total_cmp);
            b.sort_by(f64::total_cmp);
            let pairing = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum::<f64>() / n as f64;
            assert!((w - pairing).abs() < 1e-12, "n {n}: {w} vs {pairing}");
        }
    }

    #[test]
    fn exact_1d_matches_dense_transport_for_unequal_sizes_and_counts() {
        let mut rng = case_rng(2);
        for _ in 0..200 {
            let (na, nb) = (1 + below(&mut rng, 9), 1 + below(&mut rng, 9));
            let (a, b) = (unit_points(&mut rng, na, 1), unit_points(&mut rng, nb, 1));
            let ca: Vec<u64> = (0..na).map(|_| below(&mut rng, 4) as u64 + u64::from(na == 1)).collect();
            let cb: Vec<u64> = (0..nb).map(|_| below(&mut rng, 4) as u64 + u64::from(nb == 1)).collect();
            let (Ok(sa), Ok(sb)) = (Sample::with_counts(&a, 1, &ca), Sample::with_counts(&b, 1, &cb)) else {
                continue; // all counts zero
            };
            let cdf = w1_marginal(&sa, &sb, 0).expect("valid");
            let flow = w1_exact_small(&sa, &sb).expect("small");
            assert!((cdf - flow).abs() < 1e-9, "{cdf} vs {flow}");
            // Counts are multiplicities: repeating the points gives the same measure.
            let repeat = |x: &[f64], c: &[u64]| -> Vec<f64> {
                x.iter().zip(c).flat_map(|(&v, &k)| std::iter::repeat_n(v, k as usize)).collect()
            };
            let plain = w1_exact_1d(&repeat(&a, &ca), &repeat(&b, &cb)).expect("valid");
            assert!((cdf - plain).abs() < 1e-12);
        }
        assert_eq!(w1_exact_1d(&[0.0], &[1.0, 1.0]), Ok(1.0));
        assert_eq!(w1_exact_1d(&[0.25, 0.75], &[0.5]), Ok(0.25));
    }

    #[test]
    fn exact_small_matches_best_assignment_for_equal_sizes() {
        let mut rng = case_rng(3);
        for dims in 1..=3 {
            for n in 1..=6 {
                let perms = permutations(n);
                for _ in 0..6 {
                    let (a, b) = (unit_points(&mut rng, n, dims), unit_points(&mut rng, n, dims));
                    let point = |x: &[f64], i: usize| x[i * dims..(i + 1) * dims].to_vec();
                    let best = perms
                        .iter()
                        .map(|p| (0..n).map(|i| linf(&point(&a, i), &point(&b, p[i]))).sum::<f64>())
                        .fold(f64::INFINITY, f64::min)
                        / n as f64;
                    let w = w1_exact_small(&Sample::new(&a, dims).unwrap(), &Sample::new(&b, dims).unwrap())
                        .expect("small");
                    assert!(w >= best - 1e-12 && w <= best + 2f64.powi(-(EXACT_COST_BITS as i32)) + 1e-12);
                }
            }
        }
    }

    #[test]
    fn sandwich_contains_exact_value_and_improves_on_spec_formula() {
        let mut rng = case_rng(4);
        for dims in 1..=3 {
            for _ in 0..60 {
                let (na, nb) = (1 + below(&mut rng, 14), 1 + below(&mut rng, 14));
                let (a, b) = (unit_points(&mut rng, na, dims), unit_points(&mut rng, nb, dims));
                let (sa, sb) = (Sample::new(&a, dims).unwrap(), Sample::new(&b, dims).unwrap());
                let exact = w1_exact_small(&sa, &sb).expect("small");
                let lower = lower_bound_marginals(&sa, &sb).expect("valid");
                assert!(lower <= exact + 1e-12, "d {dims}: lower {lower} > exact {exact}");
                for depth in 0..=7 {
                    let upper = dyadic_upper_bound(
                        &leaf_histogram(&a, dims, depth),
                        &leaf_histogram(&b, dims, depth),
                        dims,
                        depth,
                    )
                    .expect("valid");
                    let spec = spec_upper_bound(&a, &b, dims, depth);
                    assert!(exact <= upper + 1e-12, "d {dims} r {depth}: exact {exact} > upper {upper}");
                    assert!(upper <= spec + 1e-12, "d {dims} r {depth}: upper {upper} > SPEC's {spec}");
                }
            }
        }
    }

    #[test]
    fn upper_bound_is_tight_for_opposite_corners_and_needs_only_the_leaf_term_for_equal_histograms() {
        for dims in 1..=3 {
            for depth in 0..=6 {
                let (a, b) = (vec![0.0; dims], vec![1.0; dims]);
                let (ha, hb) = (leaf_histogram(&a, dims, depth), leaf_histogram(&b, dims, depth));
                let upper = dyadic_upper_bound(&ha, &hb, dims, depth).expect("valid");
                assert!((upper - 1.0).abs() < 1e-15, "d {dims} r {depth}: {upper}");
                let same = dyadic_upper_bound(&ha, &ha, dims, depth).expect("valid");
                assert_eq!(same, cell_diameter(dims, depth));
            }
        }
    }

    /// The grid W1 of close measures is solved by the hole filling (from a coarse start in d ≤ 2 from 4096
    /// cells, in phases in d = 3 and 4): it must cost what the general min-cost flow on the king-move
    /// network costs, with unequal totals (units of 1/lcm); far-apart pairs go to cost scaling.
    #[test]
    fn grid_w1_on_large_grids_equals_the_general_min_cost_flow() {
        let mut rng = case_rng(6);
        // Per pair, close or far: how many went to cost scaling and to the hole filling.
        let mut by_hole_filling = [[0; 2]; 2];
        for (side, dims) in [(4096, 1), (64, 2), (90, 2), (16, 3), (8, 4)] {
            for far in [false, true] {
                // Far: b packed into a corner. Close: a is b twice, each copy moved by at most a cell (so the
                // totals differ, 2:1).
                let (a, b) = if far {
                    let a = unit_points(&mut rng, 3000, dims);
                    let nb = 2000 + below(&mut rng, 500);
                    let b = unit_points(&mut rng, nb, dims);
                    (a, b.iter().map(|x| x * 0.5).collect::<Vec<f64>>())
                } else {
                    let b = unit_points(&mut rng, 1500, dims);
                    let moved = unit_points(&mut rng, 3000, dims);
                    let cell = 1.0 / side as f64;
                    let a = b.iter().chain(&b).zip(&moved);
                    (a.map(|(&x, &u)| (x + cell * (u - 0.5)).clamp(0.0, 1.0)).collect(), b)
                };
                let (na, nb) = (a.len() / dims, b.len() / dims);
                let (sa, sb) = (Sample::new(&a, dims).unwrap(), Sample::new(&b, dims).unwrap());
                let (ha, hb) = (grid_histogram(&sa, side).unwrap(), grid_histogram(&sb, side).unwrap());
                let grid = w1_grid(&ha, &hb, side, dims).expect("valid");
                let (units_a, units_b) = (nb as i64, na as i64);
                let supplies: Vec<i64> =
                    ha.iter().zip(&hb).map(|(&x, &y)| x as i64 * units_a - y as i64 * units_b).collect();
                let units = (na * nb) as f64;
                by_hole_filling[usize::from(far)][usize::from(fills_holes(&supplies, units, side, dims))] += 1;
                let arcs = (3usize.pow(dims as u32) - 1) * supplies.len();
                let general = solve_min_cost_flow(&king_move_network(&supplies, side, dims, arcs)).unwrap();
                // Each of the na·nb units here is 1/(na·nb) of mass (w1_grid's unit is that times gcd).
                let expected = general.cost as f64 / (na as f64 * nb as f64 * side as f64);
                let value = grid.value;
                assert!(
                    (value - expected).abs() <= 1e-14 * expected,
                    "side {side}, d = {dims}, far {far}: {value} vs {expected}"
                );
            }
        }
        // The far pair on 8⁴ cells moves 2 steps a unit by the marginals' bound: close enough.
        assert_eq!(by_hole_filling, [[0, 5], [4, 1]], "close, far: cost scaling, hole filling");
    }

    #[test]
    fn grid_w1_is_within_quantisation_error_and_equals_dense_transport_of_cell_centres() {
        let mut rng = case_rng(5);
        for dims in 1..=3 {
            for side in 1..=5 {
                for _ in 0..8 {
                    let (na, nb) = (1 + below(&mut rng, 12), 1 + below(&mut rng, 12));
                    let (a, b) = (unit_points(&mut rng, na, dims), unit_points(&mut rng, nb, dims));
                    let (sa, sb) = (Sample::new(&a, dims).unwrap(), Sample::new(&b, dims).unwrap());
                    let (ha, hb) = (grid_histogram(&sa, side).unwrap(), grid_histogram(&sb, side).unwrap());
                    let grid = w1_grid(&ha, &hb, side, dims).expect("valid");
                    assert_eq!(grid.rounding_error, 0.0);
                    let exact = w1_exact_small(&sa, &sb).expect("small");
                    assert!((grid.value - exact).abs() <= grid.quantisation_error + 1e-12);

                    // Dense transport between the cell centres with the histogram counts.
                    let centres: Vec<f64> = (0..ha.len())
                        .flat_map(|cell| {
                            (0..dims).map(move |k| {
                                let index = cell / side.pow((dims - 1 - k) as u32) % side;
                                (index as f64 + 0.5) / side as f64
                            })
                        })
                        .collect();
                    let dense = w1_exact_small(
                        &Sample::with_counts(&centres, dims, &ha).unwrap(),
                        &Sample::with_counts(&centres, dims, &hb).unwrap(),
                    )
                    .expect("small");
                    assert!((grid.value - dense).abs() < 1e-9, "king-move {} vs dense {dense}", grid.value);
                }
            }
        }
    }

    #[test]
    fn grid_w1_rounds_huge_totals_within_its_stated_error() {
        let mut rng = case_rng(6);
        let side = 16;
        for _ in 0..10 {
            // Totals near 2^41 and 2^40 + odd: their lcm exceeds GRID_MAX_EXACT_UNITS.
            let ha: Vec<u64> = (0..side).map(|_| (rng.next_u64() >> 28) | 1).collect();
            let hb: Vec<u64> = (0..side).map(|_| (rng.next_u64() >> 29) | 1).collect();
            let grid = w1_grid(&ha, &hb, side, 1).expect("valid");
            assert!(grid.rounding_error > 0.0 && grid.rounding_error < 1e-12);
            let centres: Vec<f64> = (0..side).map(|i| (i as f64 + 0.5) / side as f64).collect();
            let exact = w1_marginal(
                &Sample::with_counts(&centres, 1, &ha).unwrap(),
                &Sample::with_counts(&centres, 1, &hb).unwrap(),
                0,
            )
            .expect("valid");
            assert!((grid.value - exact).abs() <= grid.rounding_error + 1e-12);
        }
    }

    #[test]
    fn invalid_inputs_are_errors() {
        assert!(matches!(w1_exact_1d(&[], &[0.5]), Err(W1Error::Invalid(_))));
        assert!(matches!(w1_exact_1d(&[f64::NAN], &[0.5]), Err(W1Error::Invalid(_))));
        assert!(matches!(w1_exact_1d(&[1.5], &[0.5]), Err(W1Error::Invalid(_))));
        assert!(matches!(Sample::new(&[0.5, 0.5, 0.5], 2), Err(W1Error::Invalid(_))));
        assert!(matches!(Sample::with_counts(&[0.5], 1, &[0]), Err(W1Error::Invalid(_))));
        let (one, two) = (Sample::new(&[0.5], 1).unwrap(), Sample::new(&[0.5, 0.5], 2).unwrap());
        assert!(matches!(w1_exact_small(&one, &two), Err(W1Error::Invalid(_))));
        assert!(matches!(dyadic_upper_bound(&[1, 0], &[1, 0, 0, 0], 2, 1), Err(W1Error::Invalid(_))));
        assert!(matches!(dyadic_upper_bound(&[0, 0], &[1, 0], 2, 1), Err(W1Error::Invalid(_))));
        assert!(matches!(w1_grid(&[1, 0, 0], &[0, 0, 1], 2, 2), Err(W1Error::Invalid(_))));
        assert!(matches!(w1_grid(&[1], &[1], 2, 70), Err(W1Error::TooLarge(_))));
        assert_eq!(w1_grid(&[3], &[5], 1, 4).map(|g| g.value), Ok(0.0));
    }
}
