//! Exact discrete Laplace draws at table speed, for the many cells that share one noise scale (a PMM
//! level, PSMM's grid). The output law is exactly the one of
//! [`sample_discrete_laplace`](crate::noise::discrete_laplace::sample_discrete_laplace),
//! P(Z = z) = (1 − q)/(1 + q)·q^{|z|} with q = e^{−1/σ}; only the way the random bits are spent differs.
//!
//! # The method: inversion against rigorous bounds, refined exactly where they are not enough
//! Let M = |Z|. P(M ≥ m + 1) = 2q^{m+1}/(1 + q) =: τ_m, so for W uniform on (0, 1),
//! M = min{m ≥ 0 : W > τ_m} has the law of |Z| (τ decreases in m and τ_{−1} = 2/(1 + q) > 1), and a
//! fair sign on M ≥ 1 gives Z. One 64-bit word gives the sign (its top bit) and the first 63 bits w of
//! W, so W ∈ [w, w + 1)·2^−63.
//!
//! The table holds, for m < K, integers `lower[m]` ≤ 2^63·τ_m ≤ `upper[m]`, computed with integer
//! arithmetic and directed rounding from big-integer bounds on q (never a floating-point exp). The
//! first m with w ≥ `upper[m]` is found by a guide table and a binary search; then W > τ_m for
//! certain. If moreover w + 1 ≤ `lower[m − 1]`, W < τ_{m−1} for certain and M = m: the common case.
//! Otherwise W and τ_{m−1} are too close to tell from 63 bits, and [`uniform_exceeds_threshold`] draws
//! further bits of W, 64 at a time, against bounds on τ_{m−1} computed at the same precision, until
//! the comparison is certain. τ_m is irrational (q is transcendental by Lindemann's theorem), so W = τ
//! has probability 0 and the refinement ends with probability 1 (each round continues with
//! probability about 2^−60). The table's bounds are separated (`upper[m + 1]` ≤ `lower[m]`), so only
//! the one threshold τ_{m−1} can be undecided. Every decision is therefore the one the real W makes:
//! M has exactly the law above.
//!
//! The tail: if W < τ_{K−1}, M ≥ K, and by memorylessness M − K given M ≥ K is geometric with ratio
//! q, drawn exactly by [`sample_geometric`] with fresh bits. K is where τ drops below 2^−12, so that
//! path costs the slow sampler's price once in 4096 draws.
//!
//! Cost: one ChaCha word and a few comparisons per draw, against 8–12 words and their arithmetic for
//! the rejection sampler. Building a table costs about K ≈ 9σ big-integer products, so it pays only
//! for a scale shared by many cells; [`ScaleSampler`] picks the table for the scales it covers.

use num_bigint::BigUint;
use num_traits::{CheckedSub, One, Zero};
use rand::Rng;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::noise::discrete_laplace::{sample_discrete_laplace, sample_geometric, RationalScale};

/// Bits of W in the table's fixed point (the 64th bit of the word is the sign).
const W_BITS: u32 = 63;
/// The table ends after the first threshold below 2^−TAIL_BITS: the tail path runs that rarely.
const TAIL_BITS: u32 = 12;
/// At most this many thresholds (σ up to about 1800 reaches the 2^−12 tail within it).
const MAX_ENTRIES: usize = 1 << 14;
/// Guide buckets: the top GUIDE_BITS bits of w narrow the search to a few thresholds.
const GUIDE_BITS: u32 = 12;
/// Bits of the big-integer bounds the table is built from: the accumulated rounding after K ≤ 2^14
/// products is below 2^−110, far inside the 2^−63 grid of the table.
const BUILD_BITS: u32 = 128;
/// Scales the table serves. Below, the rejection sampler needs few words anyway and the exponent 1/σ of
/// the bounds grows; above, the table would not reach its tail.
const MIN_TABLE_SCALE: f64 = 0.25;
const MAX_TABLE_SCALE: f64 = 1800.0;

/// Draws Lap_Z(σ) for one fixed σ: by table where [`LaplaceTable`] covers σ, else by the rejection
/// sampler. Either way the law is exactly Lap_Z(σ); which one runs depends only on σ.
pub enum ScaleSampler {
    Table(Arc<LaplaceTable>),
    Direct(RationalScale),
}

impl ScaleSampler {
    pub fn new(scale: RationalScale) -> Self {
        let sigma = scale.to_f64();
        if (MIN_TABLE_SCALE..=MAX_TABLE_SCALE).contains(&sigma) {
            ScaleSampler::Table(shared_table(scale))
        } else {
            ScaleSampler::Direct(scale)
        }
    }

    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        match self {
            ScaleSampler::Table(table) => table.sample(rng),
            ScaleSampler::Direct(scale) => sample_discrete_laplace(rng, *scale),
        }
    }

    /// Each of `counts` plus one draw, in order from `rng`: every cell noised, empty ones included (a flat
    /// noisy histogram: the pair histograms, the flat 1-D marginals).
    pub fn noisy_counts<R: Rng + ?Sized>(&self, counts: &[u64], rng: &mut R) -> Vec<i64> {
        counts.iter().map(|&count| count as i64 + self.sample(rng)).collect()
    }
}

/// The most tables [`shared_table`] keeps (about 300 kB each); past it the cache starts again.
const SHARED_TABLES: usize = 64;

/// The table of `scale`, built once per process and shared: a release noises every level of every column's
/// marginal tree and each pair histogram at a handful of scales, and building a table (big-integer bounds
/// on 2^14 thresholds) took 5% of a 64-column run when each call built its own. A table is a function of
/// its scale alone, so sharing it changes no draw.
fn shared_table(scale: RationalScale) -> Arc<LaplaceTable> {
    static TABLES: OnceLock<Mutex<HashMap<(u64, u64), Arc<LaplaceTable>>>> = OnceLock::new();
    let key = scale.reduced();
    let tables = TABLES.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(table) = tables.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(&key) {
        return table.clone();
    }
    // Built outside the lock: two threads asking for a new scale at once build the same table twice.
    let table = Arc::new(LaplaceTable::new(scale));
    let mut tables = tables.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if tables.len() >= SHARED_TABLES {
        tables.clear();
    }
    tables.entry(key).or_insert(table).clone()
}

/// The thresholds τ_m of one scale, bracketed in 2^−63 units, with a guide to search them.
pub struct LaplaceTable {
    scale: RationalScale,
    /// `lower[m]` ≤ 2^63·τ_m ≤ `upper[m]`, both decreasing in m.
    lower: Vec<u64>,
    upper: Vec<u64>,
    /// For each bucket of w's top bits, the range of m where the first `upper[m]` ≤ w can be.
    guide: Vec<(u32, u32)>,
}

impl LaplaceTable {
    pub fn new(scale: RationalScale) -> Self {
        Self::with_max_entries(scale, MAX_ENTRIES)
    }

    /// A table of at most `max_entries` thresholds (fewer sends more draws down the exact tail path;
    /// tests use that to exercise it).
    pub fn with_max_entries(scale: RationalScale, max_entries: usize) -> Self {
        let (t, s) = scale.reduced();
        let (q_low, q_high) = exp_neg_bounds(&BigUint::from(s), &BigUint::from(t), BUILD_BITS);
        let one = BigUint::one() << BUILD_BITS;
        // τ_0 = 2q/(1 + q), bracketed with directed rounding.
        let mut low = (&q_low << (BUILD_BITS + 1)) / (&one + &q_high);
        let mut high = ceil_div(&(&q_high << (BUILD_BITS + 1)), &(&one + &q_low));
        let (mut lower, mut upper) = (Vec::new(), Vec::new());
        let to_table = BUILD_BITS - W_BITS;
        let tail = 1u64 << (W_BITS - TAIL_BITS);
        while lower.len() < max_entries {
            let entry_low = u64::try_from(&low >> to_table).expect("τ < 1");
            let entry_high = u64::try_from(ceil_shift(&high, to_table)).expect("τ < 1");
            // Only one threshold may be undecided for a given w (see the module comment).
            if lower.last().is_some_and(|&previous| entry_high > previous) {
                break;
            }
            lower.push(entry_low);
            upper.push(entry_high);
            if entry_high < tail {
                break;
            }
            // τ_{m+1} = τ_m·q.
            low = (&low * &q_low) >> BUILD_BITS;
            high = ceil_shift(&(&high * &q_high), BUILD_BITS);
        }
        let guide = (0..1u64 << GUIDE_BITS)
            .map(|bucket| {
                let smallest_w = bucket << (W_BITS - GUIDE_BITS);
                let largest_w = smallest_w + (1 << (W_BITS - GUIDE_BITS)) - 1;
                let first_at_most =
                    |w: u64| upper.partition_point(|&threshold| threshold > w) as u32;
                (first_at_most(largest_w), first_at_most(smallest_w))
            })
            .collect();
        LaplaceTable {
            scale,
            lower,
            upper,
            guide,
        }
    }

    /// One exact draw of Lap_Z(σ).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        loop {
            let word = rng.next_u64();
            let negative = word >> W_BITS == 1;
            let w = word & ((1 << W_BITS) - 1);
            let (start, end) = self.guide[(w >> (W_BITS - GUIDE_BITS)) as usize];
            let (start, end) = (start as usize, end as usize);
            // The first m with upper[m] ≤ w: W > τ_m for certain (or m = K: no such threshold).
            let first = start + self.upper[start..end].partition_point(|&threshold| threshold > w);
            let magnitude = if first > 0
                && w + 1 > self.lower[first - 1]
                && uniform_exceeds_threshold(rng, w, first - 1, self.scale)
            {
                first as u128 - 1
            } else if first < self.upper.len() {
                first as u128
            } else {
                self.upper.len() as u128 + sample_geometric(rng, self.scale)
            };
            // As the rejection sampler: the law is conditioned on |Z| ≤ i64::MAX.
            let Ok(magnitude) = i64::try_from(magnitude) else {
                continue;
            };
            return if negative { -magnitude } else { magnitude };
        }
    }

    /// The number of thresholds K.
    #[cfg(test)]
    #[allow(clippy::len_without_is_empty)] // a table has at least one threshold
    pub fn len(&self) -> usize {
        self.upper.len()
    }
}

/// Whether W > τ_m, for W uniform with first 63 bits `w`: draws further bits of W until bounds on τ_m
/// at the same precision decide it.
fn uniform_exceeds_threshold<R: Rng + ?Sized>(
    rng: &mut R,
    w: u64,
    m: usize,
    scale: RationalScale,
) -> bool {
    let mut prefix = BigUint::from(w);
    let mut bits = W_BITS;
    loop {
        prefix = (prefix << 64u32) + rng.next_u64();
        bits += 64;
        let (low, high) = threshold_bounds(m, scale, bits);
        if prefix >= high {
            return true;
        }
        // prefix + 1 <= low: on integers, prefix < low.
        if prefix < low {
            return false;
        }
    }
}

/// Integers `low` ≤ 2^bits·τ_m ≤ `high`, τ_m = 2e^{−(m+1)s/t}/(1 + e^{−s/t}), straight from the
/// definition (not the table's running product).
fn threshold_bounds(m: usize, scale: RationalScale, bits: u32) -> (BigUint, BigUint) {
    const GUARD: u32 = 4;
    let (t, s) = scale.reduced();
    let working = bits + GUARD;
    let t = BigUint::from(t);
    let s = BigUint::from(s);
    let (e_low, e_high) = exp_neg_bounds(&(&s * (m as u64 + 1)), &t, working);
    let (q_low, q_high) = exp_neg_bounds(&s, &t, working);
    let one = BigUint::one() << working;
    let low = (&e_low << (working + 1)) / (&one + &q_high);
    let high = ceil_div(&(&e_high << (working + 1)), &(&one + &q_low));
    (low >> GUARD, ceil_shift(&high, GUARD))
}

/// Integers `low` ≤ 2^bits·e^{−a/b} ≤ `high` (b > 0), with integer arithmetic only.
///
/// e^{−a/b} = (e^{−y})^N with N = ⌈a/b⌉ and y = a/(bN) ≤ 1. The Taylor series of e^{−y} alternates
/// with terms y^k/k! that decrease (y ≤ 1), so the true value is within the first omitted term of a
/// partial sum; each term is carried as a floor and a ceiling. The N-th power of the two brackets,
/// rounded down and up at each product, brackets the power. Working with extra bits absorbs the
/// roundings (at most a few units per product).
pub fn exp_neg_bounds(a: &BigUint, b: &BigUint, bits: u32) -> (BigUint, BigUint) {
    assert!(!b.is_zero(), "e^(-a/b) needs b > 0");
    if a.is_zero() {
        let one = BigUint::one() << bits;
        return (one.clone(), one);
    }
    let power = ceil_div(a, b);
    let power_u32 = u32::try_from(&power).expect("exponent a/b below 2^32");
    let working = bits + 8 + (32 - power_u32.leading_zeros());
    let step_den = b * &power;
    // Terms T_k = 2^working · y^k/k!, floor and ceiling.
    let mut term_low = BigUint::one() << working;
    let mut term_high = term_low.clone();
    let (mut plus_low, mut plus_high) = (term_low.clone(), term_high.clone());
    let (mut minus_low, mut minus_high) = (BigUint::zero(), BigUint::zero());
    let mut k = 1u64;
    loop {
        let den = &step_den * k;
        term_low = (&term_low * a) / &den;
        term_high = ceil_div(&(&term_high * a), &den);
        if term_high <= BigUint::one() {
            break;
        }
        if k % 2 == 1 {
            minus_low += &term_low;
            minus_high += &term_high;
        } else {
            plus_low += &term_low;
            plus_high += &term_high;
        }
        k += 1;
    }
    // The first omitted term is at most term_high.
    let base_low = (plus_low)
        .checked_sub(&(minus_high + &term_high))
        .unwrap_or_default();
    let base_high = plus_high + &term_high - minus_low;
    let (mut low, mut high) = (base_low.clone(), base_high.clone());
    for _ in 1..power_u32 {
        low = (&low * &base_low) >> working;
        high = ceil_shift(&(&high * &base_high), working);
    }
    let extra = working - bits;
    (low >> extra, ceil_shift(&high, extra))
}

pub(crate) fn ceil_div(numerator: &BigUint, denominator: &BigUint) -> BigUint {
    (numerator + denominator - 1u32) / denominator
}

pub(crate) fn ceil_shift(value: &BigUint, bits: u32) -> BigUint {
    let floor = value >> bits;
    if (&floor << bits) == *value {
        floor
    } else {
        floor + 1u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::law_checks::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    fn scale(sigma: f64) -> RationalScale {
        RationalScale::round_up(sigma).expect("a valid test scale")
    }

    fn draws(table: &LaplaceTable, count: usize, seed: u64) -> Vec<i64> {
        let mut rng = ChaCha12Rng::seed_from_u64(seed);
        (0..count).map(|_| table.sample(&mut rng)).collect()
    }

    /// 2^bits·x rounded to an f64, for comparing bounds with f64 values.
    fn ratio(value: &BigUint, bits: u32) -> f64 {
        let shift = value.bits().saturating_sub(60);
        let top = u64::try_from(value >> shift).unwrap() as f64;
        top * 2f64.powi(shift as i32 - bits as i32)
    }

    #[test]
    fn exp_bounds_bracket_known_values_tightly() {
        // e^{-1} to 40 digits: 0.3678794411714423215955237701614608674458.
        let (low, high) = exp_neg_bounds(&BigUint::from(1u32), &BigUint::from(1u32), 128);
        let digits = BigUint::parse_bytes(b"3678794411714423215955237701614608674458", 10).unwrap();
        let scale = BigUint::from(10u32).pow(40);
        // low/2^128 ≤ e^{-1} ≤ high/2^128, with the 40-digit value ±10^-40.
        assert!(&low * &scale <= (&digits + 1u32) << 128u32);
        assert!(&high * &scale >= (&digits - 1u32) << 128u32);
        assert!(
            &high - &low <= BigUint::from(64u32),
            "bounds too loose: {}",
            &high - &low
        );
        for (a, b) in [
            (3u64, 7u64),
            (29, 4),
            (1, 1000),
            (123_456, 10_000),
            (5, 1 << 32),
        ] {
            let (low, high) = exp_neg_bounds(&BigUint::from(a), &BigUint::from(b), 100);
            let exact = (-(a as f64) / b as f64).exp();
            assert!(low <= high);
            assert!(ratio(&low, 100) <= exact * (1.0 + 1e-14), "e^-{a}/{b}");
            assert!(ratio(&high, 100) >= exact * (1.0 - 1e-14), "e^-{a}/{b}");
            assert!(
                &high - &low <= BigUint::from(1u32 << 10),
                "e^-{a}/{b} loose"
            );
        }
    }

    #[test]
    fn table_brackets_each_threshold_computed_directly() {
        for sigma in [0.25, 0.7, 1.0, 3.3, 37.7, 1800.0] {
            let scale = scale(sigma);
            let table = LaplaceTable::new(scale);
            assert!(table.len() > 0);
            for m in (0..table.len()).step_by(table.len().div_ceil(200)) {
                // Bounds 64 bits finer than the table's grid: the table's must lie outside them.
                let (low, high) = threshold_bounds(m, scale, W_BITS + 64);
                assert!(
                    BigUint::from(table.lower[m]) << 64u32 <= low,
                    "σ {sigma}, m {m}"
                );
                assert!(
                    BigUint::from(table.upper[m]) << 64u32 >= high,
                    "σ {sigma}, m {m}"
                );
                assert!(
                    table.upper[m] - table.lower[m] <= 2,
                    "σ {sigma}, m {m}: loose"
                );
            }
            let last = table.upper[table.len() - 1];
            assert!(last < 1 << (W_BITS - TAIL_BITS) || table.len() == MAX_ENTRIES);
        }
    }

    /// The probability of each magnitude that the table decides without refinement lies within the
    /// exact law's bounds: the table itself carries the right law, not only its samples.
    #[test]
    fn table_decides_each_magnitude_with_its_exact_probability() {
        for sigma in [0.6, 2.5, 20.0] {
            let scale = scale(sigma);
            let table = LaplaceTable::new(scale);
            let law = Law::new(scale.to_f64());
            let unit = 2f64.powi(-(W_BITS as i32));
            for m in 1..table.len() {
                // M = m for certain when upper[m] ≤ w and w + 1 ≤ lower[m − 1]; undecided next to
                // either bound.
                let certain = (table.lower[m - 1] - table.upper[m]) as f64 * unit;
                let exact = 2.0 * law.pmf(m as i64);
                assert!(certain <= exact * (1.0 + 1e-12), "σ {sigma}, m {m}");
                assert!(
                    certain + 6.0 * unit >= exact * (1.0 - 1e-12),
                    "σ {sigma}, m {m}"
                );
            }
        }
    }

    const FIT_SCALES: [f64; 6] = [0.3, 1.0, 2.5, 10.0, 37.7, 400.0];
    const FIT_SAMPLES: usize = 60_000;

    #[test]
    fn histogram_fits_the_exact_pmf_and_rejects_a_wrong_scale() {
        for (case, sigma) in FIT_SCALES.into_iter().enumerate() {
            let scale = scale(sigma);
            let samples = draws(&LaplaceTable::new(scale), FIT_SAMPLES, 500 + case as u64);
            let p = goodness_of_fit_p_value(&samples, &Law::new(sigma));
            assert!(p >= MIN_P_VALUE, "σ = {sigma}: χ² p-value {p:e}");
            for wrong in [sigma * 1.1, sigma / 1.1] {
                let p = goodness_of_fit_p_value(&samples, &Law::new(wrong));
                assert!(p < MIN_P_VALUE, "σ = {sigma} passed as {wrong}: p = {p:e}");
            }
        }
    }

    #[test]
    fn the_exact_tail_path_keeps_the_law() {
        // Two thresholds: most draws of σ = 5 go down the memoryless tail, so a wrong offset or ratio
        // there would show.
        for (case, sigma) in [0.8, 5.0].into_iter().enumerate() {
            let table = LaplaceTable::with_max_entries(scale(sigma), 2);
            assert_eq!(table.len(), 2);
            let samples = draws(&table, FIT_SAMPLES, 600 + case as u64);
            let p = goodness_of_fit_p_value(&samples, &Law::new(sigma));
            assert!(p >= MIN_P_VALUE, "σ = {sigma}: χ² p-value {p:e}");
        }
    }

    #[test]
    fn moments_and_symmetry_match_the_closed_forms() {
        for (case, sigma) in [0.5, 3.0, 100.0].into_iter().enumerate() {
            let law = Law::new(sigma);
            let samples = draws(&LaplaceTable::new(scale(sigma)), 50_000, 700 + case as u64);
            let n = samples.len() as f64;
            let second = samples.iter().map(|&z| (z as f64).powi(2)).sum::<f64>() / n;
            let second_error = ((law.fourth_moment() - law.variance().powi(2)) / n).sqrt();
            assert!(
                (second - law.variance()).abs() <= STANDARD_ERRORS * second_error,
                "σ = {sigma}: Var {second} vs {}",
                law.variance()
            );
            let mean = samples.iter().sum::<i64>() as f64 / n;
            assert!(
                mean.abs() <= STANDARD_ERRORS * (law.variance() / n).sqrt(),
                "σ = {sigma}"
            );
        }
    }

    /// A generator whose first word is given, then ChaCha.
    struct FirstWord {
        first: Option<u64>,
        rest: ChaCha12Rng,
    }

    impl rand::TryRng for FirstWord {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok(self.rest.next_u32())
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(self.first.take().unwrap_or_else(|| self.rest.next_u64()))
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            self.rest.fill_bytes(dst);
            Ok(())
        }
    }

    /// Where w is too close to a threshold for 63 bits, the refinement must split the draws in the
    /// proportion the real W does: P(W > τ | W ∈ [w, w + 1)·2^−63) = w + 1 − 2^63·τ.
    #[test]
    fn refinement_splits_an_undecided_word_in_the_exact_proportion() {
        let scale = scale(2.5);
        let table = LaplaceTable::new(scale);
        let m = 3;
        let (low, high) = threshold_bounds(m, scale, W_BITS + 64);
        // w with 2^63·τ_m inside [w, w + 1): undecided from 63 bits.
        let w = u64::try_from(&low >> 64u32).unwrap();
        assert!(w + 1 > table.lower[m] && w < table.upper[m]);
        let fraction_above = 1.0 - ratio(&(&high - (BigUint::from(w) << 64u32)), 64);
        let trials = 40_000;
        let mut above = 0;
        for seed in 0..trials {
            let mut rng = FirstWord {
                first: Some(w),
                rest: ChaCha12Rng::seed_from_u64(seed),
            };
            match table.sample(&mut rng) {
                z if z == m as i64 => above += 1,
                z => assert_eq!(
                    z,
                    m as i64 + 1,
                    "an undecided word may give only m or m + 1"
                ),
            }
        }
        let observed = above as f64 / trials as f64;
        let error = (fraction_above * (1.0 - fraction_above) / trials as f64).sqrt();
        assert!(
            (observed - fraction_above).abs() <= STANDARD_ERRORS * error + 1e-9,
            "{observed} of draws above τ, expected {fraction_above}"
        );
    }

    #[test]
    fn scale_sampler_uses_the_table_only_where_it_reaches_its_tail() {
        assert!(matches!(
            ScaleSampler::new(scale(0.1)),
            ScaleSampler::Direct(_)
        ));
        assert!(matches!(
            ScaleSampler::new(scale(30.0)),
            ScaleSampler::Table(_)
        ));
        assert!(matches!(
            ScaleSampler::new(scale(1e5)),
            ScaleSampler::Direct(_)
        ));
    }
}
