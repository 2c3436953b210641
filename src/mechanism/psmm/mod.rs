//! The Private Signed Measure Mechanism (dissertation Algorithms 1–2): noisy counts on every cube of a
//! regular grid (a signed measure ν), then the probability measure closest to ν in the bounded-Lipschitz
//! distance, solved exactly as a min-cost flow. The cell histogram is the only private input; everything
//! after [`noisy_cell_counts`] is post-processing.
//!
//! The projection works on any integer count vector over a [`RegularGrid`] (the low-dimensional mechanism
//! calls it on projected coordinates), see [`project_to_probability`]. [`plan`] is the mechanism's entry:
//! its plan from public inputs and its release from the data; [`report`] what the run report says;
//! [`options`] its typed options and [`args`] its flag.

pub mod args;
pub mod options;
pub mod plan;
pub mod report;

pub use options::PsmmOptions;
pub use plan::PsmmPlan;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::geometry::grid::RegularGrid;
use crate::noise::discrete_laplace::{sample_discrete_laplace, RationalScale};
use crate::privacy::streams::NOISE_CHUNK_CELLS;
use crate::privacy::{noise_scale, Neighbours, NoiseKey, NoiseStream, NoisyRowCount};
use crate::transport::{bit_words_per_cell, fill_holes};
#[cfg(any(test, feature = "internals"))]
use crate::transport::{FlowNetwork, NodeId, INFINITE_CAPACITY};

/// The privacy budget of one PSMM run (docs/privacy.md): Lap_Z(s) on every cell, s = Δ/ε_cells with Δ = 1
/// (add-remove: one cell changes by one) or 2 (replace: two cells change by one), plus, under add-remove
/// when the grid is chosen from the data size, the noisy row count n̂ = n + Lap_Z(1/ε_0) released first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PsmmBudget {
    pub neighbours: Neighbours,
    /// The scale of every cell's noise, rounded up.
    pub cell_scale: RationalScale,
    /// n̂, when it is released.
    pub row_count: Option<NoisyRowCount>,
}

impl PsmmBudget {
    /// Splits ε: a share `root_share` for n̂ (add-remove only), the rest for the cells. Every scale is
    /// rounded up (after a relative margin that absorbs f64 rounding), so the spent ε never exceeds ε.
    pub fn new(neighbours: Neighbours, epsilon: f64, root_share: Option<f64>) -> Result<Self> {
        let root_epsilon = match (neighbours, root_share) {
            (Neighbours::Replace, Some(_)) => {
                return Err(Error::internal("replace has a public n: no n̂ to release"))
            }
            (_, Some(share)) => epsilon * share,
            (_, None) => 0.0,
        };
        let sensitivity = neighbours.histogram_sensitivity();
        Ok(PsmmBudget {
            neighbours,
            cell_scale: noise_scale(
                sensitivity / (epsilon - root_epsilon),
                &format!("epsilon {} on the cells", crate::error::compact_number(epsilon)),
            )?,
            row_count: match root_share {
                Some(_) => Some(NoisyRowCount::plan(root_epsilon)?),
                None => None,
            },
        })
    }

    /// ε spent on the cells: Δ/s.
    pub fn cell_epsilon(&self) -> f64 {
        self.neighbours.histogram_sensitivity() / self.cell_scale.to_f64()
    }

    /// ε spent on n̂: 1/σ_0.
    pub fn root_epsilon(&self) -> Option<f64> {
        self.row_count.map(|row_count| row_count.spent_epsilon())
    }

    /// The total, by basic composition.
    #[cfg(any(test, feature = "internals"))]
    pub fn spent_epsilon(&self) -> f64 {
        self.cell_epsilon() + self.root_epsilon().unwrap_or(0.0)
    }
}

/// c_i = n_i + Lap_Z(s) for every cell, empty ones included, unclipped (ν may be negative). Chunk j of
/// [`NOISE_CHUNK_CELLS`] cells draws from its own stream, so the result does not depend on the threads.
/// `stream` is the run's own stream ([`NoiseStream::PsmmCells`] for PSMM on the input cube).
pub fn noisy_cell_counts(
    true_counts: &[u64],
    scale: RationalScale,
    key: &NoiseKey,
    stream: NoiseStream,
) -> Vec<i64> {
    let mut noisy: Vec<i64> = true_counts.par_iter().map(|&count| count as i64).collect();
    noisy
        .par_chunks_mut(NOISE_CHUNK_CELLS)
        .enumerate()
        .for_each(|(chunk, cells)| {
            let mut rng = key.stream(stream, chunk as u64);
            for count in cells {
                *count += sample_discrete_laplace(&mut rng, scale);
            }
        });
    noisy
}

/// Peak memory of the projection per cell besides its flows: the solver's cell arrays and the run's count
/// vectors ([`fill_holes`]), plus [`PROJECTION_BYTES_PER_CELL_WORD`] for each word of king-move bits a cell
/// carries.
pub const PROJECTION_BYTES_PER_CELL: u64 = 72;

/// Per cell and per word of its king-move bits (⌈(3^d − 1)/64⌉ words: one in d ≤ 3, two in d = 4, four in
/// d = 5; none on a grid of one cell per axis, which has no king moves): the solver's bit sets and what
/// grows with the neighbourhood. Fitted, with
/// [`PROJECTION_BYTES_PER_KING_ARC`], to the projection's peak resident memory measured alone
/// (`cargo bench --bench projection_memory`; the peaks include the counts): 128 MB at 1000²
/// cells (the model says 208), 231 MB at 100³ (278), 55, 135 and 493 MB at 18⁴, 23⁴ and 32⁴ (58, 158 and
/// 602), 103 and 254 MB at 10⁵ and 12⁵ (117 and 302). d ≤ 3 keeps the 176 bytes a cell it had; that one
/// constant fell 5–16% short in d = 4 and 13–20% in d = 5. (Whole runs had seemed to exceed it at 31⁴,
/// but their peak counted the reading of the input too.)
pub const PROJECTION_BYTES_PER_CELL_WORD: u64 = 104;

/// The projection's flows: one `i64` per undirected king-move edge, 4 bytes per directed arc.
pub const PROJECTION_BYTES_PER_KING_ARC: u64 = 4;

/// The model's bytes per cell of `grid`, arcs aside.
pub fn projection_bytes_per_cell(grid: &RegularGrid) -> u128 {
    let words = bit_words_per_cell(grid.cells_per_axis() as usize, grid.dims());
    u128::from(PROJECTION_BYTES_PER_CELL) + words.saturating_mul(u128::from(PROJECTION_BYTES_PER_CELL_WORD))
}

/// Bytes the projection on `grid` needs at its peak by that model. `None` on overflow.
pub fn projection_bytes(grid: &RegularGrid) -> Option<u128> {
    grid.king_move_arcs()?
        .checked_mul(u128::from(PROJECTION_BYTES_PER_KING_ARC))?
        .checked_add((grid.cell_count() as u128).checked_mul(projection_bytes_per_cell(grid))?)
}

/// Refuses a grid whose projection would not fit in `memory_limit` bytes ([`projection_bytes`]) or whose
/// cells would not have 32-bit indices. The message names m, the limit and the largest grid that fits in
/// this d.
pub fn check_projection_fits(grid: &RegularGrid, memory_limit: u64) -> Result<()> {
    let fits = |grid: &RegularGrid| {
        grid.cell_count() < u32::MAX as usize
            && projection_bytes(grid).is_some_and(|bytes| bytes <= u128::from(memory_limit))
    };
    if fits(grid) {
        return Ok(());
    }
    let (dims, side) = (grid.dims(), grid.cells_per_axis());
    let bytes =
        projection_bytes(grid).map_or_else(|| "too many".to_string(), |bytes| bytes.to_string());
    // The largest k below `side` that fits (fitting is monotone in k): binary search.
    let fits_with = |k: u32| RegularGrid::new(dims, k).is_some_and(|grid| fits(&grid));
    let (mut low, mut high) = (1u32, side);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if fits_with(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    let largest = RegularGrid::new(dims, low).filter(|largest| low >= 2 && fits(largest));
    let advice = match largest {
        Some(largest) => format!(
            "choose fewer cells with --cells (at most {} = {}^{dims} here) or raise --memory-limit-mib",
            largest.cell_count(),
            largest.cells_per_axis()
        ),
        None => format!(
            "in d = {dims} not even 2 cells per axis fit: use PMM (--mechanism pmm, or --inner-mechanism pmm with lowdim)"
        ),
    };
    Err(Error::bad_input(format!(
        "psmm: m = {} cells ({side} per axis, d = {dims}) need about {bytes} bytes for the projection \
         ({} per cell and {PROJECTION_BYTES_PER_KING_ARC} per king-move arc in d = {dims}); \
         the limit here is {memory_limit} bytes of memory: {advice}",
        grid.cell_count(),
        projection_bytes_per_cell(grid),
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
/// creation free) has the same minimisers and an optimum larger by the constant Σν − 1 (tested), once
/// its erratum is fixed: as printed, row i lacks the transposed terms −Σ_j (u_ji − u'_ji), so mass
/// "moved" to j never arrives there and the LP under-prices disposal (see the tests).
///
/// That flow is solved as a smaller problem ([`fill_holes`]). Write b = M − Σc.
/// - An optimum never both creates and removes mass: a unit removed at i and one created at j can move
///   from i to j instead, for at most k − 1 < 2k. So the bank creates exactly b units when b ≥ 0 and
///   removes −b when b < 0, at the fixed cost k·|b|, wherever it does so.
/// - What is left to choose is the king-move flow and where created units go (at most max(b, 0) of
///   them) such that no cell ends negative, at least cost: the holes filled from the positive cells and
///   a free bank of max(b, 0) units. Each such choice completes to a flow of the network at its
///   transport cost + k·|b| (the leftovers go to the sink; the bank's unused units are created on them, or the −b
///   removed from them, which their total M − b ≥ −b allows), and every flow whose bank arcs carry one
///   sign is of this form.
///
/// Which cells get the unused or removed units does not change the cost; they go in proportion to what
/// each cell kept ([`spread_to_mass`]).
///
/// On a cube of side L instead of [0,1]^d (for example [−R, R]^{d'} after a projection, L = 2R) the
/// problem is the same scaled by L: the masses do not change and d_BL (with ‖f‖_∞ ≤ diam) is L·`d_bl`.
///
/// `mass` must be ≥ 1; `memory_limit` bounds the solver's memory (see [`check_projection_fits`]).
pub fn project_to_probability(
    grid: &RegularGrid,
    counts: &[i64],
    mass: u64,
    memory_limit: u64,
) -> Result<Projection> {
    assert_eq!(counts.len(), grid.cell_count(), "one count per cell");
    assert!(mass >= 1, "the projection needs a positive total mass");
    check_projection_fits(grid, memory_limit)?;
    let mass =
        i64::try_from(mass).map_err(|_| Error::bad_input(format!("mass {mass} is too large")))?;
    let total: i128 = counts.iter().map(|&c| i128::from(c)).sum();
    let bank = i64::try_from(i128::from(mass) - total)
        .map_err(|_| Error::bad_input("the noisy counts are too large to project"))?;
    let filled = fill_holes(
        grid.cells_per_axis() as usize,
        grid.dims(),
        counts,
        bank.max(0) as u64,
    );
    let side = u128::from(grid.cells_per_axis());
    let cost = filled.transport_steps + side * u128::from(bank.unsigned_abs());
    Ok(Projection {
        masses: spread_to_mass(&filled.leftover, mass as u64),
        d_bl: cost as f64 / (side as f64 * mass as f64),
        solver: if filled.in_phases {
            "exact min-cost flow (primal-dual phases into the holes)"
        } else {
            "exact min-cost flow (successive shortest paths into the holes)"
        },
    })
}

/// What the cells kept, scaled to sum to `mass` in integers: the bank's units created or removed there in
/// proportion to what each kept (largest remainders, ties to the lower cell), uniformly when nothing is
/// kept. Every placement costs the same (see [`project_to_probability`]); this one keeps the shape.
fn spread_to_mass(kept: &[u64], mass: u64) -> Vec<u64> {
    let total: u128 = kept.iter().map(|&k| u128::from(k)).sum();
    if total == u128::from(mass) {
        return kept.to_vec();
    }
    let (weights, total): (Vec<u128>, u128) = if total == 0 {
        (vec![1; kept.len()], kept.len() as u128)
    } else {
        (kept.iter().map(|&k| u128::from(k)).collect(), total)
    };
    let mut masses: Vec<u64> = weights
        .iter()
        .map(|&w| (w * u128::from(mass) / total) as u64)
        .collect();
    let short = mass - masses.iter().sum::<u64>();
    let mut by_remainder: Vec<(u128, usize)> = weights
        .iter()
        .enumerate()
        .map(|(cell, &w)| (w * u128::from(mass) % total, cell))
        .filter(|&(remainder, _)| remainder > 0)
        .collect();
    by_remainder.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, cell) in &by_remainder[..short as usize] {
        masses[cell] += 1;
    }
    masses
}

/// d_BL(a/unit, b/unit) between two signed measures on the cell centres of `grid` (same network without
/// the sink: the cells' supplies are a_i − b_i, the bank takes the difference of the totals).
#[cfg(any(test, feature = "internals"))]
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
    let solution = crate::transport::solve_min_cost_flow(&net)
        .map_err(|error| Error::internal(format!("bounded-Lipschitz distance: {error}")))?;
    Ok(solution.cost as f64 / (f64::from(grid.cells_per_axis()) * unit as f64))
}

/// The cell nodes (in the grid's layout) with their king-move arcs, room reserved for
/// `extra_arcs_per_cell` more arcs per cell besides the two bank arcs.
#[cfg(any(test, feature = "internals"))]
fn cells_network(
    grid: &RegularGrid,
    supplies: &[i64],
    extra_arcs_per_cell: usize,
) -> (FlowNetwork, Vec<NodeId>) {
    let king_moves = grid.king_move_arcs().expect("checked to fit") as usize;
    let arcs = king_moves + (2 + extra_arcs_per_cell) * grid.cell_count();
    let mut net = FlowNetwork::with_capacity(grid.cell_count() + 2, arcs);
    let cells: Vec<NodeId> = supplies
        .iter()
        .map(|&supply| net.add_node(supply))
        .collect();
    crate::geometry::grid::add_king_move_arcs(
        &mut net,
        &cells,
        grid.cells_per_axis() as usize,
        grid.dims(),
    );
    (net, cells)
}

/// The bank: mass removed from or created at any cell for k steps (one normalised unit) per unit.
#[cfg(any(test, feature = "internals"))]
fn add_bank(net: &mut FlowNetwork, cells: &[NodeId], grid: &RegularGrid, supply: i64) {
    let bank = net.add_node(supply);
    let cost = i64::from(grid.cells_per_axis());
    for &cell in cells {
        net.add_arc(cell, bank, INFINITE_CAPACITY, cost);
        net.add_arc(bank, cell, INFINITE_CAPACITY, cost);
    }
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
    let variance = cell_scale.variance();
    let side = grid.cells_per_axis() as u64;
    let dims = grid.dims() as i32;
    let levels = side.next_power_of_two().trailing_zeros();
    let mut chaining = (grid.cell_count() as f64).sqrt();
    for level in 1..=levels {
        let block = 1u64 << (levels - level);
        let parent_width = (2 * block).min(side);
        let step = (parent_width - 1) as f64 / side as f64;
        // Σ over blocks of √|θ| factorises over the axes: (Σ_b √size_b)^d.
        let per_axis =
            (side / block) as f64 * (block as f64).sqrt() + ((side % block) as f64).sqrt();
        chaining += step * per_axis.powi(dims);
    }
    let normaliser_error = match normaliser {
        Normaliser::PublicN => 0.0,
        Normaliser::ReleasedCount(scale) => scale.mean_absolute(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use microlp::{ComparisonOp, OptimizationDirection, Problem};
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    const NO_MEMORY_LIMIT: u64 = u64::MAX;
    const LP_TOLERANCE: f64 = 1e-6;

    /// ℓ∞ distance between the centres of two cells, normalised.
    fn centre_distance(grid: &RegularGrid, i: usize, j: usize) -> f64 {
        let (mut a, mut b) = (vec![0u32; grid.dims()], vec![0u32; grid.dims()]);
        grid.axis_indices(i, &mut a);
        grid.axis_indices(j, &mut b);
        let steps = a
            .iter()
            .zip(&b)
            .map(|(x, y)| x.abs_diff(*y))
            .max()
            .unwrap_or(0);
        f64::from(steps) * grid.cell_diameter()
    }

    /// Dissertation Algorithm 2 as a dense LP (solved by microlp): minimise
    /// Σ_{i≠j} ρ_ij (u_ij + u'_ij) + 2 Σ v_i subject to Σ τ_i = 1 and, for every i,
    /// Σ_j (u_ij − u'_ij) − Σ_j (u_ji − u'_ji) + v_i + τ_i ≥ ν_i.
    /// `as_printed` drops the transposed terms Σ_j (u_ji − u'_ji), as the dissertation prints it (an
    /// erratum: the dual of f'_i's column needs them, since f'_i also appears in the constraints of (j, i)).
    /// Returns the optimum and the minimiser τ.
    fn dense_algorithm_2(grid: &RegularGrid, nu: &[f64], as_printed: bool) -> (f64, Vec<f64>) {
        let m = grid.cell_count();
        let mut lp = Problem::new(OptimizationDirection::Minimize);
        let mut rows: Vec<Vec<(microlp::Variable, f64)>> = vec![Vec::new(); m];
        for i in 0..m {
            for j in (0..m).filter(|&j| j != i) {
                let rho = centre_distance(grid, i, j);
                let u = lp.add_var(rho, (0.0, f64::INFINITY));
                let u_prime = lp.add_var(rho, (0.0, f64::INFINITY));
                rows[i].push((u, 1.0));
                rows[i].push((u_prime, -1.0));
                if !as_printed {
                    rows[j].push((u, -1.0));
                    rows[j].push((u_prime, 1.0));
                }
            }
        }
        let tau: Vec<_> = (0..m)
            .map(|_| lp.add_var(0.0, (0.0, f64::INFINITY)))
            .collect();
        for i in 0..m {
            let v = lp.add_var(2.0, (0.0, f64::INFINITY));
            rows[i].push((v, 1.0));
            rows[i].push((tau[i], 1.0));
            lp.add_constraint(&rows[i][..], ComparisonOp::Ge, nu[i]);
        }
        let all: Vec<_> = tau.iter().map(|&t| (t, 1.0)).collect();
        lp.add_constraint(&all[..], ComparisonOp::Eq, 1.0);
        let solution = lp.solve().unwrap().into_solution().unwrap();
        let values = tau.iter().map(|&t| solution.var_value(t)).collect();
        (solution.objective(), values)
    }

    /// d_BL(τ, ν) from its definition (the primal of Proposition 3.5), a dense LP solved by microlp:
    /// max Σ (ν_i − τ_i) f_i subject to |f_i − f_j| ≤ ρ_ij and −1 ≤ f_i ≤ 1.
    fn dense_d_bl(grid: &RegularGrid, tau: &[f64], nu: &[f64]) -> f64 {
        let m = grid.cell_count();
        let mut lp = Problem::new(OptimizationDirection::Maximize);
        let f: Vec<_> = (0..m)
            .map(|i| lp.add_var(nu[i] - tau[i], (-1.0, 1.0)))
            .collect();
        for i in 0..m {
            for j in (i + 1)..m {
                let rho = centre_distance(grid, i, j);
                lp.add_constraint([(f[i], 1.0), (f[j], -1.0)], ComparisonOp::Le, rho);
                lp.add_constraint([(f[j], 1.0), (f[i], -1.0)], ComparisonOp::Le, rho);
            }
        }
        lp.solve().unwrap().into_solution().unwrap().objective()
    }

    fn random_counts(rng: &mut Xoshiro256PlusPlus, cells: usize, low: i64, high: i64) -> Vec<i64> {
        (0..cells).map(|_| rng.random_range(low..=high)).collect()
    }

    #[test]
    fn flow_matches_the_dense_lp_of_algorithm_2() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2024);
        let mut cases = 0;
        for dims in 1..=2usize {
            for side in 1..=5u32 {
                for _ in 0..3 {
                    let grid = RegularGrid::new(dims, side).unwrap();
                    let m = grid.cell_count();
                    let counts = random_counts(&mut rng, m, -4, 8);
                    let mass: u64 = rng.random_range(1..=20);
                    let projection =
                        project_to_probability(&grid, &counts, mass, NO_MEMORY_LIMIT).unwrap();
                    // Feasible: a probability vector with integer masses summing to M.
                    assert_eq!(projection.masses.len(), m);
                    assert_eq!(projection.masses.iter().sum::<u64>(), mass);
                    let nu: Vec<f64> = counts.iter().map(|&c| c as f64 / mass as f64).collect();
                    let tau: Vec<f64> = projection
                        .masses
                        .iter()
                        .map(|&t| t as f64 / mass as f64)
                        .collect();
                    let context = format!("d={dims} k={side} counts={counts:?} M={mass}");
                    // Its d_BL is the true d_BL of its τ, computed from the definition.
                    let direct = dense_d_bl(&grid, &tau, &nu);
                    assert!(
                        (direct - projection.d_bl).abs() < LP_TOLERANCE,
                        "{context}: flow {} vs definition {direct}",
                        projection.d_bl
                    );
                    // Algorithm 2's LP (f shifted to [0, 2]) has optimum d_BL + Σν − 1 ...
                    let (optimum, lp_tau) = dense_algorithm_2(&grid, &nu, false);
                    let shift = nu.iter().sum::<f64>() - 1.0;
                    assert!(
                        (optimum - (projection.d_bl + shift)).abs() < LP_TOLERANCE,
                        "{context}: LP optimum {optimum}, flow {} + shift {shift}",
                        projection.d_bl
                    );
                    // ... and its minimiser is as close to ν as the flow's: the same argmin set.
                    assert!((lp_tau.iter().sum::<f64>() - 1.0).abs() < LP_TOLERANCE);
                    assert!(lp_tau.iter().all(|&t| t > -LP_TOLERANCE));
                    let lp_distance = dense_d_bl(&grid, &lp_tau, &nu);
                    assert!(
                        (lp_distance - projection.d_bl).abs() < LP_TOLERANCE,
                        "{context}: LP's τ is at {lp_distance}"
                    );
                    // The sink-free network measures the same distance for a fixed τ.
                    let masses: Vec<i64> = projection.masses.iter().map(|&t| t as i64).collect();
                    let fixed =
                        bounded_lipschitz_distance(&grid, &masses, &counts, mass, NO_MEMORY_LIMIT)
                            .unwrap();
                    assert!((fixed - projection.d_bl).abs() < 1e-12, "{context}");
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 30);
    }

    #[test]
    fn algorithm_2_as_printed_undercounts_transport() {
        // ν = (4, 2) on two cells of a 1-D grid (centres 1/2 apart), M = 1 in ν's units: any probability
        // τ is at d_BL = 5 (f ≡ 1 sees the 5 units of excess mass), so the shifted LP's optimum is
        // 5 + Σν − 1 = 10. As printed, each u_ij only leaves row i and never arrives in row j: it throws
        // mass away at cost ρ_ij = 1/2 instead of 2, and the optimum drops to 2.5.
        let grid = RegularGrid::new(1, 2).unwrap();
        let projection = project_to_probability(&grid, &[8, 4], 2, NO_MEMORY_LIMIT).unwrap();
        assert_eq!(projection.d_bl, 5.0);
        let (corrected, _) = dense_algorithm_2(&grid, &[4.0, 2.0], false);
        let (printed, _) = dense_algorithm_2(&grid, &[4.0, 2.0], true);
        assert!(
            (corrected - 10.0).abs() < LP_TOLERANCE,
            "corrected LP: {corrected}"
        );
        assert!(
            (printed - 2.5).abs() < LP_TOLERANCE,
            "printed LP: {printed}"
        );
    }

    #[test]
    fn unused_or_removed_units_follow_what_the_cells_kept() {
        assert_eq!(spread_to_mass(&[3, 0, 2], 5), vec![3, 0, 2]);
        // Nothing kept: uniform, the odd units to the lower cells.
        assert_eq!(spread_to_mass(&[0, 0, 0, 0], 6), vec![2, 2, 1, 1]);
        let mut rng = crate::testing::case_rng(41);
        for _ in 0..500 {
            let cells = rng.random_range(1..12usize);
            let kept: Vec<u64> = (0..cells).map(|_| rng.random_range(0..6u64)).collect();
            let total: u64 = kept.iter().sum();
            let mass = rng.random_range(1..=2 * total.max(1) + 3);
            let masses = spread_to_mass(&kept, mass);
            assert_eq!(masses.iter().sum::<u64>(), mass, "{kept:?} to {mass}");
            for (&m, &k) in masses.iter().zip(&kept) {
                // Within one unit of the exact proportional share; removal never takes more than was kept.
                let share = if total == 0 {
                    mass as f64 / cells as f64
                } else {
                    k as f64 * mass as f64 / total as f64
                };
                assert!((m as f64 - share).abs() < 1.0, "{kept:?} to {mass}: {masses:?}");
                assert!(mass > total || m <= k, "{kept:?} to {mass}: {masses:?}");
            }
        }
    }

    #[test]
    fn a_probability_measure_is_its_own_projection() {
        let grid = RegularGrid::new(2, 6).unwrap();
        let counts: Vec<i64> = (0..36).map(|cell| cell % 4).collect();
        let mass = counts.iter().sum::<i64>() as u64;
        let projection = project_to_probability(&grid, &counts, mass, NO_MEMORY_LIMIT).unwrap();
        assert_eq!(projection.d_bl, 0.0);
        assert!(projection
            .masses
            .iter()
            .zip(&counts)
            .all(|(&t, &c)| t as i64 == c));
    }

    #[test]
    fn projection_is_no_farther_than_clip_and_renormalise() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut strictly_closer = 0;
        for (dims, side) in [(1usize, 40u32), (2, 8), (3, 4)] {
            let grid = RegularGrid::new(dims, side).unwrap();
            for _ in 0..5 {
                let counts = random_counts(&mut rng, grid.cell_count(), -6, 10);
                let positive: Vec<i64> = counts.iter().map(|&c| c.max(0)).collect();
                let positive_total = positive.iter().sum::<i64>().max(1) as u64;
                let mass =
                    (counts.iter().sum::<i64>().max(1) as u64 + rng.random_range(0..20)).max(1);
                let projection =
                    project_to_probability(&grid, &counts, mass, NO_MEMORY_LIMIT).unwrap();
                // Clipped-and-renormalised τ' = c⁺/P against ν = c/M, on the common unit P·M.
                let clipped: Vec<i64> = positive.iter().map(|&c| c * mass as i64).collect();
                let scaled: Vec<i64> = counts.iter().map(|&c| c * positive_total as i64).collect();
                let clip_distance = bounded_lipschitz_distance(
                    &grid,
                    &clipped,
                    &scaled,
                    positive_total * mass,
                    NO_MEMORY_LIMIT,
                )
                .unwrap();
                assert!(
                    projection.d_bl <= clip_distance + 1e-12,
                    "d={dims}: projection {} > clip-and-renormalise {clip_distance}",
                    projection.d_bl
                );
                strictly_closer += usize::from(projection.d_bl < clip_distance - 1e-9);
            }
        }
        assert!(
            strictly_closer >= 10,
            "the projection should usually beat clipping, did {strictly_closer}/15"
        );
    }

    #[test]
    fn budget_spends_at_most_epsilon_with_the_n_hat_share() {
        for &epsilon in &[0.01, 0.1, 1.0, 3.7, 50.0] {
            for (neighbours, share) in [
                (Neighbours::AddRemove, None),
                (Neighbours::AddRemove, Some(1.0 / 16.0)),
                (Neighbours::AddRemove, Some(0.5)),
                (Neighbours::Replace, None),
            ] {
                let budget = PsmmBudget::new(neighbours, epsilon, share).unwrap();
                let spent = budget.spent_epsilon();
                assert!(
                    spent <= epsilon,
                    "{neighbours:?} {share:?} ε={epsilon}: spent {spent}"
                );
                assert!(
                    spent >= epsilon * (1.0 - 1e-6),
                    "{neighbours:?} {share:?} ε={epsilon}: spent only {spent}"
                );
                match share {
                    Some(share) => {
                        let root = budget.root_epsilon().unwrap();
                        assert!((root - epsilon * share).abs() <= 1e-6 * epsilon * share);
                    }
                    None => assert!(budget.root_epsilon().is_none()),
                }
                // The scale is Δ/ε_cells with Δ = 1 (add-remove) or 2 (replace).
                let cells_epsilon = epsilon * (1.0 - share.unwrap_or(0.0));
                let expected = neighbours.histogram_sensitivity() / cells_epsilon;
                let scale = budget.cell_scale.to_f64();
                assert!(
                    scale >= expected && scale <= expected * (1.0 + 1e-6),
                    "scale {scale} for {expected}"
                );
            }
        }
        assert!(PsmmBudget::new(Neighbours::Replace, 1.0, Some(0.1)).is_err());
    }

    /// Sample variance of the noise added to `cells` empty cells.
    fn empty_cell_noise(neighbours: Neighbours, epsilon: f64, cells: usize) -> (Vec<i64>, f64) {
        let budget = PsmmBudget::new(neighbours, epsilon, None).unwrap();
        let noisy = noisy_cell_counts(
            &vec![0; cells],
            budget.cell_scale,
            &NoiseKey::from_user_seed(5),
            NoiseStream::PsmmCells,
        );
        let variance = noisy.iter().map(|&z| (z * z) as f64).sum::<f64>() / cells as f64;
        (noisy, variance)
    }

    #[test]
    fn every_cell_gets_noise_at_the_scale_of_the_relation() {
        let cells = 1 << 16;
        // Var Lap_Z(σ) = 2p/(1 − p)², p = e^{−1/σ}: 1.84 at σ = 1, 7.83 at σ = 2. A replace run with the
        // add-remove scale 1/ε would show 1.84 where 7.83 is due; a skipped cell would stay exactly 0.
        for (neighbours, sigma) in [(Neighbours::AddRemove, 1.0f64), (Neighbours::Replace, 2.0)] {
            let (noisy, variance) = empty_cell_noise(neighbours, 1.0, cells);
            let p = (-1.0 / sigma).exp();
            let expected = 2.0 * p / ((1.0 - p) * (1.0 - p));
            assert!(
                (variance / expected - 1.0).abs() < 0.05,
                "{neighbours:?}: variance {variance}, Lap_Z({sigma}) has {expected}"
            );
            let zeros = noisy.iter().filter(|&&z| z == 0).count() as f64 / cells as f64;
            let expected_zeros = (1.0 - p) / (1.0 + p);
            assert!(
                (zeros - expected_zeros).abs() < 0.02,
                "{neighbours:?}: {zeros} of the cells unnoised"
            );
            for chunk in noisy.chunks(NOISE_CHUNK_CELLS) {
                assert!(chunk.iter().filter(|&&z| z != 0).count() * 2 > chunk.len());
            }
        }
    }

    #[test]
    fn noise_does_not_depend_on_the_thread_count() {
        let counts: Vec<u64> = (0..3 * NOISE_CHUNK_CELLS as u64 + 17)
            .map(|cell| cell % 5)
            .collect();
        let scale = RationalScale::round_up(2.5).unwrap();
        let noisy = |threads: usize, seed: u64| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    noisy_cell_counts(
                        &counts,
                        scale,
                        &NoiseKey::from_user_seed(seed),
                        NoiseStream::PsmmCells,
                    )
                })
        };
        assert_eq!(noisy(1, 3), noisy(2, 3));
        assert_eq!(noisy(1, 3), noisy(3, 3));
        assert_ne!(noisy(1, 3), noisy(1, 4));
    }

    #[test]
    fn too_many_cells_are_refused_with_the_limit_and_a_way_out() {
        let memory = 8u64 << 30;
        let grid = RegularGrid::new(3, 1000).unwrap();
        let message = check_projection_fits(&grid, memory)
            .unwrap_err()
            .to_string();
        for needle in [
            "m = 1000000000",
            "1000 per axis",
            "d = 3",
            "--cells",
            "at most",
        ] {
            assert!(
                message.contains(needle),
                "{needle:?} missing from: {message}"
            );
        }
        // The suggestion is the largest k that fits (by brute force here).
        let gib = 1u64 << 30;
        let wide = RegularGrid::new(2, 31_623).unwrap();
        let fits_in = |k: u32| check_projection_fits(&RegularGrid::new(2, k).unwrap(), gib).is_ok();
        let largest = (1..31_623).rev().find(|&k| fits_in(k)).unwrap();
        let message = check_projection_fits(&wide, gib).unwrap_err().to_string();
        let suggestion = format!("at most {} = {largest}^2", largest * largest);
        assert!(
            message.contains(&suggestion),
            "{suggestion:?} missing from: {message}"
        );
        let allowed = RegularGrid::new(3, 100).unwrap();
        assert!(
            check_projection_fits(&allowed, memory).is_ok(),
            "10^6 cells in d = 3 fit in 8 GiB"
        );
        // One cell per axis has no king moves, in any d (PSMM's grid for a small, wide table).
        assert!(check_projection_fits(&RegularGrid::new(45, 1).unwrap(), memory).is_ok());
        let wide = RegularGrid::new(24, 2).unwrap();
        let message = check_projection_fits(&wide, memory)
            .unwrap_err()
            .to_string();
        assert!(message.contains("--mechanism pmm"), "{message}");
    }

    #[test]
    fn chaining_bounds_the_expected_noise_distance() {
        // E d_BL(μ_Y, ν) = E sup_f Σ f_i λ_i / M; the bound uses √Var·H/M. Estimate the left side with the
        // exact flow on a few noise draws and compare (M = 1 here: distances in units of one count).
        let scale = RationalScale::round_up(1.0).unwrap();
        for (dims, side) in [(1usize, 64u32), (2, 12), (3, 5)] {
            let grid = RegularGrid::new(dims, side).unwrap();
            let zeros = vec![0u64; grid.cell_count()];
            let draws = 8;
            let mean = (0..draws)
                .map(|seed| {
                    let noise = noisy_cell_counts(
                        &zeros,
                        scale,
                        &NoiseKey::from_user_seed(seed),
                        NoiseStream::PsmmCells,
                    );
                    bounded_lipschitz_distance(
                        &grid,
                        &noise,
                        &vec![0; grid.cell_count()],
                        1,
                        NO_MEMORY_LIMIT,
                    )
                    .unwrap()
                })
                .sum::<f64>()
                / draws as f64;
            // accuracy_bound = 1/k + 2·(√Var·H)/M for a public n: recover √Var·H.
            let chaining =
                (accuracy_bound(&grid, scale, Normaliser::PublicN, 1) - grid.cell_diameter()) / 2.0;
            assert!(
                mean <= chaining,
                "d={dims}: E d_BL ≈ {mean} above the chaining bound {chaining}"
            );
            assert!(
                mean >= chaining / 20.0,
                "d={dims}: the bound {chaining} is far looser than expected ({mean})"
            );
        }
    }

    #[test]
    fn accuracy_bound_falls_with_the_data_size() {
        let scale = RationalScale::round_up(1.0).unwrap();
        for dims in 1..=4usize {
            let at = |n: f64| {
                let side = n.powf(1.0 / dims as f64).round() as u32;
                accuracy_bound(
                    &RegularGrid::new(dims, side).unwrap(),
                    scale,
                    Normaliser::PublicN,
                    n as u64,
                )
            };
            let (small, large) = (at(1e4), at(1e8));
            assert!(
                large < small / 2.0,
                "d={dims}: bound {small} at εn = 10^4, {large} at 10^8"
            );
        }
    }
}
