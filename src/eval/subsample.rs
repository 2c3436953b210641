//! Joint W1 between subsamples: exact ℓ∞ optimal transport between m random rows of the real table and m
//! random rows of a synthetic one, repeated, beside the same number between two disjoint sets of m real rows
//! (the floor: what two samples of the *same* data already differ by at this m).
//!
//! Why: the full-table W1 is exact only for small tables; at d = 4 the default grid is coarse and from
//! d = 6 on the headline falls back to the sandwich's midpoint, which cannot rank methods. Exact transport
//! between m-row subsamples costs the same at any n and d, and ranks methods at any d.
//!
//! What it estimates: with μ_m, ν_m the empirical measures of the subsamples, E W1(μ_m, ν_m) ≥ W1(μ, ν)
//! (W1 is jointly convex and the subsample measures average to the tables' measures) and it falls to
//! W1(μ, ν) as m grows. The floor E W1(μ_m, μ'_m) is the part that sampling alone explains: a synthetic
//! table whose value is near the floor is, at this resolution, as close to the real data as another sample
//! of it. Values are only comparable at the same m.
//!
//! Determinism: every random choice comes from a seeded xoshiro256++ stream per (repeat, table role), so the
//! numbers depend on the seed and the tables only, never on the thread count.

use std::collections::HashSet;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::Serialize;

use super::distance::{distinct_rows, EXACT_MAX_PAIRS};
use super::w1::{w1_exact_small, Sample, EXACT_COST_BITS};
use crate::error::{Error, Result};

/// Rows per subsample by default: 10^6 point pairs per solve, about 0.1–0.4 s each (2-core machine).
pub const DEFAULT_SUBSAMPLE_ROWS: usize = 1000;

/// Repeats by default (each one real-vs-synthetic and one real-vs-real solve).
pub const DEFAULT_SUBSAMPLE_REPEATS: usize = 5;

/// Seed of the subsample draws by default: eval is an owner tool, so reproducible by default.
pub const DEFAULT_SUBSAMPLE_SEED: u64 = 0;

/// Largest m: m² point pairs must fit the dense exact solver ([`EXACT_MAX_PAIRS`] = 2048²).
pub const MAX_SUBSAMPLE_ROWS: usize = 2048;

/// Most repeats: each is two exact solves of up to 2048² pairs (seconds each), so more would run for days
/// while the estimate's spread has long stopped shrinking (it falls as 1/√repeats).
pub const MAX_SUBSAMPLE_REPEATS: usize = 1000;

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubsampleOptions {
    /// Rows per subsample, at most [`MAX_SUBSAMPLE_ROWS`]; fewer when a table is too small (see [`plan`]).
    pub rows: usize,
    /// 0 leaves the estimate out.
    pub repeats: usize,
    pub seed: u64,
}

impl Default for SubsampleOptions {
    fn default() -> Self {
        SubsampleOptions {
            rows: DEFAULT_SUBSAMPLE_ROWS,
            repeats: DEFAULT_SUBSAMPLE_REPEATS,
            seed: DEFAULT_SUBSAMPLE_SEED,
        }
    }
}

impl SubsampleOptions {
    /// Refuses an m that is 0 or above [`MAX_SUBSAMPLE_ROWS`], and repeats above [`MAX_SUBSAMPLE_REPEATS`].
    pub fn validate(&self) -> Result<()> {
        if self.repeats > MAX_SUBSAMPLE_REPEATS {
            return Err(Error::bad_input(format!(
                "--subsample-repeats must be at most {MAX_SUBSAMPLE_REPEATS} (each repeat solves two exact \
                 transports; the estimate's spread falls as 1/sqrt(repeats)), got {}",
                self.repeats
            )));
        }
        if self.rows == 0 || self.rows > MAX_SUBSAMPLE_ROWS {
            return Err(Error::bad_input(format!(
                "--subsample-rows must be between 1 and {MAX_SUBSAMPLE_ROWS} (exact transport between m \
                 rows solves m^2 pairs), got {}",
                self.rows
            )));
        }
        Ok(())
    }
}

/// The m actually used: the requested m, at most half the real rows (the floor needs two disjoint real
/// subsamples) and at most the rows of the smallest synthetic table, so that every table is compared at
/// the same m. `None` when the estimate is left out (no repeats, or fewer than 2 real rows).
pub fn plan(options: &SubsampleOptions, real_rows: usize, synth_rows: &[usize]) -> Option<usize> {
    let smallest_synth = synth_rows.iter().copied().min().unwrap_or(0);
    let rows = options.rows.min(real_rows / 2).min(smallest_synth);
    (options.repeats > 0 && rows > 0).then_some(rows)
}

/// Mean and spread of one estimate over the repeats.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub mean: f64,
    /// Sample standard deviation over the repeats (0 for a single repeat).
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// One value per repeat, in repeat order.
    pub values: Vec<f64>,
}

impl Spread {
    pub fn of(values: Vec<f64>) -> Spread {
        let count = values.len().max(1) as f64;
        let mean = values.iter().sum::<f64>() / count;
        let squares: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
        Spread {
            mean,
            std: if values.len() > 1 { (squares / (values.len() - 1) as f64).sqrt() } else { 0.0 },
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            values,
        }
    }
}

/// The subsample estimate of one synthetic table (the floor is the real table's, the same for every one).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubsampleTransport {
    /// m: rows in each subsample.
    pub rows_per_sample: usize,
    pub repeats: usize,
    pub seed: u64,
    /// W1(m real rows, m synthetic rows), exact ℓ∞ transport, per repeat.
    pub w1: Spread,
    /// W1(m real rows, m other real rows), the same real rows as `w1` against disjoint ones.
    pub floor: Spread,
    /// w1.mean / floor.mean: 1 is as close as another real sample; null when the floor is 0.
    pub ratio_to_floor: Option<f64>,
    pub detail: String,
}

/// The stream of one (repeat, role): the seed's stream jumped 2^128 steps per stream index, so the
/// streams never overlap.
fn stream(seed: u64, repeat: usize, role: usize) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..repeat * 2 + role {
        rng.jump();
    }
    rng
}

const REAL_ROLE: usize = 0;
const SYNTH_ROLE: usize = 1;

/// `count` distinct row indices below `rows` in random order: Floyd's algorithm (uniform subset, O(count))
/// then a Fisher–Yates shuffle, so any prefix is a uniform subset too.
fn distinct_indices(rng: &mut Xoshiro256PlusPlus, rows: usize, count: usize) -> Vec<usize> {
    debug_assert!(count <= rows);
    let mut chosen = Vec::with_capacity(count);
    let mut seen = HashSet::with_capacity(count);
    for top in rows - count..rows {
        let pick = rng.random_range(0..=top);
        let pick = if seen.contains(&pick) { top } else { pick };
        seen.insert(pick);
        chosen.push(pick);
    }
    for i in (1..chosen.len()).rev() {
        chosen.swap(i, rng.random_range(0..=i));
    }
    chosen
}

fn gather(points: &[f64], dims: usize, rows: &[usize]) -> Vec<f64> {
    rows.iter().flat_map(|&row| &points[row * dims..(row + 1) * dims]).copied().collect()
}

/// Exact W1 between two equal-size point sets (duplicates merged into counts first).
fn exact_w1(a: &[f64], b: &[f64], dims: usize) -> Result<f64> {
    let internal = |error: super::w1::W1Error| Error::internal(format!("subsample W1: {error}"));
    let ((points_a, counts_a), (points_b, counts_b)) = distinct_rows(a, b, dims, EXACT_MAX_PAIRS)
        .ok_or_else(|| Error::internal("subsample W1: more distinct pairs than the exact solver takes"))?;
    w1_exact_small(
        &Sample::with_counts(&points_a, dims, &counts_a).map_err(internal)?,
        &Sample::with_counts(&points_b, dims, &counts_b).map_err(internal)?,
    )
    .map_err(internal)
}

/// The subsample estimate of every synthetic table against the real one (`rows` from [`plan`]). Repeats
/// run in parallel on the current rayon pool; each result is in repeat order.
pub fn subsample_transport(
    real: &[f64],
    synths: &[&[f64]],
    dims: usize,
    rows: usize,
    options: &SubsampleOptions,
) -> Result<Vec<SubsampleTransport>> {
    let real_rows = real.len() / dims;
    debug_assert!(2 * rows <= real_rows);
    // Per repeat: the floor, then one W1 per synthetic table.
    let per_repeat: Vec<(f64, Vec<f64>)> = (0..options.repeats)
        .into_par_iter()
        .map(|repeat| {
            let both = distinct_indices(&mut stream(options.seed, repeat, REAL_ROLE), real_rows, 2 * rows);
            let (sample, other) = both.split_at(rows);
            let sample = gather(real, dims, sample);
            let floor = exact_w1(&sample, &gather(real, dims, other), dims)?;
            // Every synthetic table draws from the same stream (common random numbers for the ranking).
            let w1s = synths
                .iter()
                .map(|synth| {
                    let mut rng = stream(options.seed, repeat, SYNTH_ROLE);
                    let chosen = distinct_indices(&mut rng, synth.len() / dims, rows);
                    exact_w1(&sample, &gather(synth, dims, &chosen), dims)
                })
                .collect::<Result<Vec<f64>>>()?;
            Ok((floor, w1s))
        })
        .collect::<Result<_>>()?;
    let floor = Spread::of(per_repeat.iter().map(|(floor, _)| *floor).collect());
    Ok((0..synths.len())
        .map(|table| {
            let w1 = Spread::of(per_repeat.iter().map(|(_, w1s)| w1s[table]).collect());
            let ratio_to_floor = (floor.mean > 0.0).then(|| w1.mean / floor.mean);
            SubsampleTransport {
                rows_per_sample: rows,
                repeats: options.repeats,
                seed: options.seed,
                detail: format!(
                    "exact l-infinity optimal transport between {rows} random real rows and {rows} random \
                     synthetic rows, {} repeats (seed {}); the floor is the same between {rows} real rows and \
                     {rows} other real rows; each value within 2^-{EXACT_COST_BITS} above the exact one",
                    options.repeats, options.seed
                ),
                w1,
                floor: floor.clone(),
                ratio_to_floor,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_points(rng: &mut Xoshiro256PlusPlus, n: usize, dims: usize, shift: f64) -> Vec<f64> {
        (0..n * dims).map(|_| rng.random_range(0.0..1.0) * (1.0 - shift) + shift).collect()
    }

    #[test]
    fn indices_are_distinct_uniform_and_seeded() {
        let mut rng = stream(7, 0, REAL_ROLE);
        let mut hits = vec![0u32; 10];
        for _ in 0..20_000 {
            let chosen = distinct_indices(&mut rng, 10, 4);
            let unique: HashSet<usize> = chosen.iter().copied().collect();
            assert_eq!(unique.len(), 4);
            // The first index alone must be uniform too (the split of the real subsample uses prefixes).
            hits[chosen[0]] += 1;
        }
        for count in hits {
            assert!((1700..2300).contains(&count), "{count} of 20000 / 10");
        }
        assert_eq!(distinct_indices(&mut stream(3, 1, 0), 1000, 5), distinct_indices(&mut stream(3, 1, 0), 1000, 5));
        assert_ne!(distinct_indices(&mut stream(3, 1, 0), 1000, 5), distinct_indices(&mut stream(3, 1, 1), 1000, 5));
        let all = distinct_indices(&mut rng, 6, 6);
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn plan_keeps_two_disjoint_real_samples_and_one_m_for_every_table() {
        let options = SubsampleOptions::default();
        assert_eq!(plan(&options, 10_000, &[5_000, 8_000]), Some(1000));
        assert_eq!(plan(&options, 1_500, &[5_000]), Some(750));
        assert_eq!(plan(&options, 10_000, &[300, 8_000]), Some(300));
        assert_eq!(plan(&options, 1, &[300]), None);
        let none = SubsampleOptions { repeats: 0, ..options };
        assert_eq!(plan(&none, 10_000, &[10_000]), None);
        assert!(SubsampleOptions { rows: 0, ..options }.validate().is_err());
        assert!(SubsampleOptions { rows: MAX_SUBSAMPLE_ROWS + 1, ..options }.validate().is_err());
    }

    #[test]
    fn a_shifted_copy_is_at_its_shift_and_the_real_table_at_its_floor() {
        // synth = real shifted by 0.25 along axis 0 (points in [0, 0.75), so the shift stays inside): each
        // subsample value is at least the 1-D W1 of axis 0 between the subsamples, close to 0.25. A copy of
        // the real table is another sample of the same data: its values are of the floor's size.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let dims = 3;
        let real: Vec<f64> = random_points(&mut rng, 600, dims, 0.0).iter().map(|x| x * 0.75).collect();
        let shifted: Vec<f64> =
            real.iter().enumerate().map(|(i, &x)| if i % dims == 0 { x + 0.25 } else { x }).collect();
        let options = SubsampleOptions { rows: 100, repeats: 4, seed: 9 };
        let rows = plan(&options, 600, &[600, 600]).unwrap();
        let found = subsample_transport(&real, &[&real, &shifted], dims, rows, &options).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].floor, found[1].floor);
        assert_eq!(found[0].w1.values.len(), 4);
        // The shifted table is far above the floor; the copy is of the floor's size.
        assert!(found[1].w1.min > 0.2, "{:?}", found[1].w1);
        assert!(found[1].ratio_to_floor.unwrap() > 1.5);
        assert!(found[0].w1.mean < 2.0 * found[0].floor.mean);
        assert!(found[0].floor.min > 0.0);
        // The same seed gives the same numbers on another thread count.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let again = pool.install(|| subsample_transport(&real, &[&real, &shifted], dims, rows, &options)).unwrap();
        assert_eq!(again, found);
    }

    #[test]
    fn subsample_values_match_the_exact_solver_on_the_chosen_rows() {
        // With m equal to the whole synthetic table, every repeat compares a real subsample with all of it:
        // the value must be exact W1 between those rows, which brute force recomputes here.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
        let dims = 2;
        let real = random_points(&mut rng, 40, dims, 0.0);
        let synth = random_points(&mut rng, 20, dims, 0.3);
        let options = SubsampleOptions { rows: 20, repeats: 3, seed: 1 };
        let found = &subsample_transport(&real, &[&synth], dims, 20, &options).unwrap()[0];
        for (repeat, &value) in found.w1.values.iter().enumerate() {
            let both = distinct_indices(&mut stream(1, repeat, REAL_ROLE), 40, 40);
            let sample = gather(&real, dims, &both[..20]);
            let other = gather(&real, dims, &both[20..]);
            let exact =
                w1_exact_small(&Sample::new(&sample, dims).unwrap(), &Sample::new(&synth, dims).unwrap()).unwrap();
            assert!((value - exact).abs() < 1e-12, "{value} vs {exact}");
            let floor =
                w1_exact_small(&Sample::new(&sample, dims).unwrap(), &Sample::new(&other, dims).unwrap()).unwrap();
            assert!((found.floor.values[repeat] - floor).abs() < 1e-12);
        }
        let spread = Spread::of(vec![1.0, 2.0, 3.0]);
        assert_eq!((spread.mean, spread.std, spread.min, spread.max), (2.0, 1.0, 1.0, 3.0));
    }
}
