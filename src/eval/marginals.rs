//! The covariance-loss paper's own accuracy metric (seed 004, eq. 1.2; note §3.1) on Boolean / one-hot
//! encodings of two tables: for d = 1, 2, 3,
//!
//!   MSE_d = C(p,d)^{-1} Σ_{i1<…<id} ( (1/n)Σ_i Π x_i(i_l) − (1/m)Σ_r Π z_r(i_l) )²,
//!
//! over distinct index sets, and the largest |error| among them. Counts are exact (AND + popcount on the
//! bit planes). When C(p,d) exceeds [`EXACT_INDEX_SETS`] (p > 64 for d = 3) the average is an unbiased
//! estimate over that many index sets drawn uniformly with replacement, labelled `sampled`, and the max
//! is over the sampled sets only.

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::Serialize;

use crate::encoding::read::BitRows;

/// Index sets counted exactly: C(64, 3) = 41 664, so every d ≤ 3 is exact up to p = 64.
pub const EXACT_INDEX_SETS: u64 = 41_664;

/// MSE_d and the max error for one degree d.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DegreeError {
    pub degree: usize,
    pub mse: f64,
    pub root_mse: f64,
    pub max_abs_error: f64,
    /// Index sets averaged (C(p, d) when exact).
    pub index_sets: u64,
    /// True when `mse` is a sampled estimate rather than the exact average.
    pub sampled: bool,
}

/// The `marginals` section of `dpsynth eval --marginals`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MarginalReport {
    pub bits: usize,
    pub real_rows: u64,
    pub synthetic_rows: u64,
    pub degrees: Vec<DegreeError>,
}

/// MSE_1..MSE_3 (degrees up to min(3, p)) between `real` and `synthetic`, sampling with `seed` beyond
/// [`EXACT_INDEX_SETS`].
pub fn marginal_errors(real: &BitRows, synthetic: &BitRows, seed: u64) -> MarginalReport {
    let bits = real.bits;
    let degrees = (1..=3.min(bits))
        .map(|degree| {
            let total = binomial(bits as u64, degree as u64);
            let sampled = total > EXACT_INDEX_SETS;
            let sets = if sampled {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ degree as u64);
                (0..EXACT_INDEX_SETS).map(|_| random_set(&mut rng, bits, degree)).collect()
            } else {
                all_sets(bits, degree)
            };
            let real_frequencies = frequencies(real, &sets);
            let synthetic_frequencies = frequencies(synthetic, &sets);
            let (mut sum, mut max) = (0.0, 0.0f64);
            for (a, b) in real_frequencies.iter().zip(&synthetic_frequencies) {
                let error = a - b;
                sum += error * error;
                max = max.max(error.abs());
            }
            let mse = sum / sets.len() as f64;
            DegreeError {
                degree,
                mse,
                root_mse: mse.sqrt(),
                max_abs_error: max,
                index_sets: sets.len() as u64,
                sampled,
            }
        })
        .collect();
    MarginalReport { bits, real_rows: real.rows(), synthetic_rows: synthetic.rows(), degrees }
}

fn binomial(n: u64, k: u64) -> u64 {
    (0..k).fold(1u64, |acc, i| acc.saturating_mul(n - i) / (i + 1))
}

/// Every index set of size `degree`, increasing.
fn all_sets(bits: usize, degree: usize) -> Vec<[usize; 3]> {
    let mut sets = Vec::new();
    for a in 0..bits {
        if degree == 1 {
            sets.push([a, a, a]);
            continue;
        }
        for b in a + 1..bits {
            if degree == 2 {
                sets.push([a, b, b]);
                continue;
            }
            for c in b + 1..bits {
                sets.push([a, b, c]);
            }
        }
    }
    sets
}

/// A uniform index set of `degree` distinct bits (repeating the last index to fill three slots).
fn random_set(rng: &mut Xoshiro256PlusPlus, bits: usize, degree: usize) -> [usize; 3] {
    let mut chosen: Vec<usize> = Vec::with_capacity(degree);
    while chosen.len() < degree {
        let bit = rng.random_range(0..bits);
        if !chosen.contains(&bit) {
            chosen.push(bit);
        }
    }
    chosen.sort_unstable();
    let last = chosen[degree - 1];
    [chosen[0], *chosen.get(1).unwrap_or(&last), last]
}

/// The share of rows with every bit of each set (a repeated index counts once: x² = x for bits).
fn frequencies(rows: &BitRows, sets: &[[usize; 3]]) -> Vec<f64> {
    let counts = rows
        .chunks
        .par_iter()
        .map(|chunk| {
            sets.iter()
                .map(|&[a, b, c]| {
                    chunk
                        .plane(a)
                        .iter()
                        .zip(chunk.plane(b))
                        .zip(chunk.plane(c))
                        .map(|((x, y), z)| u64::from((x & y & z).count_ones()))
                        .sum::<u64>()
                })
                .collect::<Vec<u64>>()
        })
        .reduce(
            || vec![0; sets.len()],
            |mut total, part| {
                total.iter_mut().zip(part).for_each(|(t, p)| *t += p);
                total
            },
        );
    let rows = rows.rows().max(1) as f64;
    counts.into_iter().map(|count| count as f64 / rows).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_mse(real: &[Vec<u8>], synthetic: &[Vec<u8>], degree: usize) -> (f64, f64) {
        let bits = real[0].len();
        let frequency = |rows: &[Vec<u8>], set: &[usize]| {
            rows.iter().filter(|row| set.iter().all(|&bit| row[bit] == 1)).count() as f64 / rows.len() as f64
        };
        let sets: Vec<Vec<usize>> = match degree {
            1 => (0..bits).map(|a| vec![a]).collect(),
            2 => (0..bits).flat_map(|a| (a + 1..bits).map(move |b| vec![a, b])).collect(),
            _ => (0..bits)
                .flat_map(|a| (a + 1..bits).flat_map(move |b| (b + 1..bits).map(move |c| vec![a, b, c])))
                .collect(),
        };
        let errors: Vec<f64> = sets.iter().map(|set| frequency(real, set) - frequency(synthetic, set)).collect();
        (
            errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64,
            errors.iter().fold(0.0f64, |m, e| m.max(e.abs())),
        )
    }

    #[test]
    fn exact_errors_match_a_naive_count_and_vanish_on_identical_tables() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut table = |rows: usize, q: f64| -> Vec<Vec<u8>> {
            (0..rows).map(|_| (0..7).map(|_| u8::from(rng.random::<f64>() < q)).collect()).collect()
        };
        let real = table(300, 0.4);
        let synthetic = table(200, 0.6);
        let report = marginal_errors(&BitRows::from_rows(7, &real, 64), &BitRows::from_rows(7, &synthetic, 50), 0);
        for degree in &report.degrees {
            let (mse, max) = naive_mse(&real, &synthetic, degree.degree);
            assert!((degree.mse - mse).abs() < 1e-15, "d = {}", degree.degree);
            assert!((degree.max_abs_error - max).abs() < 1e-15);
            assert!(!degree.sampled);
            assert_eq!(degree.index_sets, binomial(7, degree.degree as u64));
        }
        let same = marginal_errors(&BitRows::from_rows(7, &real, 64), &BitRows::from_rows(7, &real, 100), 0);
        assert!(same.degrees.iter().all(|degree| degree.mse == 0.0));
    }

    #[test]
    fn beyond_64_bits_the_third_degree_is_a_labelled_sample_close_to_the_exact_value() {
        let bits = 70;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let mut table = |rows: usize, q: f64| -> Vec<Vec<u8>> {
            (0..rows).map(|_| (0..bits).map(|_| u8::from(rng.random::<f64>() < q)).collect()).collect()
        };
        let (real, synthetic) = (table(400, 0.5), table(400, 0.7));
        let report =
            marginal_errors(&BitRows::from_rows(bits, &real, 128), &BitRows::from_rows(bits, &synthetic, 128), 3);
        let third = &report.degrees[2];
        assert!(third.sampled && !report.degrees[1].sampled);
        let (exact, _) = naive_mse(&real, &synthetic, 3);
        assert!((third.mse / exact - 1.0).abs() < 0.05, "{} vs {exact}", third.mse);
    }
}
