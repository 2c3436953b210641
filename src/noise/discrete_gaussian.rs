//! Exact discrete Gaussian noise N_Z(0, σ²), P(Z = z) ∝ exp(−z²/(2σ²)) on the integers (Private
//! Evolution's noisy nearest-neighbour counts, docs/mechanisms/pe.md).
//!
//! Canonne–Kamath–Steinke 2020 ("The Discrete Gaussian for Differential Privacy", Algorithm 3), with
//! integer arithmetic only: σ² is an exact rational `num/den` ([`RationalScale`] read as a variance),
//! t = ⌊σ⌋ + 1, and a candidate Y ~ Lap_Z(t) (the exact sampler of [`super::discrete_laplace`]) is kept
//! with probability exp(−(|Y| − σ²/t)²/(2σ²)). The exponent is the exact fraction
//! (|Y|·den·t − num)² / (2·num·den·t²), evaluated in u128 by CKS Algorithm 1 (Bernoulli(e^{−n/d}) from
//! Bernoulli(1/k) draws). A candidate is accepted with probability at least about 0.6 for σ ≥ 1 (CKS
//! Prop. 5's bound), so a draw costs a few Laplace draws.
//!
//! Range: the variance's denominator is 2^[`VARIANCE_DENOMINATOR_BITS`] and σ² < 2^32, so the u128
//! exponent never overflows for |Y| < 2^[`MAX_CANDIDATE_BITS`]; a larger candidate (probability below
//! e^{−2^31/(2^16+1)} ≈ e^{−32767}) is redrawn, i.e. the output is conditioned on |Z| < 2^31, as the
//! discrete Laplace sampler conditions on |Z| ≤ i64::MAX.

use rand::Rng;

use super::discrete_laplace::{sample_discrete_laplace, RationalScale};

/// log2 of the denominator a variance is rounded up to ([`round_up_variance`]). 16 bits keep the
/// acceptance exponent within u128 (see the module doc) and add less than 2^−16 to σ², which is
/// invisible next to σ² ≥ 1 of any useful count noise.
pub const VARIANCE_DENOMINATOR_BITS: u32 = 16;

/// The largest variance [`round_up_variance`] accepts is just below this (σ < 2^16).
pub const MAX_VARIANCE: f64 = (1u64 << 32) as f64;

/// Candidates at or beyond 2^MAX_CANDIDATE_BITS are redrawn (see the module doc).
const MAX_CANDIDATE_BITS: u32 = 31;

/// The smallest `num/2^16` ≥ `variance`, exactly (an f64 times a power of two is exact); `None` if the
/// variance is not finite, not positive or not below [`MAX_VARIANCE`].
pub fn round_up_variance(variance: f64) -> Option<RationalScale> {
    if !variance.is_finite() || variance <= 0.0 || variance >= MAX_VARIANCE {
        return None;
    }
    let scaled = variance * (1u64 << VARIANCE_DENOMINATOR_BITS) as f64;
    RationalScale::new(scaled.ceil() as u64, 1u64 << VARIANCE_DENOMINATOR_BITS)
}

/// One exact draw of N_Z(0, σ²) with σ² = `variance.num()/variance.den()`, for a variance from
/// [`round_up_variance`] (or any `num < 2^48`, `den ≤ 2^16`).
pub fn sample_discrete_gaussian<R: Rng + ?Sized>(rng: &mut R, variance: RationalScale) -> i64 {
    let (num, den) = (u128::from(variance.num()), u128::from(variance.den()));
    debug_assert!(num < 1 << 48 && den <= 1 << VARIANCE_DENOMINATOR_BITS);
    // t = ⌊σ⌋ + 1 = isqrt(⌊σ²⌋) + 1: ⌊√x⌋ = ⌊√⌊x⌋⌋ for x ≥ 0.
    let t = u128::from(integer_sqrt((num / den) as u64)) + 1;
    let laplace = RationalScale::new(t as u64, 1).expect("t ≥ 1");
    // exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y|·den·t − num)² / (2·num·den·t²)).
    let denominator = 2 * num * den * t * t;
    loop {
        let candidate = sample_discrete_laplace(rng, laplace);
        let magnitude = u128::from(candidate.unsigned_abs());
        if magnitude >> MAX_CANDIDATE_BITS != 0 {
            continue;
        }
        let centred = (magnitude * den * t).abs_diff(num);
        if bernoulli_exp(rng, centred * centred, denominator) {
            return candidate;
        }
    }
}

/// ⌊√x⌋, exactly.
fn integer_sqrt(x: u64) -> u64 {
    let mut root = (x as f64).sqrt() as u64;
    while root.checked_mul(root).is_none_or(|square| square > x) {
        root -= 1;
    }
    while (root + 1).checked_mul(root + 1).is_some_and(|square| square <= x) {
        root += 1;
    }
    root
}

/// Bernoulli(exp(−n/d)), n ≥ 0, d ≥ 1 (CKS Algorithm 1): ⌊n/d⌋ Bernoulli(e^{−1}) must all succeed, then
/// one Bernoulli(e^{−{n/d}}). Stops at the first failure, so a huge ⌊n/d⌋ costs little on average.
pub(crate) fn bernoulli_exp<R: Rng + ?Sized>(rng: &mut R, n: u128, d: u128) -> bool {
    let mut whole = n / d;
    while whole > 0 {
        if !bernoulli_exp_at_most_one(rng, 1, 1) {
            return false;
        }
        whole -= 1;
    }
    bernoulli_exp_at_most_one(rng, n % d, d)
}

/// Bernoulli(exp(−n/d)) for n ≤ d: A_k ~ Bernoulli(n/(d·k)) until one fails at K; P(K odd) = e^{−n/d}.
fn bernoulli_exp_at_most_one<R: Rng + ?Sized>(rng: &mut R, n: u128, d: u128) -> bool {
    let mut k: u128 = 1;
    while bernoulli_ratio(rng, 1, k) && bernoulli_ratio(rng, n, d) {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(n/d) for 0 ≤ n ≤ d, d ≥ 1.
fn bernoulli_ratio<R: Rng + ?Sized>(rng: &mut R, n: u128, d: u128) -> bool {
    if n == 0 || n >= d {
        return n > 0;
    }
    uniform_below(rng, d) < n
}

/// A uniform integer in [0, bound), bound ≥ 2, by rejection from the smallest power of two above it
/// (fewer than two tries on average).
fn uniform_below<R: Rng + ?Sized>(rng: &mut R, bound: u128) -> u128 {
    let bits = 128 - (bound - 1).leading_zeros();
    let mask = if bits == 128 { u128::MAX } else { (1u128 << bits) - 1 };
    loop {
        let word = if bits <= 32 {
            u128::from(rng.next_u32())
        } else if bits <= 64 {
            u128::from(rng.next_u64())
        } else {
            u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())
        };
        let value = word & mask;
        if value < bound {
            return value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::law_checks::chi_square_p_value;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    /// The exact pmf on [−cut, cut] (the mass beyond is below 1e-30 for cut = 14σ + 2), normalised.
    fn pmf(variance: f64) -> (i64, Vec<f64>) {
        let cut = (14.0 * variance.sqrt()) as i64 + 2;
        let weights: Vec<f64> = (-cut..=cut)
            .map(|z| (-(z * z) as f64 / (2.0 * variance)).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        (cut, weights.iter().map(|w| w / total).collect())
    }

    fn check_against_pmf(variance: f64, draws: usize, seed: u64) {
        let scale = round_up_variance(variance).unwrap();
        let exact_variance = scale.to_f64();
        let (cut, law) = pmf(exact_variance);
        let mut rng = ChaCha12Rng::seed_from_u64(seed);
        let mut counts = vec![0u64; law.len()];
        let (mut sum, mut sum_sq) = (0.0, 0.0);
        for _ in 0..draws {
            let z = sample_discrete_gaussian(&mut rng, scale);
            assert!(z.abs() <= cut, "draw {z} beyond 14σ at σ² = {variance}");
            counts[(z + cut) as usize] += 1;
            sum += z as f64;
            sum_sq += (z * z) as f64;
        }
        // Pearson's χ², outcomes merged left to right until each bin expects ≥ 5.
        let n = draws as f64;
        let (mut statistic, mut bins, mut open) = (0.0, 0usize, (0.0, 0.0));
        for (p, &observed) in law.iter().zip(&counts) {
            open = (open.0 + n * p, open.1 + observed as f64);
            if open.0 >= 5.0 {
                statistic += (open.1 - open.0).powi(2) / open.0;
                bins += 1;
                open = (0.0, 0.0);
            }
        }
        assert!(bins >= 3);
        let p_value = chi_square_p_value(statistic, bins - 1);
        assert!(p_value > 1e-4, "σ² = {variance}: χ² p-value {p_value}");
        // The variance against the pmf's: its standard error is about σ²·√(2/n).
        let law_variance: f64 = law
            .iter()
            .enumerate()
            .map(|(i, p)| p * ((i as i64 - cut) as f64).powi(2))
            .sum();
        let mean = sum / n;
        let sample_variance = sum_sq / n - mean * mean;
        let standard_error = law_variance * (2.0 / n).sqrt();
        assert!(
            (sample_variance - law_variance).abs() < 5.0 * standard_error,
            "σ² = {variance}: sample variance {sample_variance}, law {law_variance}"
        );
        assert!(mean.abs() < 5.0 * (law_variance / n).sqrt(), "mean {mean}");
    }

    #[test]
    fn draws_follow_the_discrete_gaussian_pmf() {
        check_against_pmf(0.3, 200_000, 1);
        check_against_pmf(1.0, 200_000, 2);
        check_against_pmf(7.25, 200_000, 3);
        check_against_pmf(400.0, 200_000, 4);
    }

    #[test]
    fn variance_is_rounded_up_exactly_and_bounded() {
        for variance in [1e-3, 0.37, 2.0, 123.456, 4.0e9] {
            let scale = round_up_variance(variance).unwrap();
            assert!(scale.to_f64() >= variance);
            assert!(scale.to_f64() - variance <= 1.0 / 65536.0 + variance * 1e-15);
        }
        assert!(round_up_variance(MAX_VARIANCE).is_none());
        assert!(round_up_variance(0.0).is_none());
        assert!(round_up_variance(f64::NAN).is_none());
    }

    #[test]
    fn integer_square_roots_are_exact() {
        for x in [0u64, 1, 2, 3, 4, 15, 16, 17, 99, 100, u32::MAX as u64, u64::MAX] {
            let root = integer_sqrt(x);
            assert!(u128::from(root) * u128::from(root) <= u128::from(x));
            assert!(u128::from(root + 1) * u128::from(root + 1) > u128::from(x));
        }
    }
}
