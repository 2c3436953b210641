//! The Private Signed Measure Mechanism (dissertation Algorithms 1–2): noisy counts on every cube of a
//! regular grid (a signed measure ν), then the probability measure closest to ν in the bounded-Lipschitz
//! distance, solved exactly as a min-cost flow. The cell histogram is the only private input; everything
//! after [`noisy_cell_counts`] is post-processing.
//!
//! The projection works on any integer count vector over a [`RegularGrid`] (the low-dimensional mechanism
//! calls it on projected coordinates), see [`project_to_probability`].

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::grid::RegularGrid;
use crate::metrics::w1::add_king_move_arcs;
use crate::noise::discrete_laplace::{sample_discrete_laplace, RationalScale};
use crate::noise::{NoiseKey, NOISE_CHUNK_CELLS};
use crate::privacy::{Neighbours, SCALE_SAFETY_MARGIN};
use crate::transport::{
    solve_min_cost_flow_with, Algorithm, FlowNetwork, NodeId, AUTO_SIMPLEX_MAX_NODES,
    INFINITE_CAPACITY, MAX_ARCS, MAX_NODES,
};

/// The noise stream of PSMM's cells: apart from PMM's levels (0..=30) and its root release (63).
const CELL_NOISE_STREAM: u32 = 62;

/// Peak memory of the min-cost flow per arc (network plus the solver's residual graph), measured for
/// `transport` on king-move grids.
pub const PROJECTION_BYTES_PER_ARC: u64 = 100;

/// The privacy budget of one PSMM run (SPEC §1): Lap_Z(s) on every cell, s = Δ/ε_cells with Δ = 1
/// (add-remove: one cell changes by one) or 2 (replace: two cells change by one), plus, under add-remove
/// when the grid is chosen from the data size, the noisy row count n̂ = n + Lap_Z(1/ε_0) released first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PsmmBudget {
    pub neighbours: Neighbours,
    /// The scale of every cell's noise, rounded up.
    pub cell_scale: RationalScale,
    /// The scale of n̂, when it is released.
    pub root_scale: Option<RationalScale>,
}

impl PsmmBudget {
    /// Splits ε: a share `root_share` for n̂ (add-remove only), the rest for the cells. Every scale is
    /// rounded up (after a relative margin that absorbs f64 rounding), so the spent ε never exceeds ε.
    pub fn new(neighbours: Neighbours, epsilon: f64, root_share: Option<f64>) -> Result<Self> {
        let scale = |sigma: f64, what: &str| {
            RationalScale::round_up(sigma * (1.0 + SCALE_SAFETY_MARGIN)).ok_or_else(|| {
                Error::bad_input(format!(
                    "epsilon {epsilon} gives {what} a noise scale of {sigma:e}, outside the sampler's range"
                ))
            })
        };
        let root_epsilon = match (neighbours, root_share) {
            (Neighbours::Replace, Some(_)) => {
                return Err(Error::internal("replace has a public n: no n̂ to release"))
            }
            (_, Some(share)) => epsilon * share,
            (_, None) => 0.0,
        };
        let sensitivity = sensitivity(neighbours);
        Ok(PsmmBudget {
            neighbours,
            cell_scale: scale(sensitivity / (epsilon - root_epsilon), "the cells")?,
            root_scale: match root_share {
                Some(_) => Some(scale(1.0 / root_epsilon, "the row count n̂")?),
                None => None,
            },
        })
    }

    /// ε spent on the cells: Δ/s.
    pub fn cell_epsilon(&self) -> f64 {
        sensitivity(self.neighbours) / self.cell_scale.to_f64()
    }

    /// ε spent on n̂: 1/σ_0.
    pub fn root_epsilon(&self) -> Option<f64> {
        self.root_scale.map(|scale| 1.0 / scale.to_f64())
    }

    /// The total, by basic composition.
    pub fn spent_epsilon(&self) -> f64 {
        self.cell_epsilon() + self.root_epsilon().unwrap_or(0.0)
    }
}

/// ℓ1 sensitivity of the cell histogram.
fn sensitivity(neighbours: Neighbours) -> f64 {
    match neighbours {
        Neighbours::AddRemove => 1.0,
        Neighbours::Replace => 2.0,
    }
}

/// c_i = n_i + Lap_Z(s) for every cell, empty ones included, unclipped (ν may be negative). Chunk j of
/// [`NOISE_CHUNK_CELLS`] cells draws from its own stream, so the result does not depend on the threads.
pub fn noisy_cell_counts(true_counts: &[u64], scale: RationalScale, key: &NoiseKey) -> Vec<i64> {
    let mut noisy: Vec<i64> = true_counts.par_iter().map(|&count| count as i64).collect();
    noisy
        .par_chunks_mut(NOISE_CHUNK_CELLS)
        .enumerate()
        .for_each(|(chunk, cells)| {
            let mut rng = key.stream(CELL_NOISE_STREAM, chunk as u64);
            for count in cells {
                *count += sample_discrete_laplace(&mut rng, scale);
            }
        });
    noisy
}

/// Arcs of the projection network on `grid`: the king-move arcs, one arc to the sink and two to the bank
/// per cell. `None` on overflow.
pub fn projection_arcs(grid: &RegularGrid) -> Option<u128> {
    grid.king_move_arcs()?
        .checked_add(3 * grid.cell_count() as u128)
}

/// Refuses a grid whose projection network would not fit: more than [`MAX_ARCS`] arcs or more than
/// `memory_limit` bytes at [`PROJECTION_BYTES_PER_ARC`]. The message names m, the limit and the largest
/// grid that fits in this d.
pub fn check_projection_fits(grid: &RegularGrid, memory_limit: u64) -> Result<()> {
    let limit = (MAX_ARCS as u128).min(u128::from(memory_limit / PROJECTION_BYTES_PER_ARC));
    let fits = |grid: &RegularGrid| {
        grid.cell_count() + 2 <= MAX_NODES && projection_arcs(grid).is_some_and(|arcs| arcs <= limit)
    };
    if fits(grid) {
        return Ok(());
    }
    let (dims, side) = (grid.dims(), grid.cells_per_axis());
    let arcs = projection_arcs(grid).map_or_else(|| "too many".to_string(), |arcs| arcs.to_string());
    let largest = (1..side)
        .rev()
        .filter_map(|k| RegularGrid::new(dims, k))
        .find(fits)
        .filter(|largest| largest.cells_per_axis() >= 2);
    let advice = match largest {
        Some(largest) => format!(
            "choose fewer cells with --cells (at most {} = {}^{dims} here) or raise --memory-limit-mib",
            largest.cell_count(),
            largest.cells_per_axis()
        ),
        None => format!("in d = {dims} not even 2 cells per axis fit: use --mechanism pmm"),
    };
    Err(Error::bad_input(format!(
        "psmm: m = {} cells ({side} per axis, d = {dims}) need a flow network of {arcs} arcs, about {} bytes each; \
         the limit here is {limit} arcs ({memory_limit} bytes of memory): {advice}",
        grid.cell_count(),
        PROJECTION_BYTES_PER_ARC,
    )))
}

/// The probability measure closest to ν = counts/mass in d_BL, as integer masses.
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    /// mass·τ_i, summing to `mass` (the optimum of the flow is integral: total unimodularity).
    pub masses: Vec<u64>,
    /// d_BL(τ, ν) in normalised ℓ∞ units (‖f‖_∞ ≤ diam [0,1]^d = 1, Lip f ≤ 1).
    pub d_bl: f64,
    /// Which exact min-cost-flow algorithm solved it.
    pub solver: &'static str,
}

/// argmin over probability vectors τ of d_BL(τ, ν), ν = counts/mass with mass at the cell centres
/// (dissertation Algorithm 2), solved exactly as a min-cost flow in units of one grid step (1/k):
///
/// - one node per cell with supply c_i (may be negative), a sink T with supply −M, a bank B with supply
///   M − Σc;
/// - cell → T, cost 0: its flow is M·τ_i;
/// - king-move arcs both ways between neighbouring cells, cost 1: shortest paths give exactly the ℓ∞
///   distance between centres, k·max_a |i_a − j_a|/k steps;
/// - cell → B and B → cell, cost k: removing or creating mass costs diam [0,1]^d = 1 per unit, the
///   bound ‖f‖_∞ ≤ 1 of the d_BL dual.
///
/// The dual of this flow is max Σ (c_i − M·τ_i)·g_i over |g_i − g_j| ≤ steps(i, j), |g_i| ≤ k (the bank's
/// potential fixed at 0), i.e. M·k·d_BL(τ, ν); minimising over the sink flows minimises over τ. So the
/// optimal cost / (k·M) is the smallest d_BL. The dissertation's LP (f shifted to [0, 2]: disposal 2,
/// creation free) has the same minimisers and an optimum larger by the constant Σν − 1 (tested).
///
/// `mass` must be ≥ 1; `memory_limit` bounds the network (see [`check_projection_fits`]).
pub fn project_to_probability(
    grid: &RegularGrid,
    counts: &[i64],
    mass: u64,
    memory_limit: u64,
) -> Result<Projection> {
    assert_eq!(counts.len(), grid.cell_count(), "one count per cell");
    assert!(mass >= 1, "the projection needs a positive total mass");
    check_projection_fits(grid, memory_limit)?;
    let mass = i64::try_from(mass).map_err(|_| Error::bad_input(format!("mass {mass} is too large")))?;
    let total: i128 = counts.iter().map(|&c| i128::from(c)).sum();
    let bank = i64::try_from(i128::from(mass) - total)
        .map_err(|_| Error::bad_input("the noisy counts are too large to project"))?;
    let (mut net, cells) = cells_network(grid, counts, 1);
    let sink = net.add_node(-mass);
    let first_sink_arc = net.arc_count();
    for &cell in &cells {
        net.add_arc(cell, sink, INFINITE_CAPACITY, 0);
    }
    add_bank(&mut net, &cells, grid, bank);
    let (solution, solver) = solve(&net)?;
    let masses: Vec<u64> = solution.flows[first_sink_arc..first_sink_arc + grid.cell_count()]
        .iter()
        .map(|&flow| flow as u64)
        .collect();
    debug_assert_eq!(masses.iter().sum::<u64>(), mass as u64);
    Ok(Projection {
        masses,
        d_bl: solution.cost as f64 / (f64::from(grid.cells_per_axis()) * mass as f64),
        solver,
    })
}

/// d_BL(a/unit, b/unit) between two signed measures on the cell centres of `grid` (same network without
/// the sink: the cells' supplies are a_i − b_i, the bank takes the difference of the totals).
pub fn bounded_lipschitz_distance(
    grid: &RegularGrid,
    a: &[i64],
    b: &[i64],
    unit: u64,
    memory_limit: u64,
) -> Result<f64> {
    assert!(a.len() == grid.cell_count() && b.len() == grid.cell_count());
    check_projection_fits(grid, memory_limit)?;
    let difference: Vec<i64> = a.iter().zip(b).map(|(&a, &b)| a - b).collect();
    let bank = -difference.iter().sum::<i64>();
    let (mut net, cells) = cells_network(grid, &difference, 0);
    add_bank(&mut net, &cells, grid, bank);
    let (solution, _) = solve(&net)?;
    Ok(solution.cost as f64 / (f64::from(grid.cells_per_axis()) * unit as f64))
}

/// The cell nodes (in the grid's layout) with their king-move arcs, room reserved for
/// `extra_arcs_per_cell` more arcs per cell besides the two bank arcs.
fn cells_network(
    grid: &RegularGrid,
    supplies: &[i64],
    extra_arcs_per_cell: usize,
) -> (FlowNetwork, Vec<NodeId>) {
    let king_moves = grid.king_move_arcs().expect("checked to fit") as usize;
    let arcs = king_moves + (2 + extra_arcs_per_cell) * grid.cell_count();
    let mut net = FlowNetwork::with_capacity(grid.cell_count() + 2, arcs);
    let cells: Vec<NodeId> = supplies.iter().map(|&supply| net.add_node(supply)).collect();
    add_king_move_arcs(
        &mut net,
        &cells,
        grid.cells_per_axis() as usize,
        grid.dims(),
    );
    (net, cells)
}

/// The bank: mass removed from or created at any cell for k steps (one normalised unit) per unit.
fn add_bank(net: &mut FlowNetwork, cells: &[NodeId], grid: &RegularGrid, supply: i64) {
    let bank = net.add_node(supply);
    let cost = i64::from(grid.cells_per_axis());
    for &cell in cells {
        net.add_arc(cell, bank, INFINITE_CAPACITY, cost);
        net.add_arc(bank, cell, INFINITE_CAPACITY, cost);
    }
}

/// Exact min-cost flow: the network simplex on small networks, cost scaling above (the crossover
/// `transport` measured on king-move grids).
fn solve(net: &FlowNetwork) -> Result<(crate::transport::FlowSolution, &'static str)> {
    let (algorithm, name) = if net.node_count() > AUTO_SIMPLEX_MAX_NODES {
        (Algorithm::CostScaling, "exact min-cost flow (cost scaling)")
    } else {
        (Algorithm::NetworkSimplex, "exact min-cost flow (network simplex)")
    };
    let solution = solve_min_cost_flow_with(net, algorithm)
        .map_err(|error| Error::internal(format!("psmm projection: {error}")))?;
    Ok((solution, name))
}

/// Where the normaliser M of ν = c/M comes from, and so how far it may be from the true n.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Normaliser {
    /// The public n (replace): |M − n| = 0.
    PublicN,
    /// The released n̂ = max(0, n + Lap_Z(σ_0)): E|M − n| ≤ E|Lap_Z(σ_0)|.
    ReleasedCount(RationalScale),
    /// max(1, Σ c_i), post-processing of the noisy cells: E|M − n| ≤ √(m·Var λ) + 1.
    NoisyTotal,
}

impl Normaliser {
    pub fn describe(&self) -> &'static str {
        match self {
            Normaliser::PublicN => "public n",
            Normaliser::ReleasedCount(_) => "released noisy count n̂",
            Normaliser::NoisyTotal => "max(1, sum of the noisy cell counts)",
        }
    }
}

/// The accuracy bound the report states, in normalised ℓ∞ units, evaluated at the released M:
///
/// E W1 ≤ 1/k + 2·(√Var(λ)·H + E|M − n|)/M,  H = √m + Σ_{ℓ=1}^{L} D_ℓ·Σ_{θ at level ℓ} √|θ|.
///
/// Dissertation Theorem 3.6: W1(μ_X, output) ≤ W1(μ_X, μ_Y) + 2·d_BL(μ_Y, ν) + W1(ν̂, output), where
/// the first and last terms are at most half a cell each (data to centres, centres to points placed in
/// the cells). The Laplacian complexity E d_BL(μ_Y, ν) is bounded here by dyadic chaining instead of
/// Dudley's integral, which gives explicit constants with the rates of Corollary 3.7: group the cells
/// into blocks of 2^{L−ℓ} per axis (L = ⌈log2 k⌉); for f with |f| ≤ 1, Lip f ≤ 1 and any representative
/// centre c_θ of each block, Σ_i f_i λ_i = f(c_root)·Λ_root + Σ_θ (f(c_θ) − f(c_parent θ))·Λ_θ, where
/// Λ_θ sums the block's noise, |f(c_θ) − f(c_parent)| ≤ D_ℓ = (parent width in cells − 1)/k and
/// E|Λ_θ| ≤ √(|θ|·Var λ). Normalising by M instead of n adds |M − n|/M.
pub fn accuracy_bound(
    grid: &RegularGrid,
    cell_scale: RationalScale,
    normaliser: Normaliser,
    mass: u64,
) -> f64 {
    let variance = discrete_laplace_variance(cell_scale);
    let side = grid.cells_per_axis() as u64;
    let dims = grid.dims() as i32;
    let levels = side.next_power_of_two().trailing_zeros();
    let mut chaining = (grid.cell_count() as f64).sqrt();
    for level in 1..=levels {
        let block = 1u64 << (levels - level);
        let parent_width = (2 * block).min(side);
        let step = (parent_width - 1) as f64 / side as f64;
        // Σ over blocks of √|θ| factorises over the axes: (Σ_b √size_b)^d.
        let per_axis = (side / block) as f64 * (block as f64).sqrt()
            + ((side % block) as f64).sqrt();
        chaining += step * per_axis.powi(dims);
    }
    let normaliser_error = match normaliser {
        Normaliser::PublicN => 0.0,
        Normaliser::ReleasedCount(scale) => discrete_laplace_mean_absolute(scale),
        Normaliser::NoisyTotal => (grid.cell_count() as f64 * variance).sqrt() + 1.0,
    };
    grid.cell_diameter()
        + 2.0 * (variance.sqrt() * chaining + normaliser_error) / (mass.max(1) as f64)
}

/// The formula of [`accuracy_bound`], for the report.
pub const ACCURACY_FORMULA: &str = "E W1 <= 1/k + 2*(sqrt(Var lambda)*H + E|M - n|)/M, \
     H = sqrt(m) + sum_{l=1..ceil(log2 k)} D_l * sum_{blocks of 2^(L-l) cells per axis} sqrt(cells in block), \
     D_l = (parent block width - 1)/k  (dissertation Thm 3.6 with the Laplacian complexity bounded by dyadic chaining; \
     the rates of Cor 3.7)";

/// Var Lap_Z(σ) = 2p/(1 − p)², p = e^{−1/σ}.
fn discrete_laplace_variance(scale: RationalScale) -> f64 {
    let p = (-1.0 / scale.to_f64()).exp();
    let one_minus_p = -(-1.0 / scale.to_f64()).exp_m1();
    2.0 * p / (one_minus_p * one_minus_p)
}

/// E|Lap_Z(σ)| = 2p/(1 − p²), p = e^{−1/σ}.
fn discrete_laplace_mean_absolute(scale: RationalScale) -> f64 {
    let p = (-1.0 / scale.to_f64()).exp();
    let one_minus_p = -(-1.0 / scale.to_f64()).exp_m1();
    2.0 * p / (one_minus_p * (1.0 + p))
}
