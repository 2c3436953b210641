//! Algorithm 2 (paper Thm 5.11; note §1.8–1.10): pure ε-DP synthetic Boolean data by damped
//! microaggregation, under replace (n public). Three releases, ε split in shares (ε/3 each by default):
//!
//! 1. the second moment: exact pair counts C_ab (a ≤ b) + Lap_Z(σ_S), σ_S = Δ_S/ε_S with the paper's
//!    Δ_S = 2p/n in S = C/(np) units, i.e. 2p² counts (the true one is p(p+1)/2: the paper's is kept);
//! 2. the cell weights: counts |F_j| + Lap_Z(2/ε_w) for all s cells, empty ones included (one replaced
//!    row moves one index between two cells);
//! 3. the damped centroids ȳ_j = Σ_{F_j} x / max(|F_j|, b) (0/1 units), on the public grid 2^−g:
//!    q_ja = round(2^g·T_ja / max(|F_j|, b)), exact integer arithmetic, + Lap_Z(σ_y), σ_y = Δ_y/ε_y with
//!    Δ_y = 4p·2^g/b + 2p (the paper's 4√p/b in rescaled units is 4p/b in 0/1 units, over two cells; the
//!    rounding adds at most one unit to each of the 2p entries of those cells). b is rounded up to an
//!    integer, so max(|F_j|, b) is an integer and the quotient exact.
//!
//! Given the released S + R, U and the net are fixed and each row's cell depends on that row alone,
//! which is what makes (2) and (3) stable. Projections (ℓ1 onto the simplex: negatives to 0, renormalise,
//! uniform if nothing is left; clamping onto the cube), the bootstrap and the rounding are post-processing.

use serde::Serialize;

use super::moments::{second_moment, GroupSums, PairCounts};
use super::net::{private_net_parameters, LatticeNet};
use super::partition::SpectralPartition;
use super::points::WeightedPoints;
use super::{CovlossSettings, Damping, SumOverRanks};
use crate::encoding::read::BitRows;
use crate::error::{Error, Result};
use crate::noise::discrete_laplace::{sample_discrete_laplace, RationalScale};
use crate::privacy::{noise_scale, Budget, NoiseKey, NoiseStream, SCALE_SAFETY_MARGIN};

/// The centroid grid is 2^g with 2^g ≥ 2^CENTROID_GRID_FINE_BITS · b: one grid unit is at most 2^−16
/// of one row's largest effect (1/b), so the rounding adds a relative 2^−17 to the noise.
pub const CENTROID_GRID_FINE_BITS: u32 = 16;

/// Largest noise scale sampled (as lowdim): beyond it ε is far too small for p.
const MAX_NOISE_SCALE: f64 = (1u64 << 56) as f64;

/// Everything Algorithm 2 decides from public inputs (n, p, ε and the options).
#[derive(Clone, Debug)]
pub struct CovlossPlan {
    pub rows: u64,
    pub bits: usize,
    pub epsilon: f64,
    pub net: LatticeNet,
    /// ⌈b⌉, the damping threshold used (b as asked is in the report's rule).
    pub damping: u64,
    pub grid_bits: u32,
    pub moment_scale: RationalScale,
    pub weight_scale: RationalScale,
    pub centroid_scale: RationalScale,
    pub parameters: CovlossParameters,
}

/// What the run report says about a covloss release.
#[derive(Clone, Debug, Serialize)]
pub struct CovlossParameters {
    pub rows: u64,
    pub bits: usize,
    pub alpha: f64,
    pub alpha_rule: String,
    pub t: usize,
    pub t_rule: String,
    pub cells: usize,
    pub cells_rule: &'static str,
    pub damping: u64,
    pub damping_rule: String,
    pub epsilon_shares: [f64; 3],
    /// ε spent by (second moment, weights, centroids) with the rounded scales.
    pub epsilon_spent: [f64; 3],
    pub second_moment_sensitivity_counts: f64,
    pub second_moment_scale_counts: f64,
    pub weight_sensitivity_counts: f64,
    pub weight_scale_counts: f64,
    pub centroid_grid_bits: u32,
    pub centroid_sensitivity_grid: f64,
    pub centroid_scale_grid: f64,
    pub noise_formulas: &'static str,
    pub projections: &'static str,
    pub rounding: &'static str,
    /// Expected share of rows that the paper's independent per-bit rounding would have decoded (every
    /// one-hot block with exactly one bit), computed from the released points: the cost of that rounding
    /// which the one-category-per-block rule avoids. Set after the release.
    pub independent_rounding_decodable_rows: Option<f64>,
}

/// Δ_S in count units: the paper's ‖S − S'‖₁ ≤ 2p/n, times np.
pub fn moment_sensitivity(bits: usize) -> f64 {
    2.0 * (bits as f64).powi(2)
}

/// Δ_w in count units: one row moves from one cell to another.
pub const WEIGHT_SENSITIVITY: f64 = 2.0;

/// Δ_y in grid units: 2^g·4p/b (Lemmas 5.6–5.7 over two cells) plus one unit of rounding on each of the
/// 2p entries of the two cells. With one cell (t = 0) a replaced row cannot move: the cell holds all n rows
/// (public under replace), its sums change by at most p, so Δ_y = 2^g·p/max(n, b) + p ≤ 2^g·p/b + p, a
/// quarter of the two-cell bound.
pub fn centroid_sensitivity(bits: usize, damping: u64, grid_bits: u32, cells: usize) -> f64 {
    let p = bits as f64;
    let grid = (grid_bits as f64).exp2();
    match cells {
        1 => p * grid / damping as f64 + p,
        _ => 4.0 * p * grid / damping as f64 + 2.0 * p,
    }
}

/// The centroid grid's bits for damping b: ⌈log2 b⌉ + [`CENTROID_GRID_FINE_BITS`].
pub fn centroid_grid_bits(damping: u64) -> u32 {
    damping.next_power_of_two().trailing_zeros() + CENTROID_GRID_FINE_BITS
}

/// The smallest exact scale at or above σ (margin included), large scales as integers.
fn scale_at_least(sigma: f64, what: &str) -> Result<RationalScale> {
    if !(sigma.is_finite() && sigma > 0.0 && sigma * (1.0 + SCALE_SAFETY_MARGIN) <= MAX_NOISE_SCALE) {
        return Err(Error::bad_input(format!(
            "the covloss {what} noise scale {sigma:e} is outside the sampler's range: epsilon is too small for this many bits"
        )));
    }
    if sigma * (1.0 + SCALE_SAFETY_MARGIN) < RationalScale::MAX_SCALE {
        noise_scale(sigma, what)
    } else {
        RationalScale::new((sigma * (1.0 + SCALE_SAFETY_MARGIN)).ceil() as u64, 1)
            .ok_or_else(|| Error::internal(format!("cannot represent the {what} noise scale {sigma}")))
    }
}

impl CovlossPlan {
    /// The plan for the public n (`rows`, replace), p (`bits`) and ε.
    pub fn new(rows: u64, bits: usize, epsilon: f64, settings: &CovlossSettings) -> Result<Self> {
        if rows < 3 {
            return Err(Error::bad_input(format!("covloss needs at least 3 rows, the file has {rows}")));
        }
        let (paper_alpha, paper_t) = private_net_parameters(rows, bits);
        let alpha = settings.alpha.unwrap_or(paper_alpha);
        let t = settings.t.unwrap_or(paper_t);
        if t > bits {
            return Err(Error::bad_input(format!("--covloss-t {t} exceeds the {bits} encoded bits")));
        }
        let net = LatticeNet::new(t, alpha)?;
        let cells = net.len();
        let (damping_asked, damping_rule) = match settings.damping {
            Damping::Paper => (
                (bits as f64 * (rows as f64).sqrt() / epsilon).sqrt(),
                "paper (5.16) [RECONSTRUCTED]: b = (p·√n/ε)^{1/2}".to_string(),
            ),
            Damping::Cells => (
                rows as f64 / (2.0 * cells as f64),
                "cells: b = n/(2s), data-independent (s depends on n only); the note's §3.6 choice".to_string(),
            ),
            Damping::Fixed(b) => (b, "given with --damping".to_string()),
        };
        if !(damping_asked.is_finite() && damping_asked > 0.0 && damping_asked < 1e15) {
            return Err(Error::bad_input(format!("the damping threshold b = {damping_asked} must be positive and finite")));
        }
        let damping = (damping_asked.ceil() as u64).max(1);
        let grid_bits = centroid_grid_bits(damping);
        let total_share: f64 = settings.shares.iter().sum();
        let shares = settings.shares.map(|share| epsilon * share / total_share);
        let moment_scale = scale_at_least(moment_sensitivity(bits) / shares[0], "second-moment")?;
        let weight_scale = scale_at_least(WEIGHT_SENSITIVITY / shares[1], "weight")?;
        let centroid_scale =
            scale_at_least(centroid_sensitivity(bits, damping, grid_bits, cells) / shares[2], "centroid")?;
        let spent = [
            moment_sensitivity(bits) / moment_scale.to_f64(),
            WEIGHT_SENSITIVITY / weight_scale.to_f64(),
            centroid_sensitivity(bits, damping, grid_bits, cells) / centroid_scale.to_f64(),
        ];
        let parameters = CovlossParameters {
            rows,
            bits,
            alpha,
            alpha_rule: match settings.alpha {
                Some(_) => "given with --covloss-alpha".to_string(),
                None => "paper: alpha = (ln n)^{-1/4}".to_string(),
            },
            t,
            t_rule: match settings.t {
                Some(_) => "given with --covloss-t".to_string(),
                None => "paper (5.14) [RECONSTRUCTED]: t = floor(ln sqrt(n) / ln(7/alpha)), at most p".to_string(),
            },
            cells,
            cells_rule: "s = |B_2^t ∩ (alpha/sqrt(t)) Z^t|, the lattice alpha-net (s ≤ (7/alpha)^t)",
            damping,
            damping_rule: format!("{damping_rule}, rounded up to an integer (asked {damping_asked})"),
            epsilon_shares: shares,
            epsilon_spent: spent,
            second_moment_sensitivity_counts: moment_sensitivity(bits),
            second_moment_scale_counts: moment_scale.to_f64(),
            weight_sensitivity_counts: WEIGHT_SENSITIVITY,
            weight_scale_counts: weight_scale.to_f64(),
            centroid_grid_bits: grid_bits,
            centroid_sensitivity_grid: centroid_sensitivity(bits, damping, grid_bits, cells),
            centroid_scale_grid: centroid_scale.to_f64(),
            noise_formulas: "second moment: Lap_Z(2p^2/eps_S) on the pair counts (a ≤ b), S = C/(np); weights: \
                Lap_Z(2/eps_w) on the s cell counts; centroids: Lap_Z((4p 2^g/b + 2p)/eps_y) on round(2^g T/max(|F|, b)); \
                exact discrete Laplace from ChaCha12, scales rounded up",
            projections: "weights: negatives to 0 then renormalised (uniform if none is positive), an l1 projection \
                onto the simplex; centroids: clamped to [0,1]^p",
            rounding: "weighted bootstrap of the rows' points, then Bernoulli per bit and one category per one-hot \
                block drawn in proportion to the block (uniform if it sums to 0)",
            independent_rounding_decodable_rows: None,
        };
        Ok(CovlossPlan {
            rows,
            bits,
            epsilon,
            net,
            damping,
            grid_bits,
            moment_scale,
            weight_scale,
            centroid_scale,
            parameters,
        })
    }

    /// The spends, from the rounded scales (the driver checks them against ε).
    pub fn budget(&self) -> Budget {
        let mut budget = Budget::new(self.epsilon);
        let [moment, weights, centroids] = self.parameters.epsilon_spent;
        budget.spend("covloss second moment", moment);
        budget.spend("covloss cell weights", weights);
        budget.spend("covloss damped centroids", centroids);
        budget
    }

    /// The release: the three noisy values from the encoded rows `data` (whose exact pair counts are
    /// `exact`, the whole table's), then the weighted points (ŵ, ŷ) they determine. `sum_over_ranks` makes
    /// counts of `data` the whole table's ([`SumOverRanks`]).
    pub fn release(
        &self,
        data: &BitRows,
        exact: &PairCounts,
        key: &NoiseKey,
        sum_over_ranks: SumOverRanks,
    ) -> Result<WeightedPoints> {
        Ok(self.points(&self.noisy_release(data, exact, key, sum_over_ranks)?))
    }

    /// The three noisy releases, together ε-DP: the only step that reads the data. Everything after them
    /// is post-processing ([`CovlossPlan::points`]).
    pub fn noisy_release(
        &self,
        data: &BitRows,
        exact: &PairCounts,
        key: &NoiseKey,
        sum_over_ranks: SumOverRanks,
    ) -> Result<NoisyRelease> {
        if data.bits != self.bits || exact.rows != self.rows || exact.bits != self.bits {
            return Err(Error::internal(format!(
                "covloss planned {} rows × {} bits, read {} × {}",
                self.rows, self.bits, exact.rows, exact.bits
            )));
        }
        let mut noise = key.stream(NoiseStream::CovlossSecondMoment, 0);
        let second_moment_counts: Vec<i64> = exact
            .counts
            .iter()
            .map(|&count| count as i64 + sample_discrete_laplace(&mut noise, self.moment_scale))
            .collect();
        let released = second_moment(&second_moment_counts, self.bits, self.rows);
        let partition = SpectralPartition::new(&released, self.bits, self.net.clone())?;
        let statistics = self.cell_statistics(data, &partition, sum_over_ranks);
        let mut noise = key.stream(NoiseStream::CovlossWeights, 0);
        let cell_counts = statistics
            .counts
            .iter()
            .map(|&count| count as i64 + sample_discrete_laplace(&mut noise, self.weight_scale))
            .collect();
        let mut noise = key.stream(NoiseStream::CovlossCentroids, 0);
        let centroids = statistics
            .centroids
            .iter()
            .map(|&value| value + sample_discrete_laplace(&mut noise, self.centroid_scale))
            .collect();
        Ok(NoisyRelease {
            second_moment_counts,
            cell_counts,
            centroids,
        })
    }

    /// The weighted points of a noisy release: the counts projected onto the simplex, the centroids
    /// taken off their grid and clamped onto the cube (post-processing).
    pub fn points(&self, noisy: &NoisyRelease) -> WeightedPoints {
        let grid = (self.grid_bits as f64).exp2();
        let counts: Vec<f64> = noisy.cell_counts.iter().map(|&count| count as f64).collect();
        WeightedPoints {
            bits: self.bits,
            weights: project_onto_simplex(&counts),
            points: noisy
                .centroids
                .iter()
                .map(|&value| (value as f64 / grid).clamp(0.0, 1.0))
                .collect(),
        }
    }

    /// The exact statistics released in (2) and (3) for the partition: cell counts, and the damped
    /// centroids on the grid (`centroids[j * p + a]`), from the cells' counts and sums over the whole table.
    pub fn cell_statistics(
        &self,
        data: &BitRows,
        partition: &SpectralPartition,
        sum_over_ranks: SumOverRanks,
    ) -> CellStatistics {
        let cells = partition.assign(data);
        let mut sums = GroupSums::of(data, &cells.cells, self.net.len());
        sum_over_ranks(&mut sums.counts);
        sum_over_ranks(&mut sums.sums);
        let grid = 1u128 << self.grid_bits;
        let centroids = (0..self.net.len())
            .flat_map(|j| {
                let denominator = u128::from(sums.counts[j].max(self.damping));
                let sums = &sums.sums[j * self.bits..(j + 1) * self.bits];
                sums.iter().map(move |&sum| round_div(grid * u128::from(sum), denominator) as i64)
            })
            .collect();
        CellStatistics {
            counts: sums.counts,
            centroids,
        }
    }
}

/// What Algorithm 2 releases with noise, in integer units: the pair counts (a ≤ b), the s cell counts
/// and the damped centroids on the grid 2^−g (`centroids[j * p + a]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NoisyRelease {
    pub second_moment_counts: Vec<i64>,
    pub cell_counts: Vec<i64>,
    pub centroids: Vec<i64>,
}

/// The exact, pre-noise values of the weight and centroid releases.
#[derive(Clone, Debug, PartialEq)]
pub struct CellStatistics {
    pub counts: Vec<u64>,
    pub centroids: Vec<i64>,
}

/// round(num/den), halves up, exact.
fn round_div(num: u128, den: u128) -> u128 {
    (2 * num + den) / (2 * den)
}

/// π_{Δ,1}: an ℓ1-nearest point of the simplex: negatives to 0, renormalised; uniform if none is
/// positive (note §6 item 10).
pub fn project_onto_simplex(values: &[f64]) -> Vec<f64> {
    let total: f64 = values.iter().map(|&value| value.max(0.0)).sum();
    if total <= 0.0 {
        return vec![1.0 / values.len() as f64; values.len()];
    }
    values.iter().map(|&value| value.max(0.0) / total).collect()
}
