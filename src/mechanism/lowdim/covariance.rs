//! The private centred covariance and the private mean (paper 002, Algorithms 2–3), exact and safe
//! against floating-point attacks (docs/privacy.md).
//!
//! Quantisation. Each normalised value is replaced by the midpoint of its cell on a grid of
//! 2^[`VALUE_CELL_BITS`] cells, x = v/2^[`VALUE_BITS`] with v = 2b + 1 odd (b the engine's usual cell
//! index, from the same clamp and null handling as binning). This is a per-row map into [0,1]^d, so every
//! sensitivity below holds for the quantised rows, and all sums are integers.
//!
//! Gram sums. Per block of at most [`GRAM_BLOCK_ROWS`] rows, QᵀQ is formed with faer's f64 kernels: every
//! product and partial sum is an integer below 2^53, so the result is exact in any summation order; it
//! is added into u128 accumulators with the column sums S. The statistics are therefore identical
//! whatever the row-group order, the block split or the thread count.
//!
//! Release on a public grid of 2^−k with exact discrete Laplace noise, integers throughout:
//! - replace (n public, the paper): M_ij = (n·G_ij − S_i S_j)/(n(n−1)·2^{2·VALUE_BITS}), released as
//!   round(2^k·M_ij) + Lap_Z for i ≤ j. One replaced row moves an entry by at most 6/n (paper (C.1)), so
//!   by 6·2^k/n + 1 grid units with the rounding; the paper's symmetric noise (scale s off the diagonal,
//!   2s on it) then costs Δ·d²/(2s), so s = d²Δ/(2ε_c). The mean round(2^k·S_i/n) moves by 2^k/n + 1 per
//!   coordinate: Lap_Z(d·Δ/ε_m). k = ⌈log2 n⌉ + [`GRID_FINE_BITS`].
//! - add-remove (n private): nothing may use n, so the raw sums are released instead, S (one row moves
//!   each by ≤ 1, ℓ1 ≤ d) and the upper triangle of G (each entry ≤ 1, ℓ1 ≤ d(d+1)/2), on the grid
//!   2^−[`GRID_FINE_BITS`] (+1 unit of rounding per entry), and M̂ = (Ĝ − ŜŜᵀ/n̂)/(n̂ − 1), mean Ŝ/n̂ are
//!   post-processing with the released n̂.
//!
//! Every scale is rounded up to an exact rational; the ε spent is computed from the rounded scales.

use faer::linalg::matmul::triangular::{matmul, BlockStructure};
use faer::{Accum, Mat, Par};

use crate::binner::BinnerWorker;
use crate::error::{Error, Result};
use crate::noise::discrete_laplace::{sample_discrete_laplace, RationalScale};
use crate::privacy::{Neighbours, NoiseKey, NoiseStream, SCALE_SAFETY_MARGIN};

/// Bits of the per-axis cell index each value is quantised to in both lowdim passes.
pub const VALUE_CELL_BITS: u32 = 16;
/// Quantised values are v/2^VALUE_BITS with v = 2b + 1 the (odd) cell midpoint numerator.
pub const VALUE_BITS: u32 = VALUE_CELL_BITS + 1;
/// Rows per exact f64 Gram block: v < 2^17, so every product is below 2^34 and every sum of at most
/// 2^13 products below 2^47 < 2^53 (exact). Small enough that a block (2^13 × d f64) stays in cache.
pub const GRAM_BLOCK_ROWS: usize = 1 << 13;
const _: () = assert!((GRAM_BLOCK_ROWS as u128) << (2 * VALUE_BITS) < 1u128 << 53);

/// The release grid is fine enough that one grid unit is at most 2^−20 of one row's largest effect on
/// an entry (1/n of a mean under replace, 1 of a sum under add-remove): rounding then adds a relative
/// 2^−20 to the noise, invisible, while the grid-unit scales stay far below [`MAX_NOISE_SCALE`].
pub const GRID_FINE_BITS: u32 = 20;

/// Largest noise scale (grid units) sampled: beyond 2^56 the sampler's i64 range would start to matter
/// (a draw beyond 2^63 has probability below e^−128). Larger scales mean ε is far too small for d.
pub const MAX_NOISE_SCALE: f64 = (1u64 << 56) as f64;


/// The quantised value numerator v = 2b + 1 of cell index b (x = v / 2^VALUE_BITS).
#[inline(always)]
pub fn value_numerator(index: u32) -> u64 {
    2 * u64::from(index) + 1
}

/// The normalised value of cell index b: its cell's midpoint.
#[inline(always)]
pub fn unit_value(index: u32) -> f64 {
    value_numerator(index) as f64 / (1u64 << VALUE_BITS) as f64
}

/// Exact sums of the quantised rows: n, S_i = Σ v_i, G_ij = Σ v_i v_j (lower triangle, i ≥ j, packed
/// row by row at i(i+1)/2 + j).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GramSums {
    pub dims: usize,
    pub rows: u64,
    pub sums: Vec<u128>,
    pub gram: Vec<u128>,
}

impl GramSums {
    pub fn zeros(dims: usize) -> Self {
        GramSums {
            dims,
            rows: 0,
            sums: vec![0; dims],
            gram: vec![0; dims * (dims + 1) / 2],
        }
    }

    /// G_ij for any i, j.
    pub fn gram_at(&self, i: usize, j: usize) -> u128 {
        let (i, j) = if i >= j { (i, j) } else { (j, i) };
        self.gram[i * (i + 1) / 2 + j]
    }

    /// The sums of all workers' rows (exact, so in any order).
    pub fn merge(dims: usize, parts: impl IntoIterator<Item = GramSums>) -> Self {
        let mut total = GramSums::zeros(dims);
        for part in parts {
            total.rows += part.rows;
            for (mine, theirs) in total.sums.iter_mut().zip(part.sums) {
                *mine += theirs;
            }
            for (mine, theirs) in total.gram.iter_mut().zip(part.gram) {
                *mine += theirs;
            }
        }
        total
    }

    /// These sums added over the ranks of a distributed run by `sum` (each rank passes its own rows' sums;
    /// [`crate::binner::pass::DataPass::sum_over_ranks`]), exactly: each u128 crosses as four 32-bit limbs
    /// in u64 words, which cannot overflow below 2^32 ranks.
    pub fn summed_with(mut self, sum: impl FnOnce(&mut [u64])) -> Self {
        const LIMBS: usize = 4;
        let mut words = vec![self.rows];
        for &value in self.sums.iter().chain(&self.gram) {
            words.extend((0..LIMBS).map(|limb| (value >> (32 * limb)) as u64 & u64::from(u32::MAX)));
        }
        sum(&mut words);
        self.rows = words[0];
        for (value, limbs) in self.sums.iter_mut().chain(&mut self.gram).zip(words[1..].chunks_exact(LIMBS)) {
            *value = limbs.iter().rev().fold(0u128, |high, &limb| (high << 32).wrapping_add(u128::from(limb)));
        }
        self
    }
}

/// One scanning thread's Gram accumulation: fed quantised rows (cell indices per axis).
pub struct GramAccumulator {
    pub sums: GramSums,
    product: Mat<f64>,
}

impl GramAccumulator {
    pub fn new(dims: usize) -> Self {
        GramAccumulator {
            sums: GramSums::zeros(dims),
            product: Mat::zeros(dims, dims),
        }
    }

    fn add_block(&mut self, axes: &[&[u32]], start: usize, rows: usize) {
        let dims = self.sums.dims;
        let block = Mat::<f64>::from_fn(rows, dims, |row, axis| {
            value_numerator(axes[axis][start + row]) as f64
        });
        // Lower triangle of QᵀQ; exact (see GRAM_BLOCK_ROWS), so blocking and FMA cannot change it.
        matmul(
            self.product.as_mut(),
            BlockStructure::TriangularLower,
            Accum::Replace,
            block.transpose(),
            BlockStructure::Rectangular,
            block.as_ref(),
            BlockStructure::Rectangular,
            1.0,
            Par::Seq,
        );
        for i in 0..dims {
            for j in 0..=i {
                self.sums.gram[i * (i + 1) / 2 + j] += self.product[(i, j)] as u128;
            }
        }
        for (axis, sum) in self.sums.sums.iter_mut().enumerate() {
            let column = &axes[axis][start..start + rows];
            *sum += column
                .iter()
                .map(|&index| value_numerator(index))
                .sum::<u64>() as u128;
        }
        self.sums.rows += rows as u64;
    }
}

impl BinnerWorker for GramAccumulator {
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        let rows = axes.first().map_or(0, |axis| axis.len());
        let mut start = 0;
        while start < rows {
            let block = (rows - start).min(GRAM_BLOCK_ROWS);
            self.add_block(axes, start, block);
            start += block;
        }
        Ok(())
    }
}

/// How one statistic was released: grid, sensitivity and noise scale (grid units), ε spent.
#[derive(Clone, Debug, PartialEq)]
pub struct GridRelease {
    /// Values are released as integer multiples of 2^−grid_bits (normalised units).
    pub grid_bits: u32,
    /// Largest change of one released entry (grid units, rounding included) between neighbours.
    pub entry_sensitivity: f64,
    /// Noise scale off the diagonal (covariance) or per coordinate (mean), grid units.
    pub scale: RationalScale,
    /// The covariance diagonal's scale (2× under replace, as in the paper); `None` for the mean.
    pub diagonal_scale: Option<RationalScale>,
    /// ε spent with the rounded scales.
    pub epsilon_spent: f64,
}

impl GridRelease {
    /// The off-diagonal (or per-coordinate) scale in normalised units.
    pub fn scale_in_units(&self) -> f64 {
        self.scale.to_f64() / grid(self.grid_bits)
    }
}

/// The released moments, in normalised [0,1] units: M̂ (d×d, symmetric, row-major) and X̄_priv.
#[derive(Clone, Debug)]
pub struct ReleasedMoments {
    pub covariance: Vec<f64>,
    pub mean: Vec<f64>,
    pub covariance_release: GridRelease,
    pub mean_release: GridRelease,
}

fn grid(bits: u32) -> f64 {
    (bits as f64).exp2()
}

/// The smallest exact rational at or above σ (with a safety margin), or a clear error.
fn scale_at_least(sigma: f64, what: &str) -> Result<RationalScale> {
    let sigma = sigma * (1.0 + SCALE_SAFETY_MARGIN);
    if !(sigma.is_finite() && sigma > 0.0 && sigma <= MAX_NOISE_SCALE) {
        return Err(Error::bad_input(format!(
            "the {what} noise scale {sigma:e} (grid units) is outside the sampler's range: epsilon is too \
             small for this many columns"
        )));
    }
    let scale = if sigma < RationalScale::MAX_SCALE {
        RationalScale::round_up(sigma)
    } else {
        RationalScale::new(sigma.ceil() as u64, 1)
    };
    scale.ok_or_else(|| Error::internal(format!("cannot represent the {what} noise scale {sigma}")))
}

/// round(num/den) for den > 0, halves away from −∞ (exact integer arithmetic).
fn round_div(num: i128, den: i128) -> Option<i128> {
    Some(
        num.checked_mul(2)?
            .checked_add(den)?
            .div_euclid(den.checked_mul(2)?),
    )
}

fn too_many_rows() -> Error {
    Error::bad_input(
        "too many rows for lowdim's exact 128-bit covariance arithmetic (at most 2^35)",
    )
}

/// Releases M̂ and X̄_priv from the exact sums. `rows` is the public n (replace) or the released n̂
/// (add-remove); both must be at least 2.
pub fn release_moments(
    sums: &GramSums,
    neighbours: Neighbours,
    rows: u64,
    epsilon_covariance: f64,
    epsilon_mean: f64,
    key: &NoiseKey,
) -> Result<ReleasedMoments> {
    if rows < 2 {
        return Err(Error::bad_input(format!(
            "lowdim needs at least 2 rows for a covariance, got {rows}{}",
            match neighbours {
                Neighbours::Replace => "",
                Neighbours::AddRemove => " (the released noisy row count n̂)",
            }
        )));
    }
    match neighbours {
        Neighbours::Replace => release_replace(sums, epsilon_covariance, epsilon_mean, key),
        Neighbours::AddRemove => {
            release_add_remove(sums, rows, epsilon_covariance, epsilon_mean, key)
        }
    }
}

/// The paper's release under replace: centred covariance and mean computed exactly from the public n,
/// rounded to the grid, noised.
fn release_replace(
    sums: &GramSums,
    epsilon_covariance: f64,
    epsilon_mean: f64,
    key: &NoiseKey,
) -> Result<ReleasedMoments> {
    let dims = sums.dims;
    let n = sums.rows;
    let grid_bits = GRID_FINE_BITS + 64 - (n - 1).leading_zeros(); // + ⌈log2 n⌉
    let g = grid(grid_bits);
    let d = dims as f64;

    // Covariance: Δ = 6·2^k/n + 1 per entry; off-diagonal s, diagonal 2s, s = d²Δ/(2ε_c).
    let covariance_sensitivity = 6.0 * g / n as f64 + 1.0;
    let off_diagonal = d * d * covariance_sensitivity / (2.0 * epsilon_covariance);
    let scale = scale_at_least(off_diagonal, "covariance")?;
    let diagonal_scale = scale_at_least(2.0 * off_diagonal, "covariance")?;
    let covariance_spent = covariance_sensitivity
        * ((d * (d - 1.0) / 2.0) / scale.to_f64() + d / diagonal_scale.to_f64());
    // round(2^k (nG − S Sᵀ)/(n(n−1)·2^{2V})), with the power of two moved to whichever side keeps it
    // an integer.
    let n_wide = n as i128;
    let value_bits = 2 * VALUE_BITS;
    let (up, down) = (
        grid_bits.saturating_sub(value_bits),
        value_bits.saturating_sub(grid_bits),
    );
    let den = (n_wide * (n_wide - 1))
        .checked_mul(1i128 << down)
        .ok_or_else(too_many_rows)?;
    let mut rng = key.stream(NoiseStream::LowdimCovariance, 0);
    let mut covariance = vec![0.0; dims * dims];
    for i in 0..dims {
        for j in 0..=i {
            let centred = n_wide
                .checked_mul(sums.gram_at(i, j) as i128)
                .and_then(|product| {
                    product.checked_sub((sums.sums[i] as i128).checked_mul(sums.sums[j] as i128)?)
                })
                .and_then(|centred| centred.checked_mul(1i128 << up))
                .ok_or_else(too_many_rows)?;
            let on_grid = round_div(centred, den).ok_or_else(too_many_rows)?;
            let noise_scale = if i == j { diagonal_scale } else { scale };
            let noisy = on_grid + i128::from(sample_discrete_laplace(&mut rng, noise_scale));
            let value = noisy as f64 / g;
            covariance[i * dims + j] = value;
            covariance[j * dims + i] = value;
        }
    }

    // Mean: round(2^k S_i/(n 2^V)); Δ = 2^k/n + 1 per coordinate, ℓ1 over d coordinates.
    let mean_sensitivity = g / n as f64 + 1.0;
    let mean_scale = scale_at_least(d * mean_sensitivity / epsilon_mean, "mean")?;
    let mean_spent = d * mean_sensitivity / mean_scale.to_f64();
    let mean_den = n_wide << VALUE_BITS;
    let mut rng = key.stream(NoiseStream::LowdimMean, 0);
    let mut mean = Vec::with_capacity(dims);
    for &sum in &sums.sums {
        let scaled = (sum as i128)
            .checked_mul(1i128 << grid_bits)
            .ok_or_else(too_many_rows)?;
        let on_grid = round_div(scaled, mean_den).ok_or_else(too_many_rows)?;
        let noisy = on_grid + i128::from(sample_discrete_laplace(&mut rng, mean_scale));
        mean.push(noisy as f64 / g);
    }

    Ok(ReleasedMoments {
        covariance,
        mean,
        covariance_release: GridRelease {
            grid_bits,
            entry_sensitivity: covariance_sensitivity,
            scale,
            diagonal_scale: Some(diagonal_scale),
            epsilon_spent: covariance_spent,
        },
        mean_release: GridRelease {
            grid_bits,
            entry_sensitivity: mean_sensitivity,
            scale: mean_scale,
            diagonal_scale: None,
            epsilon_spent: mean_spent,
        },
    })
}

/// Under add-remove: noisy raw sums S and G (no use of the private n), then the covariance and the
/// mean by post-processing with the released n̂.
fn release_add_remove(
    sums: &GramSums,
    rows_released: u64,
    epsilon_covariance: f64,
    epsilon_mean: f64,
    key: &NoiseKey,
) -> Result<ReleasedMoments> {
    let dims = sums.dims;
    let d = dims as f64;
    let grid_bits = GRID_FINE_BITS;
    let g = grid(grid_bits);
    // A row's entries are below 1, i.e. below 2^k grid units; +1 for the rounding of G.
    let gram_sensitivity = g + 1.0;
    let triangle = d * (d + 1.0) / 2.0;
    let gram_scale = scale_at_least(
        triangle * gram_sensitivity / epsilon_covariance,
        "covariance",
    )?;
    let covariance_spent = triangle * gram_sensitivity / gram_scale.to_f64();
    let value_bits = 2 * VALUE_BITS;
    let gram_den = 1i128 << (value_bits - grid_bits);
    let mut rng = key.stream(NoiseStream::LowdimCovariance, 0);
    let mut noisy_gram = vec![0.0; dims * dims];
    for i in 0..dims {
        for j in 0..=i {
            let on_grid =
                round_div(sums.gram_at(i, j) as i128, gram_den).ok_or_else(too_many_rows)?;
            let noisy = on_grid + i128::from(sample_discrete_laplace(&mut rng, gram_scale));
            noisy_gram[i * dims + j] = noisy as f64 / g;
            noisy_gram[j * dims + i] = noisy as f64 / g;
        }
    }
    // S_i on the grid 2^−k is exact (k ≥ VALUE_BITS): Δ ≤ 2^k per coordinate, no rounding.
    const _: () = assert!(GRID_FINE_BITS >= VALUE_BITS);
    let sum_sensitivity = g;
    let sum_scale = scale_at_least(d * sum_sensitivity / epsilon_mean, "mean")?;
    let mean_spent = d * sum_sensitivity / sum_scale.to_f64();
    let mut rng = key.stream(NoiseStream::LowdimMean, 0);
    let noisy_sums: Vec<f64> = sums
        .sums
        .iter()
        .map(|&sum| {
            let on_grid = (sum as i128) << (grid_bits - VALUE_BITS);
            (on_grid + i128::from(sample_discrete_laplace(&mut rng, sum_scale))) as f64 / g
        })
        .collect();

    let n_hat = rows_released as f64;
    let mean: Vec<f64> = noisy_sums.iter().map(|&sum| sum / n_hat).collect();
    let mut covariance = vec![0.0; dims * dims];
    for i in 0..dims {
        for j in 0..dims {
            covariance[i * dims + j] =
                (noisy_gram[i * dims + j] - noisy_sums[i] * noisy_sums[j] / n_hat) / (n_hat - 1.0);
        }
    }
    Ok(ReleasedMoments {
        covariance,
        mean,
        covariance_release: GridRelease {
            grid_bits,
            entry_sensitivity: gram_sensitivity,
            scale: gram_scale,
            diagonal_scale: None,
            epsilon_spent: covariance_spent,
        },
        mean_release: GridRelease {
            grid_bits,
            entry_sensitivity: sum_sensitivity,
            scale: sum_scale,
            diagonal_scale: None,
            epsilon_spent: mean_spent,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Indices of a small random data set, axis-major.
    fn random_indices(dims: usize, rows: usize, seed: u64) -> Vec<Vec<u32>> {
        let mut state = seed | 1;
        (0..dims)
            .map(|_| {
                (0..rows)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        (state % (1 << VALUE_CELL_BITS)) as u32
                    })
                    .collect()
            })
            .collect()
    }

    fn accumulate(axes: &[Vec<u32>], batches: &[usize]) -> GramSums {
        let dims = axes.len();
        let mut workers = vec![GramAccumulator::new(dims), GramAccumulator::new(dims)];
        let mut start = 0;
        for (batch, &rows) in batches.iter().enumerate() {
            let slices: Vec<&[u32]> = axes.iter().map(|axis| &axis[start..start + rows]).collect();
            workers[batch % 2].add_batch(&slices).unwrap();
            start += rows;
        }
        assert_eq!(start, axes[0].len());
        GramSums::merge(dims, workers.into_iter().map(|worker| worker.sums))
    }

    #[test]
    fn gram_sums_are_exact_and_independent_of_the_split() {
        let (dims, rows) = (5, 3 * GRAM_BLOCK_ROWS + 17);
        let axes = random_indices(dims, rows, 11);
        let mut naive = GramSums::zeros(dims);
        naive.rows = rows as u64;
        for row in 0..rows {
            let values: Vec<u128> = axes
                .iter()
                .map(|axis| value_numerator(axis[row]) as u128)
                .collect();
            for (i, &vi) in values.iter().enumerate() {
                naive.sums[i] += vi;
                for (j, &vj) in values[..=i].iter().enumerate() {
                    naive.gram[i * (i + 1) / 2 + j] += vi * vj;
                }
            }
        }
        assert_eq!(accumulate(&axes, &[rows]), naive);
        assert_eq!(accumulate(&axes, &[1, rows - 1]), naive);
        assert_eq!(
            accumulate(&axes, &[GRAM_BLOCK_ROWS - 1, 2 * GRAM_BLOCK_ROWS + 3, 15]),
            naive
        );
        // The largest values: v = 2^17 − 1 everywhere, a full block, still exact.
        let top = vec![vec![(1u32 << VALUE_CELL_BITS) - 1; GRAM_BLOCK_ROWS]; 3];
        let sums = accumulate(&top, &[GRAM_BLOCK_ROWS]);
        let v = (1u128 << VALUE_BITS) - 1;
        assert!(sums
            .gram
            .iter()
            .all(|&g| g == v * v * GRAM_BLOCK_ROWS as u128));
    }

    #[test]
    fn sums_added_over_ranks_as_limbs_are_the_merged_sums() {
        let mut part = accumulate(&random_indices(3, 500, 5), &[500]);
        // Values past 2^64, whose limbs carry when three ranks' are added.
        part.gram[0] = u128::MAX / 5;
        part.sums[2] = (1u128 << 100) + (1u128 << 64) - 1;
        let three_ranks = part.clone().summed_with(|words| words.iter_mut().for_each(|word| *word *= 3));
        assert_eq!(three_ranks, GramSums::merge(3, [part.clone(), part.clone(), part.clone()]));
        assert_eq!(part.clone().summed_with(|_| ()), part, "one machine: the sums as they are");
    }

    fn sums_of(axes: &[Vec<u32>]) -> GramSums {
        accumulate(axes, &[axes[0].len()])
    }

    #[test]
    fn replace_noise_scales_follow_the_derived_formula() {
        let (dims, rows) = (4usize, 1000usize);
        let sums = sums_of(&random_indices(dims, rows, 3));
        let key = NoiseKey::from_user_seed(1);
        let (eps_c, eps_m) = (0.4, 0.25);
        let released =
            release_moments(&sums, Neighbours::Replace, rows as u64, eps_c, eps_m, &key).unwrap();
        let cov = &released.covariance_release;
        // k = ⌈log2 1000⌉ + 20 = 30.
        assert_eq!(cov.grid_bits, 30);
        let (n, d) = (rows as f64, dims as f64);
        // In normalised units the off-diagonal scale is d²(6/n + 2^−k)/(2ε_c) ≈ 3d²/(ε_c n).
        let expected = d * d * (6.0 / n + (-30f64).exp2()) / (2.0 * eps_c);
        assert!(
            (cov.scale_in_units() / expected - 1.0).abs() < 1e-8,
            "{}",
            cov.scale_in_units()
        );
        assert!((cov.diagonal_scale.unwrap().to_f64() / cov.scale.to_f64() - 2.0).abs() < 1e-8);
        let mean = &released.mean_release;
        let expected_mean = d * (1.0 / n + (-30f64).exp2()) / eps_m;
        assert!((mean.scale_in_units() / expected_mean - 1.0).abs() < 1e-8);
        // Spent with the rounded scales: never above the share, and equal to it up to rounding.
        assert!(cov.epsilon_spent <= eps_c && cov.epsilon_spent > eps_c * (1.0 - 1e-7));
        assert!(mean.epsilon_spent <= eps_m && mean.epsilon_spent > eps_m * (1.0 - 1e-7));
    }

    #[test]
    fn add_remove_noise_scales_do_not_use_n() {
        let dims = 3usize;
        let key = NoiseKey::from_user_seed(2);
        let small = sums_of(&random_indices(dims, 50, 5));
        let large = sums_of(&random_indices(dims, 5000, 5));
        let a = release_moments(&small, Neighbours::AddRemove, 48, 0.3, 0.3, &key).unwrap();
        let b = release_moments(&large, Neighbours::AddRemove, 5003, 0.3, 0.3, &key).unwrap();
        assert_eq!(a.covariance_release, b.covariance_release);
        assert_eq!(a.mean_release, b.mean_release);
        let d = dims as f64;
        // Sum of G's upper triangle: ℓ1 sensitivity d(d+1)/2 (+ rounding); of S: d.
        let expected = d * (d + 1.0) / 2.0 * (1.0 + (-20f64).exp2()) / 0.3;
        assert!((a.covariance_release.scale_in_units() / expected - 1.0).abs() < 1e-8);
        assert!((a.mean_release.scale_in_units() / (d / 0.3) - 1.0).abs() < 1e-8);
        assert!(release_moments(&small, Neighbours::AddRemove, 1, 0.3, 0.3, &key).is_err());
    }

    #[test]
    fn released_noise_has_the_stated_law() {
        // Constant data: the exact covariance is 0 and the mean is known, so M̂ is pure noise. Its
        // off-diagonal entries must have the discrete Laplace variance 2p/(1−p)² ≈ 2s² (grid units).
        let dims = 40usize;
        let rows = 4096usize;
        let axes = vec![vec![1000u32; rows]; dims];
        let sums = sums_of(&axes);
        let key = NoiseKey::from_user_seed(9);
        let released =
            release_moments(&sums, Neighbours::Replace, rows as u64, 1.0, 1.0, &key).unwrap();
        let cov = &released.covariance_release;
        let s = cov.scale_in_units();
        let off: Vec<f64> = (0..dims)
            .flat_map(|i| (0..i).map(move |j| (i, j)))
            .map(|(i, j)| released.covariance[i * dims + j])
            .collect();
        let variance = off.iter().map(|x| x * x).sum::<f64>() / off.len() as f64;
        let ratio = variance / (2.0 * s * s);
        assert!((0.8..1.25).contains(&ratio), "variance / 2s² = {ratio}");
        let diagonal: Vec<f64> = (0..dims)
            .map(|i| released.covariance[i * dims + i])
            .collect();
        let diagonal_variance = diagonal.iter().map(|x| x * x).sum::<f64>() / dims as f64;
        assert!(
            diagonal_variance > 2.0 * variance,
            "the diagonal has scale 2s"
        );
        // Symmetric, as the paper's A.
        for i in 0..dims {
            for j in 0..dims {
                assert_eq!(
                    released.covariance[i * dims + j],
                    released.covariance[j * dims + i]
                );
            }
        }
        let truth = unit_value(1000);
        let mean_error = released.mean.iter().map(|m| (m - truth).abs()).sum::<f64>() / dims as f64;
        let mean_scale = released.mean_release.scale_in_units();
        // E|Lap| ≈ s: the mean error is noise of the stated scale, not more, not zero.
        assert!(
            mean_error > 0.5 * mean_scale && mean_error < 1.6 * mean_scale,
            "{mean_error} vs {mean_scale}"
        );
    }

    #[test]
    fn without_noise_the_release_is_the_exact_centred_covariance() {
        // With an enormous ε the noise vanishes at grid precision: M̂ equals the textbook covariance.
        let (dims, rows) = (3usize, 500usize);
        let axes = random_indices(dims, rows, 21);
        let sums = sums_of(&axes);
        let key = NoiseKey::from_user_seed(4);
        let released =
            release_moments(&sums, Neighbours::Replace, rows as u64, 1e12, 1e12, &key).unwrap();
        let x: Vec<Vec<f64>> = axes
            .iter()
            .map(|axis| axis.iter().map(|&b| unit_value(b)).collect())
            .collect();
        let means: Vec<f64> = x
            .iter()
            .map(|c| c.iter().sum::<f64>() / rows as f64)
            .collect();
        for i in 0..dims {
            assert!((released.mean[i] - means[i]).abs() < 1e-9);
            for j in 0..dims {
                let cov: f64 = (0..rows)
                    .map(|r| (x[i][r] - means[i]) * (x[j][r] - means[j]))
                    .sum::<f64>()
                    / (rows as f64 - 1.0);
                assert!(
                    (released.covariance[i * dims + j] - cov).abs() < 1e-8,
                    "{i},{j}"
                );
            }
        }
        let add_remove =
            release_moments(&sums, Neighbours::AddRemove, rows as u64, 1e12, 1e12, &key).unwrap();
        for (a, b) in add_remove.covariance.iter().zip(&released.covariance) {
            assert!((a - b).abs() < 1e-6);
        }
    }

    #[test]
    fn rounding_division_is_exact_for_both_signs() {
        assert_eq!(round_div(7, 2), Some(4));
        assert_eq!(round_div(-7, 2), Some(-3));
        assert_eq!(round_div(5, 3), Some(2));
        assert_eq!(round_div(-5, 3), Some(-2));
        assert_eq!(round_div(0, 9), Some(0));
    }
}
