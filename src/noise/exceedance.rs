//! The first of n independent Lap_Z(σ) draws that reaches a level K ≥ 1, found without making the n
//! draws: the online counters' threshold checks (Sparse Vector style, one fresh draw per step) almost
//! never fire in a sparse cell, and drawing them one by one costs the stream ε·T² draws.
//!
//! # Why the law is exact
//! p = P(Z ≥ K) = q^K/(1 + q) with q = e^{−1/σ}, and c = 1 − p. The index I of the first draw ≥ K
//! (0-based) has P(I ≥ i) = c^i, and no draw reaches K with probability c^n. For W uniform on (0, 1),
//! I = i ⟺ c^{i+1} < W ≤ c^i and "none" ⟺ W ≤ c^n give exactly that law. W is drawn 64 bits at a
//! time and compared with integer bounds on c^j (big-integer arithmetic, directed rounding, from the
//! bounds on e^{−x} of [`exp_neg_bounds`]) until the comparison is certain; c^j is irrational, so
//! W = c^j has probability 0 and the refinement ends with probability 1.
//!
//! The common case costs one 64-bit word: when the run is rare (n·p ≤ 2^−[`RARE_BITS`], certified by
//! [`is_rare`]), Bernoulli's inequality gives c^n ≥ 1 − n·p ≥ 1 − 2^−32, so any first word below
//! 2^64 − 2^32 already puts W below c^n. Only the other 2^−32 of the words go to the big integers.

use num_bigint::BigUint;
use num_traits::One;
use rand::Rng;

use crate::noise::discrete_laplace::RationalScale;
use crate::noise::laplace_table::{ceil_div, ceil_shift, exp_neg_bounds};

/// A run of checks is rare when the chance that any of them fires is at most 2^−RARE_BITS.
pub const RARE_BITS: u32 = 32;

/// Whether n = `trials` draws of Lap_Z(`scale`) reach `level` with probability at most 2^−RARE_BITS,
/// certified: n·p ≤ n·q^K = e^{ln n − K/σ}, and the floating-point margin (10^−9 relative) is far
/// above the rounding of the few operations below (a few 10^−16 relative).
pub fn is_rare(scale: RationalScale, level: u64, trials: u64) -> bool {
    let (t, s) = scale.reduced();
    let exponent = level as f64 * s as f64 / t as f64;
    exponent * (1.0 - 1e-9)
        >= (trials.max(1) as f64).ln() + f64::from(RARE_BITS) * std::f64::consts::LN_2 + 1e-9
}

/// The index of the first of `trials` draws of Lap_Z(`scale`) that is ≥ `level` (≥ 1), or `None`, with
/// exactly the law of drawing them one by one. The run must be rare ([`is_rare`]).
pub fn first_rare_exceedance<R: Rng + ?Sized>(
    rng: &mut R,
    scale: RationalScale,
    level: u64,
    trials: u64,
) -> Option<u64> {
    debug_assert!(is_rare(scale, level, trials), "a run that is not rare");
    first_exceedance_after_quick_word(rng, scale, level, trials, RARE_BITS)
}

/// The index of the first of `trials` draws of Lap_Z(`scale`) that is ≥ `level` (≥ 1), or `None`, with
/// exactly the law of drawing them one by one, for any run, rare or not. A rare run costs one word
/// ([`first_rare_exceedance`]); another is decided by inverting the same W in floating point: the index
/// is ⌊x⌋ for x = ln W / ln c (W ≤ c^i ⟺ x ≥ i), and W's first word brackets x. When the bracket,
/// widened far beyond the rounding of the few operations (10^−9 relative), holds no integer, ⌊x⌋ is
/// certain; otherwise the big-integer comparisons decide from the same W, so the law stays exact.
pub fn first_exceedance<R: Rng + ?Sized>(
    rng: &mut R,
    scale: RationalScale,
    level: u64,
    trials: u64,
) -> Option<u64> {
    assert!(level >= 1, "the level of an exceedance run is at least 1");
    if is_rare(scale, level, trials) {
        return first_rare_exceedance(rng, scale, level, trials);
    }
    let word = rng.next_u64();
    match certified_inversion(scale, level, trials, word) {
        Some(decided) => decided,
        None => locate(&mut LazyUniform::new(word), rng, scale, level, trials),
    }
}

/// The first index ⌊ln W / ln c⌋ (`Some(None)`: none below `trials`) for W in [word, word + 1]·2^−64,
/// when the floating-point bracket decides it; `None` when W's further bits are needed.
fn certified_inversion(scale: RationalScale, level: u64, trials: u64, word: u64) -> Option<Option<u64>> {
    const MARGIN: f64 = 1e-9;
    let (numerator, denominator) = scale.reduced();
    let inverse_scale = denominator as f64 / numerator as f64;
    // p = q^K/(1 + q) and ln c = ln(1 − p), both < 0 side kept as magnitudes.
    let p = (-(level as f64) * inverse_scale).exp() / (1.0 + (-inverse_scale).exp());
    let log_c = -(-p).ln_1p();
    // −ln W at both ends of W's bracket, from 1 − W (exact in u128) so that W near 1 keeps its precision.
    let minus_log = |gap: u128| -(-(gap as f64) * 2f64.powi(-64)).ln_1p();
    let two_64 = 1u128 << 64;
    let low = minus_log(two_64 - u128::from(word) - 1) / log_c * (1.0 - MARGIN) - MARGIN;
    let high = if word == 0 {
        f64::INFINITY
    } else {
        minus_log(two_64 - u128::from(word)) / log_c * (1.0 + MARGIN) + MARGIN
    };
    if low >= trials as f64 {
        return Some(None);
    }
    let index = low.max(0.0).floor();
    (high < index + 1.0).then_some(Some(index as u64))
}

/// [`first_rare_exceedance`] for runs with n·p ≤ 2^−`quick_bits` (tests use few bits, so that the
/// big-integer path is taken often enough to check its law).
fn first_exceedance_after_quick_word<R: Rng + ?Sized>(
    rng: &mut R,
    scale: RationalScale,
    level: u64,
    trials: u64,
    quick_bits: u32,
) -> Option<u64> {
    let word = rng.next_u64();
    let all_ones = (1u64 << quick_bits) - 1;
    if word >> (64 - quick_bits) != all_ones {
        // W < (word + 1)·2^−64 ≤ 1 − 2^−quick_bits ≤ 1 − n·p ≤ c^n.
        return None;
    }
    locate(&mut LazyUniform::new(word), rng, scale, level, trials)
}

/// The first index from W's comparisons with c^j, for any `level` ≥ 1 (no rarity needed).
fn locate<R: Rng + ?Sized>(
    uniform: &mut LazyUniform,
    rng: &mut R,
    scale: RationalScale,
    level: u64,
    trials: u64,
) -> Option<u64> {
    assert!(level >= 1, "the level of an exceedance run is at least 1");
    if trials == 0 || !uniform.exceeds(rng, |bits| power_bounds(scale, level, trials, bits)) {
        return None;
    }
    // W > c^trials and W ≤ c^0 = 1: the smallest j with W > c^j lies in [1, trials], and I = j − 1.
    let (mut low, mut high) = (1u64, trials);
    while low < high {
        let middle = low + (high - low) / 2;
        if uniform.exceeds(rng, |bits| power_bounds(scale, level, middle, bits)) {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    Some(low - 1)
}

/// A uniform W on (0, 1) of which the first `bits` bits (`prefix`) have been drawn.
struct LazyUniform {
    prefix: BigUint,
    bits: u32,
}

impl LazyUniform {
    fn new(first_word: u64) -> Self {
        LazyUniform {
            prefix: BigUint::from(first_word),
            bits: 64,
        }
    }

    /// Whether W > τ, where `bounds(b)` gives integers low ≤ 2^b·τ ≤ high: draws further bits of W
    /// until the bounds at W's precision decide it.
    fn exceeds<R: Rng + ?Sized>(&mut self, rng: &mut R, bounds: impl Fn(u32) -> (BigUint, BigUint)) -> bool {
        loop {
            let (low, high) = bounds(self.bits);
            if self.prefix >= high {
                return true;
            }
            // prefix + 1 <= low: on integers, prefix < low.
            if self.prefix < low {
                return false;
            }
            self.prefix = (std::mem::take(&mut self.prefix) << 64u32) + rng.next_u64();
            self.bits += 64;
        }
    }
}

/// Integers low ≤ 2^bits·c^j ≤ high for c = 1 − q^K/(1 + q). The working precision carries
/// 16 + bitlen(j) guard bits: the bracket of c is a few units wide and the power multiplies its
/// relative width by about j, plus one unit per product.
fn power_bounds(scale: RationalScale, level: u64, j: u64, bits: u32) -> (BigUint, BigUint) {
    let guard = 16 + (u64::BITS - j.leading_zeros());
    let working = bits + guard;
    let (t, s) = scale.reduced();
    let (t, s) = (BigUint::from(t), BigUint::from(s));
    let (q_low, q_high) = exp_neg_bounds(&s, &t, working);
    let (e_low, e_high) = exp_neg_bounds(&(&s * level), &t, working);
    let one = BigUint::one() << working;
    let p_low = (&e_low << working) / (&one + &q_high);
    let p_high = ceil_div(&(&e_high << working), &(&one + &q_low));
    let c_low = if p_high >= one { BigUint::default() } else { &one - &p_high };
    let c_high = &one - &p_low.min(one.clone());
    let (mut low, mut high) = (one.clone(), one);
    let (mut base_low, mut base_high) = (c_low, c_high);
    let mut exponent = j;
    while exponent > 0 {
        if exponent & 1 == 1 {
            low = (&low * &base_low) >> working;
            high = ceil_shift(&(&high * &base_high), working);
        }
        exponent >>= 1;
        if exponent > 0 {
            base_low = (&base_low * &base_low) >> working;
            base_high = ceil_shift(&(&base_high * &base_high), working);
        }
    }
    (low >> guard, ceil_shift(&high, guard))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::discrete_laplace::sample_discrete_laplace;
    use crate::noise::law_checks::{chi_square_p_value, MIN_P_VALUE};
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    fn scale(sigma: f64) -> RationalScale {
        RationalScale::round_up(sigma).unwrap()
    }

    /// P(I = i) for i < n and P(none) last, in f64 from the closed form.
    fn exact_law(sigma: f64, level: u64, trials: u64) -> Vec<f64> {
        let q = (-1.0 / sigma).exp();
        let p = q.powi(level as i32) / (1.0 + q);
        let c = 1.0 - p;
        let mut law: Vec<f64> = (0..trials).map(|i| c.powi(i as i32) * p).collect();
        law.push(c.powi(trials as i32));
        law
    }

    /// χ² p-value of the outcomes (index, or `trials` for none) against `law`, bins merged to ≥ 5.
    fn p_value(outcomes: &[u64], law: &[f64]) -> f64 {
        let runs = outcomes.len() as f64;
        let mut observed = vec![0f64; law.len()];
        for &outcome in outcomes {
            observed[outcome as usize] += 1.0;
        }
        let mut bins: Vec<(f64, f64)> = Vec::new();
        let mut open = (0.0, 0.0);
        for (probability, seen) in law.iter().zip(&observed) {
            open = (open.0 + runs * probability, open.1 + seen);
            if open.0 >= 5.0 {
                bins.push(open);
                open = (0.0, 0.0);
            }
        }
        let last = bins.last_mut().unwrap();
        *last = (last.0 + open.0, last.1 + open.1);
        assert!(bins.len() >= 3, "too few bins");
        let statistic: f64 = bins.iter().map(|(e, o)| (o - e) * (o - e) / e).sum();
        chi_square_p_value(statistic, bins.len() - 1)
    }

    #[test]
    fn the_big_integer_path_has_the_law_of_drawing_one_by_one() {
        // Moderate p, so that every index is seen: the comparisons against c^j decide everything.
        for (sigma, level, trials) in [(2.0, 1u64, 12u64), (0.7, 2, 5), (5.0, 3, 30)] {
            let mut rng = ChaCha12Rng::seed_from_u64(level);
            let outcomes: Vec<u64> = (0..40_000)
                .map(|_| {
                    let mut uniform = LazyUniform::new(rng.next_u64());
                    locate(&mut uniform, &mut rng, scale(sigma), level, trials).unwrap_or(trials)
                })
                .collect();
            let p = p_value(&outcomes, &exact_law(sigma, level, trials));
            assert!(p > MIN_P_VALUE, "σ = {sigma}, K = {level}, n = {trials}: p-value {p}");
            // The same law as the one-by-one draws it replaces.
            let direct: Vec<u64> = (0..40_000)
                .map(|_| {
                    (0..trials)
                        .find(|_| sample_discrete_laplace(&mut rng, scale(sigma)) >= level as i64)
                        .unwrap_or(trials)
                })
                .collect();
            assert!(p_value(&direct, &exact_law(sigma, level, trials)) > MIN_P_VALUE);
        }
    }

    #[test]
    fn the_quick_word_and_the_big_integers_together_keep_the_law() {
        // n·q^K ≤ 2^−3 here, so 1 word in 8 takes the big-integer path.
        let (sigma, level, trials) = (1.0, 6u64, 20u64);
        assert!(trials as f64 * (-(level as f64) / sigma).exp() <= 0.125);
        let mut rng = ChaCha12Rng::seed_from_u64(9);
        let outcomes: Vec<u64> = (0..400_000)
            .map(|_| {
                first_exceedance_after_quick_word(&mut rng, scale(sigma), level, trials, 3)
                    .unwrap_or(trials)
            })
            .collect();
        let p = p_value(&outcomes, &exact_law(sigma, level, trials));
        assert!(p > MIN_P_VALUE, "p-value {p}");
        // A wrong level (K − 1) is told apart: the test has power.
        let wrong = p_value(&outcomes, &exact_law(sigma, level - 1, trials));
        assert!(wrong < MIN_P_VALUE, "K − 1 was not told apart: p-value {wrong}");
    }

    #[test]
    fn the_certified_inversion_decides_as_the_big_integers_do_and_keeps_the_law() {
        // Runs that are not rare, some with indices in the thousands: the floating-point inversion and
        // the exact comparisons read the same W, so they must agree wherever the inversion decides.
        for (sigma, level, trials) in [(4.0, 3u64, 40u64), (400.0, 2_000, 100_000), (2.0, 1, 6)] {
            assert!(!is_rare(scale(sigma), level, trials));
            let mut rng = ChaCha12Rng::seed_from_u64(level);
            let mut decided = 0;
            for _ in 0..20_000 {
                let word = rng.next_u64();
                let mut exact_rng = rng.clone();
                let exact = locate(&mut LazyUniform::new(word), &mut exact_rng, scale(sigma), level, trials);
                if let Some(inverted) = certified_inversion(scale(sigma), level, trials, word) {
                    assert_eq!(inverted, exact, "σ = {sigma}, K = {level}, n = {trials}, word {word}");
                    decided += 1;
                }
            }
            assert!(decided > 19_900, "the inversion decided only {decided} of 20 000");
        }
        // Its outcomes have the exact law; a halved scale is told apart.
        let (sigma, level, trials) = (3.0, 2u64, 25u64);
        let mut rng = ChaCha12Rng::seed_from_u64(11);
        let outcomes: Vec<u64> = (0..100_000)
            .map(|_| first_exceedance(&mut rng, scale(sigma), level, trials).unwrap_or(trials))
            .collect();
        let p = p_value(&outcomes, &exact_law(sigma, level, trials));
        assert!(p > MIN_P_VALUE, "p-value {p}");
        let halved = p_value(&outcomes, &exact_law(sigma / 2.0, level, trials));
        assert!(halved < MIN_P_VALUE, "a halved scale was not told apart: p-value {halved}");
    }

    #[test]
    fn rarity_is_certified_only_when_the_run_is_rare() {
        let sigma = scale(10.0);
        // n q^K = 4096·e^{−K/10}: below 2^−32 from K/10 ≥ ln 4096 + 32 ln 2 ≈ 30.5.
        assert!(is_rare(sigma, 306, 4096));
        assert!(!is_rare(sigma, 304, 4096));
        assert!(!is_rare(sigma, 1, 1));
        // Where certified rare, the exact probability is indeed below 2^−32.
        let q: f64 = (-1.0f64 / 10.0).exp();
        assert!(4096.0 * q.powi(306) / (1.0 + q) <= 2f64.powi(-32));
    }

    #[test]
    fn power_bounds_bracket_the_power_and_tighten_with_precision() {
        let (sigma, level, j) = (3.0, 2u64, 1000u64);
        let q = (-1.0f64 / sigma).exp();
        let c = 1.0 - q.powi(level as i32) / (1.0 + q);
        let exact = c.powi(j as i32);
        for bits in [64u32, 128, 256] {
            let (low, high) = power_bounds(scale(sigma), level, j, bits);
            assert!(low <= high);
            let width = &high - &low;
            assert!(width <= BigUint::from(4u32), "bracket {width} units wide at {bits} bits");
            if bits == 64 {
                let (low, high) = (u64::try_from(&low).unwrap(), u64::try_from(&high).unwrap());
                let scaled = exact * 2f64.powi(64);
                assert!((low as f64) <= scaled * (1.0 + 1e-12) && scaled <= high as f64 * (1.0 + 1e-12));
            }
        }
    }
}
