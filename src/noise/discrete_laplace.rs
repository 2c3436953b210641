//! Exact discrete Laplace noise Lap_Z(σ), P(Z = z) ∝ exp(−|z|/σ) on the integers (docs/privacy.md, "Noise").
//!
//! Sampled with integer arithmetic only, following Canonne–Kamath–Steinke 2020 ("The Discrete
//! Gaussian for Differential Privacy", Algorithms 1–2): no floating-point log, exp or rounding ever
//! touches a draw, so the output distribution is exactly the one the privacy proof assumes (Mironov's
//! floating-point attack does not apply). The scale is an exact rational `num/den`; a real σ is
//! rounded *up* to one ([`RationalScale::round_up`]), which only adds noise.
//!
//! Parametrisation: CKS sample Lap_Z(t/s) for integers s, t; we take t = `num`, s = `den` (after
//! dividing out their common power of two). The sample is a random sign times a geometric magnitude
//! Y with P(Y = y) ∝ e^{−y·s/t}, rejecting "−0", and Y is drawn in whichever of two exact ways stays
//! cheap, so that the expected number of RNG words per sample is bounded independently of σ:
//! - σ ≥ 1 (t ≥ s): CKS Algorithm 2, X = U + t·V with U uniform below t kept with probability
//!   e^{−U/t} and V ~ Geom(1 − e^{−1}), so P(X = x) ∝ e^{−x/t} at a cost that does not grow with t;
//!   then Y = ⌊X/s⌋. Counting Bernoulli(e^{−1/σ}) trials instead would cost ≈ σ trials.
//! - σ < 1 (t < s): Y counts successes of Bernoulli(e^{−s/t}) before the first failure, fewer than
//!   1/(1 − e^{−1}) trials on average, each ending at its first failed Bernoulli(e^{−1}). CKS
//!   Algorithm 2 would also stay bounded here but spends its U and V mostly on Y = 0.
//!
//! Measured by a test below, in 32-bit words per sample: 7.4 at σ = 10^−6 and 0.05, 5.5 at 1, 12.3
//! at 37.7 (U needs u64 words there), 8.5 at 10^6, 10.1 at 3·10^9; the crude bound in
//! [`sample_discrete_laplace`] is 64.

use rand::Rng;

/// A noise scale σ held as an exact rational `num/den`, never smaller than the real asked for.
/// [`RationalScale::round_up`] gives `den` = 2^[`RationalScale::DENOMINATOR_BITS`]; [`RationalScale::new`]
/// accepts any positive denominator (the sampler is exact for every positive `num` and `den`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RationalScale {
    num: u64,
    den: u64,
}

impl RationalScale {
    /// log2 of the denominator used by [`RationalScale::round_up`].
    ///
    /// 32 bits: rounding up adds less than 2^−32 ≈ 2.3·10^−10 to σ, a relative excess below 10^−8 for
    /// any σ ≥ 0.05, invisible in accuracy; and the numerator σ·2^32 still fits a u64 for every
    /// σ < 2^32 ≈ 4.3·10^9 (see [`RationalScale::MAX_SCALE`]). A larger denominator would cap σ lower
    /// (2^40 caps it at 2^24), a smaller one would round small scales coarsely. The sampler's cost
    /// does not depend on this choice.
    pub const DENOMINATOR_BITS: u32 = 32;

    /// The largest σ that [`RationalScale::round_up`] accepts is just below this, 2^32 ≈ 4.3·10^9:
    /// beyond it the numerator σ·2^[`RationalScale::DENOMINATOR_BITS`] no longer fits a u64.
    pub const MAX_SCALE: f64 = (1u128 << (64 - Self::DENOMINATOR_BITS)) as f64;

    /// The smallest `num/den` with `den` = 2^[`RationalScale::DENOMINATOR_BITS`] and `num/den` ≥ `sigma`,
    /// exactly: an f64 is a dyadic rational, so `sigma · 2^32` is computed without rounding and its
    /// ceiling is exact. `None` if `sigma` is not finite, not positive, or not below
    /// [`RationalScale::MAX_SCALE`].
    pub fn round_up(sigma: f64) -> Option<Self> {
        if !sigma.is_finite() || sigma <= 0.0 || sigma >= Self::MAX_SCALE {
            return None;
        }
        // Multiplying by a power of two only shifts the exponent (no overflow below MAX_SCALE, and a
        // subnormal sigma gains bits rather than losing them), so `scaled` equals sigma·2^32 exactly.
        let scaled = sigma * (1u64 << Self::DENOMINATOR_BITS) as f64;
        // scaled < 2^64; at or above 2^53 every f64 is an integer, so the ceiling stays below 2^64
        // and the cast is exact.
        Self::new(scaled.ceil() as u64, 1u64 << Self::DENOMINATOR_BITS)
    }

    /// σ = `num/den` exactly. `None` if either is 0; every positive u64 pair is supported.
    pub fn new(num: u64, den: u64) -> Option<Self> {
        (num > 0 && den > 0).then_some(RationalScale { num, den })
    }

    /// The numerator of σ.
    pub fn num(&self) -> u64 {
        self.num
    }

    /// The denominator of σ.
    pub fn den(&self) -> u64 {
        self.den
    }

    /// (t, s) with t/s = σ after dividing out the common power of two of `num` and `den` (all common
    /// factors when `den` is a power of two, as from `round_up`): keeps t small, t = σ for an
    /// integral σ.
    pub fn reduced(&self) -> (u64, u64) {
        let common_twos = (self.num | self.den).trailing_zeros();
        (self.num >> common_twos, self.den >> common_twos)
    }

    /// σ in floating point (rounded), for reports only: the sampler never uses it.
    pub fn to_f64(&self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// Var Lap_Z(σ) = 2q/(1 − q)², q = e^{−1/σ} (1 − q from `exp_m1`, which keeps its precision for large σ):
    /// for weights and reports, in floating point like [`RationalScale::to_f64`].
    pub fn variance(&self) -> f64 {
        let (q, one_minus_q) = self.q_and_one_minus_q();
        2.0 * q / (one_minus_q * one_minus_q)
    }

    /// E|Lap_Z(σ)| = 2q/(1 − q²), q = e^{−1/σ}: as [`RationalScale::variance`].
    pub fn mean_absolute(&self) -> f64 {
        let (q, one_minus_q) = self.q_and_one_minus_q();
        2.0 * q / (one_minus_q * (1.0 + q))
    }

    fn q_and_one_minus_q(&self) -> (f64, f64) {
        let exponent = -1.0 / self.to_f64();
        (exponent.exp(), -exponent.exp_m1())
    }
}

/// One exact draw of Lap_Z(`scale`): P(Z = z) = (1−q)/(1+q) · q^{|z|} with q = e^{−den/num}.
///
/// Expected cost in 32-bit words, per attempt; an attempt restarts only on "−0", with probability
/// ≤ 1/2. For σ ≥ 1 (`geometric_in_blocks`) U is kept with probability
/// (1/t)·Σ_{u<t} e^{−u/t} ≥ 1 − e^{−1}; each try costs < 4 words for U (Lemire: at most two u64
/// draws on average) plus < 5 words for each of the ≤ e expected steps of its Bernoulli; V takes
/// 1/(1 − e^{−1}) Bernoulli(e^{−1}) trials of e − 1 words each; the sign one word. So the mean is
/// below 2·((4 + 5e + e − 1)/(1 − e^{−1}) + 1) < 64 words whatever σ; for σ < 1
/// (`geometric_by_trials`) it is below 30.
///
/// The result is conditioned on |Z| ≤ i64::MAX (a larger magnitude restarts the draw); for
/// num/den < 2^32 the excluded event has probability below exp(−2^31).
pub fn sample_discrete_laplace<R: Rng + ?Sized>(rng: &mut R, scale: RationalScale) -> i64 {
    loop {
        let y = sample_geometric(rng, scale);
        let negative = rng.next_u32() & 1 == 1;
        if negative && y == 0 {
            continue; // "−0": without this rejection zero would be twice as likely as it should.
        }
        let Ok(magnitude) = i64::try_from(y) else {
            continue;
        };
        return if negative { -magnitude } else { magnitude };
    }
}

/// Y with P(Y = y) = (1 − q)·q^y for y ≥ 0, q = e^{−den/num}: the magnitude of a discrete Laplace
/// draw before its sign, drawn exactly in whichever of the two ways described above stays cheap.
pub fn sample_geometric<R: Rng + ?Sized>(rng: &mut R, scale: RationalScale) -> u128 {
    // Lap_Z(t/s) depends on t/s only; the reduced pair keeps t small, so U takes one 32-bit word for
    // an integral σ, and none at σ = 1.
    let (t, s) = scale.reduced();
    if t < s {
        u128::from(geometric_by_trials(rng, s, t))
    } else {
        let x = geometric_in_blocks(rng, t);
        // s is a power of two for every scale from `round_up`: a shift, not a 128-bit division.
        if s.is_power_of_two() {
            x >> s.trailing_zeros()
        } else {
            x / u128::from(s)
        }
    }
}

/// X with P(X = x) ∝ e^{−x/t} for x ≥ 0 (CKS Algorithm 2): X = U + t·V where U, uniform below t, is
/// kept with probability e^{−U/t} and V ~ Geom(1 − e^{−1}). The cost does not depend on t.
fn geometric_in_blocks<R: Rng + ?Sized>(rng: &mut R, t: u64) -> u128 {
    let u = loop {
        let u = uniform_below(rng, t);
        if bernoulli_exp_at_most_one(rng, u, t) {
            break u;
        }
    };
    let mut v: u64 = 0;
    while bernoulli_exp_minus_one(rng) {
        v += 1;
    }
    // U + t·V < 2^64 + 2^64·2^64 fits a u128.
    u128::from(u) + u128::from(t) * u128::from(v)
}

/// Y with P(Y = y) ∝ e^{−y·s/t} for y ≥ 0: the successes of Bernoulli(e^{−s/t}) before the first
/// failure. For s > t there are fewer than 1/(1 − e^{−1}) trials on average, and each trial stops at
/// its first failed Bernoulli(e^{−1}), so the cost stays bounded however small t/s is.
fn geometric_by_trials<R: Rng + ?Sized>(rng: &mut R, s: u64, t: u64) -> u64 {
    let mut y = 0;
    while bernoulli_exp(rng, s, t) {
        y += 1;
    }
    y
}

/// Bernoulli(exp(−n/d)) for any n ≥ 0, d ≥ 1 (CKS Algorithm 1): exp(−γ) = exp(−1)^⌊γ⌋ · exp(−{γ}),
/// so ⌊γ⌋ independent Bernoulli(e^{−1}) must all succeed, then one for the fractional part.
fn bernoulli_exp<R: Rng + ?Sized>(rng: &mut R, n: u64, d: u64) -> bool {
    for _ in 0..n / d {
        if !bernoulli_exp_minus_one(rng) {
            return false;
        }
    }
    bernoulli_exp_at_most_one(rng, n % d, d)
}

/// Bernoulli(e^{−1}).
fn bernoulli_exp_minus_one<R: Rng + ?Sized>(rng: &mut R) -> bool {
    bernoulli_exp_at_most_one(rng, 1, 1)
}

/// Bernoulli(exp(−γ)) for γ = n/d ∈ [0, 1]: draw A_k ~ Bernoulli(γ/k) for k = 1, 2, … until one fails
/// at K; P(K > k) = γ^k/k!, so P(K odd) = Σ_k (−γ)^k/k! = e^{−γ}. Expected draws: e^γ ≤ e.
fn bernoulli_exp_at_most_one<R: Rng + ?Sized>(rng: &mut R, n: u64, d: u64) -> bool {
    debug_assert!(n <= d && d > 0);
    let mut k: u64 = 1;
    // Bernoulli(n/(d·k)) as the product Bernoulli(1/k)·Bernoulli(n/d): no d·k overflow to guard.
    while bernoulli_ratio(rng, 1, k) && bernoulli_ratio(rng, n, d) {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(n/d) for 0 ≤ n ≤ d, d ≥ 1; certain outcomes (n = 0 or n = d) draw nothing.
fn bernoulli_ratio<R: Rng + ?Sized>(rng: &mut R, n: u64, d: u64) -> bool {
    if n == 0 || n >= d {
        return n > 0;
    }
    uniform_below(rng, d) < n
}

/// A uniform integer in [0, bound), bound ≥ 1, without bias: Lemire's widening multiply with
/// rejection ("Fast random integer generation in an interval", 2019). Uses one 32-bit word when the
/// bound allows (ChaCha produces 32-bit words), and none for bound = 1.
pub(crate) fn uniform_below<R: Rng + ?Sized>(rng: &mut R, bound: u64) -> u64 {
    debug_assert!(bound > 0);
    if bound == 1 {
        return 0;
    }
    if let Ok(bound) = u32::try_from(bound) {
        let mut product = u64::from(rng.next_u32()) * u64::from(bound);
        if (product as u32) < bound {
            let threshold = bound.wrapping_neg() % bound; // 2^32 mod bound
            while (product as u32) < threshold {
                product = u64::from(rng.next_u32()) * u64::from(bound);
            }
        }
        return product >> 32;
    }
    let mut product = u128::from(rng.next_u64()) * u128::from(bound);
    if (product as u64) < bound {
        let threshold = bound.wrapping_neg() % bound; // 2^64 mod bound
        while (product as u64) < threshold {
            product = u128::from(rng.next_u64()) * u128::from(bound);
        }
    }
    (product >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::law_checks::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;
    use std::collections::BTreeMap;

    fn scale(sigma: f64) -> RationalScale {
        RationalScale::round_up(sigma).expect("a valid test scale")
    }

    fn draws(sigma: f64, count: usize, seed: u64) -> Vec<i64> {
        let mut rng = ChaCha12Rng::seed_from_u64(seed);
        let scale = scale(sigma);
        (0..count)
            .map(|_| sample_discrete_laplace(&mut rng, scale))
            .collect()
    }

    const FIT_SCALES: [f64; 5] = [0.3, 1.0, 2.5, 10.0, 37.7];
    const FIT_SAMPLES: usize = 60_000;

    /// The closed forms against the sums of the oracle's pmf over |z| ≤ 60σ + 60.
    #[test]
    fn variance_and_mean_absolute_are_the_pmfs() {
        for sigma in [0.2, 1.0, 7.5, 300.0] {
            let scale = scale(sigma);
            let law = Law::new(scale.to_f64());
            let (variance, mean_absolute) = (1..=(60.0 * sigma) as i64 + 60).fold((0.0, 0.0), |(v, m), z| {
                let twice = 2.0 * law.pmf(z);
                (v + twice * (z * z) as f64, m + twice * z as f64)
            });
            let closed = scale.variance();
            assert!((closed / variance - 1.0).abs() < 1e-9, "σ = {sigma}: {closed} against {variance}");
            assert!((scale.mean_absolute() / mean_absolute - 1.0).abs() < 1e-9, "σ = {sigma}: mean |Z|");
        }
    }

    #[test]
    fn histogram_fits_the_exact_pmf() {
        for (case, sigma) in FIT_SCALES.into_iter().enumerate() {
            let samples = draws(sigma, FIT_SAMPLES, 100 + case as u64);
            let p = goodness_of_fit_p_value(&samples, &Law::new(sigma));
            assert!(p >= MIN_P_VALUE, "σ = {sigma}: χ² p-value {p:e}");
        }
    }

    #[test]
    fn goodness_of_fit_rejects_a_scale_off_by_ten_percent() {
        // The test above must have power: the same samples judged against σ·1.1 and σ/1.1 fail.
        for (case, sigma) in FIT_SCALES.into_iter().enumerate() {
            let samples = draws(sigma, FIT_SAMPLES, 100 + case as u64);
            for wrong in [sigma * 1.1, sigma / 1.1] {
                let p = goodness_of_fit_p_value(&samples, &Law::new(wrong));
                assert!(p < MIN_P_VALUE, "σ = {sigma} passed as {wrong}: p = {p:e}");
            }
        }
    }

    #[test]
    fn moments_match_the_closed_forms() {
        for (case, sigma) in [0.5, 3.0, 100.0].into_iter().enumerate() {
            let law = Law::new(sigma);
            let samples = draws(sigma, 50_000, 200 + case as u64);
            let n = samples.len() as f64;
            let p0 = (1.0 - law.q) / (1.0 + law.q);
            let zeros = samples.iter().filter(|&&z| z == 0).count() as f64 / n;
            let p0_error = (p0 * (1.0 - p0) / n).sqrt();
            assert!(
                (zeros - p0).abs() <= STANDARD_ERRORS * p0_error,
                "σ = {sigma}: P(0) {zeros} vs {p0}"
            );
            let second = samples.iter().map(|&z| (z as f64).powi(2)).sum::<f64>() / n;
            let second_error = ((law.fourth_moment() - law.variance().powi(2)) / n).sqrt();
            assert!(
                (second - law.variance()).abs() <= STANDARD_ERRORS * second_error,
                "σ = {sigma}: Var {second} vs {}",
                law.variance()
            );
            let mean_abs = samples.iter().map(|&z| z.abs() as f64).sum::<f64>() / n;
            let mean_abs_error = ((law.variance() - law.mean_abs().powi(2)) / n).sqrt();
            assert!(
                (mean_abs - law.mean_abs()).abs() <= STANDARD_ERRORS * mean_abs_error,
                "σ = {sigma}: E|Z| {mean_abs} vs {}",
                law.mean_abs()
            );
        }
    }

    #[test]
    fn draws_are_symmetric_about_zero() {
        for (case, sigma) in [0.7, 2.5, 50.0].into_iter().enumerate() {
            let samples = draws(sigma, 50_000, 300 + case as u64);
            let mut by_value: BTreeMap<i64, i64> = BTreeMap::new();
            for &z in &samples {
                *by_value.entry(z).or_default() += 1;
            }
            let count = |z: i64| by_value.get(&z).copied().unwrap_or(0);
            let positive: i64 = by_value.range(1..).map(|(_, c)| c).sum();
            let negative: i64 = by_value.range(..0).map(|(_, c)| c).sum();
            let balanced = |a: i64, b: i64| {
                ((a - b).abs() as f64) <= STANDARD_ERRORS * ((a + b) as f64).sqrt()
            };
            assert!(
                balanced(positive, negative),
                "σ = {sigma}: {positive} positive, {negative} negative"
            );
            for z in 1..=3 {
                assert!(
                    balanced(count(z), count(-z)),
                    "σ = {sigma}: {} at {z}, {} at {}",
                    count(z),
                    count(-z),
                    -z
                );
            }
            let mean = samples.iter().sum::<i64>() as f64 / samples.len() as f64;
            let mean_error = (Law::new(sigma).variance() / samples.len() as f64).sqrt();
            assert!(
                mean.abs() <= STANDARD_ERRORS * mean_error,
                "σ = {sigma}: mean {mean}"
            );
        }
    }

    #[test]
    fn tiny_and_huge_scales_have_the_right_law() {
        // σ = 0.05: P(Z ≠ 0) = 2q/(1+q) ≈ 4e−9, so every draw is 0.
        assert!(draws(0.05, 20_000, 400).iter().all(|&z| z == 0));
        // σ = 10^6: E|Z| ≈ σ.
        let sigma = 1e6;
        let law = Law::new(sigma);
        let samples = draws(sigma, 20_000, 401);
        let n = samples.len() as f64;
        let mean_abs = samples.iter().map(|&z| z.abs() as f64).sum::<f64>() / n;
        let error = ((law.variance() - law.mean_abs().powi(2)) / n).sqrt();
        assert!(
            (mean_abs - law.mean_abs()).abs() <= STANDARD_ERRORS * error,
            "E|Z| = {mean_abs}"
        );
    }

    /// Counts the 32-bit words drawn (a u64 counts two).
    struct CountingRng {
        inner: ChaCha12Rng,
        words: u64,
    }

    impl rand::TryRng for CountingRng {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            self.words += 1;
            Ok(self.inner.next_u32())
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            self.words += 2;
            Ok(self.inner.next_u64())
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            self.words += dst.len().div_ceil(4) as u64;
            self.inner.fill_bytes(dst);
            Ok(())
        }
    }

    #[test]
    fn rng_words_per_sample_stay_bounded_for_tiny_and_huge_scales() {
        let count = 20_000;
        for (sigma, seed) in [
            (1e-6, 505),
            (0.05, 500),
            (0.99, 506),
            (1.0, 501),
            (37.7, 502),
            (1e6, 503),
            (3e9, 504),
        ] {
            let mut rng = CountingRng {
                inner: ChaCha12Rng::seed_from_u64(seed),
                words: 0,
            };
            let scale = scale(sigma);
            for _ in 0..count {
                sample_discrete_laplace(&mut rng, scale);
            }
            let per_sample = rng.words as f64 / count as f64;
            // The documented bound is 64; measured 5.5–12.3.
            assert!(
                per_sample < 16.0,
                "σ = {sigma}: {per_sample} words per sample"
            );
        }
    }

    #[test]
    fn bernoulli_exp_has_the_right_frequencies() {
        let mut rng = ChaCha12Rng::seed_from_u64(600);
        assert!(
            (0..1000).all(|_| bernoulli_exp(&mut rng, 0, 7)),
            "exp(0) = 1 must always succeed"
        );
        let trials = 40_000;
        for (n, d) in [
            (1, 3),
            (1, 1),
            (7, 5),
            (5, 2),
            (6, 2),
            (1 << 63, u64::MAX),
            (3 << 62, 1 << 62),
        ] {
            let expected = (-(n as f64) / d as f64).exp();
            let hits = (0..trials)
                .filter(|_| bernoulli_exp(&mut rng, n, d))
                .count() as f64;
            let error = (expected * (1.0 - expected) / trials as f64).sqrt();
            let observed = hits / trials as f64;
            assert!(
                (observed - expected).abs() <= STANDARD_ERRORS * error,
                "γ = {n}/{d}: {observed} vs {expected}"
            );
        }
    }

    #[test]
    fn uniform_below_is_unbiased_where_a_modulo_would_not_be() {
        // x mod bound would give the first third of [0, bound) probability 1/2 for these bounds.
        let mut rng = ChaCha12Rng::seed_from_u64(700);
        let trials = 30_000;
        for bound in [3u64 << 30, 3u64 << 62, 6] {
            let mut thirds = [0u64; 3];
            for _ in 0..trials {
                let value = uniform_below(&mut rng, bound);
                assert!(value < bound);
                thirds[(u128::from(value) * 3 / u128::from(bound)) as usize] += 1;
            }
            let expected = trials as f64 / 3.0;
            let error = (trials as f64 * (1.0 / 3.0) * (2.0 / 3.0)).sqrt();
            for third in thirds {
                assert!(
                    (third as f64 - expected).abs() <= STANDARD_ERRORS * error,
                    "bound {bound}: {thirds:?}"
                );
            }
        }
    }

    /// sigma = mantissa · 2^exponent exactly, decoded from the bits (independent of f64 arithmetic).
    fn decode(sigma: f64) -> (u64, i32) {
        let bits = sigma.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let fraction = bits & ((1 << 52) - 1);
        if biased == 0 {
            (fraction, -1074)
        } else {
            (fraction | 1 << 52, biased - 1075)
        }
    }

    #[test]
    fn round_up_is_the_smallest_dyadic_at_or_above_sigma() {
        let den_bits = RationalScale::DENOMINATOR_BITS;
        for sigma in [
            1e-300,
            5e-324,
            1e-12,
            0.05,
            0.1,
            1.0 / 3.0,
            1.0,
            2.5,
            37.7,
            1e6,
            123456.789,
            4.0e9,
        ] {
            let scale = RationalScale::round_up(sigma).expect("in range");
            assert_eq!(scale.den(), 1u64 << den_bits);
            // Compare num with sigma·2^den_bits = mantissa·2^(exponent + den_bits) in exact integers:
            // need num − 1 < sigma·2^32 ≤ num.
            let (mantissa, exponent) = decode(sigma);
            let shift = exponent + den_bits as i32;
            let (lhs_num, rhs_sigma) = if shift >= 0 {
                (u128::from(scale.num()), u128::from(mantissa) << shift)
            } else if -shift < 128 - 64 {
                (u128::from(scale.num()) << -shift, u128::from(mantissa))
            } else {
                // sigma < 2^−32 by far: the only candidate is num = 1.
                assert_eq!(scale.num(), 1, "σ = {sigma:e}");
                continue;
            };
            let step = if shift >= 0 { 1 } else { 1u128 << -shift };
            assert!(lhs_num >= rhs_sigma, "σ = {sigma}: num/den below σ");
            assert!(lhs_num - step < rhs_sigma, "σ = {sigma}: not the smallest");
            // And the excess is below 2^−DENOMINATOR_BITS (what the report promises).
            assert!(scale.to_f64() - sigma < 2f64.powi(-(den_bits as i32)) + sigma * 1e-15);
        }
        for bad in [
            0.0,
            -0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            RationalScale::MAX_SCALE,
            1e10,
            f64::MAX,
        ] {
            assert_eq!(RationalScale::round_up(bad), None, "σ = {bad}");
        }
        let largest_below = f64::from_bits(RationalScale::MAX_SCALE.to_bits() - 1);
        assert!(RationalScale::round_up(largest_below).is_some());
    }

    #[test]
    fn new_rejects_zero_and_keeps_the_ratio() {
        assert_eq!(RationalScale::new(0, 4), None);
        assert_eq!(RationalScale::new(4, 0), None);
        let scale = RationalScale::new(3, 8).expect("valid");
        assert_eq!((scale.num(), scale.den(), scale.to_f64()), (3, 8, 0.375));
        assert_eq!(
            RationalScale::new(u64::MAX, 1).map(|s| s.num()),
            Some(u64::MAX)
        );
    }

    #[test]
    fn odd_denominators_give_the_same_law() {
        // Through `new`, with no power-of-two denominator: σ = 5/3 (drawn in blocks, Y = ⌊X/3⌋ by
        // division) and σ = 4/5 (drawn by trials).
        for (num, den, seed) in [(5, 3, 800), (4, 5, 801)] {
            let mut rng = ChaCha12Rng::seed_from_u64(seed);
            let scale = RationalScale::new(num, den).expect("valid");
            let samples: Vec<i64> = (0..FIT_SAMPLES)
                .map(|_| sample_discrete_laplace(&mut rng, scale))
                .collect();
            let p = goodness_of_fit_p_value(&samples, &Law::new(num as f64 / den as f64));
            assert!(p >= MIN_P_VALUE, "σ = {num}/{den}: p = {p:e}");
        }
    }
}
