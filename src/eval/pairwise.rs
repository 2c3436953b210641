//! W1 between the 2-D marginals of every pair of columns, on a fine grid (or exactly for small tables).
//!
//! Why: a pair's 2-D W1 is a lower bound on the joint W1 (projecting onto two coordinates is 1-Lipschitz
//! in ℓ∞), it is cheap at any d (one pass per pair and a 2-D transport), and it says *which* relations
//! between columns a method gets wrong; the mean and max over pairs rank methods where the joint W1 cannot
//! be computed.
//!
//! Each pair costs about 0.03 s of CPU, so at large d only some are compared ([`PairSelection`], `eval
//! --pairs`): by default every pair up to [`DEFAULT_MAX_PAIRS`] of them (d = 20), else a seeded uniform
//! sample of that many.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::Serialize;

use super::distance::{distinct_rows, grid_estimate_on_axes, W1Method, EXACT_MAX_PAIRS};
use super::w1::{w1_exact_small, Sample, W1Error};
use crate::error::{Error, Result};

/// The most pairs compared by default: 190 = 20·19/2, every pair of d = 20 columns (a few seconds).
pub const DEFAULT_MAX_PAIRS: usize = 190;

/// Which column pairs `eval` compares (`--pairs none|sample:K|all`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairSelection {
    /// No pairwise W1 at all.
    None,
    /// K ≥ 1 distinct pairs drawn uniformly with eval's seed (every pair when K ≥ d(d−1)/2).
    Sample(usize),
    /// Every pair.
    All,
}

/// d(d−1)/2, the number of column pairs of `dims` columns.
pub fn total_pairs(dims: usize) -> usize {
    dims.saturating_mul(dims.saturating_sub(1)) / 2
}

impl PairSelection {
    /// The default for `dims` columns: [`PairSelection::All`] while there are at most [`DEFAULT_MAX_PAIRS`]
    /// pairs (d ≤ 20), else a sample of [`DEFAULT_MAX_PAIRS`].
    pub fn default_for(dims: usize) -> Self {
        if total_pairs(dims) <= DEFAULT_MAX_PAIRS {
            PairSelection::All
        } else {
            PairSelection::Sample(DEFAULT_MAX_PAIRS)
        }
    }

    /// The selected pairs of `dims` columns (positions i < j), in lexicographic order. A sample is drawn
    /// with xoshiro256++ seeded from `seed` and long-jumped (2^192 steps), a stream apart from the
    /// subsample draws of the same seed; it depends on `dims` and `seed` only.
    pub fn pairs(self, dims: usize, seed: u64) -> Vec<[usize; 2]> {
        let total = total_pairs(dims);
        let count = match self {
            PairSelection::None => 0,
            PairSelection::Sample(k) => k.min(total),
            PairSelection::All => total,
        };
        if count == total {
            return (0..dims).flat_map(|i| (i + 1..dims).map(move |j| [i, j])).collect();
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        rng.long_jump();
        // Floyd's algorithm: a uniform subset of `count` of the pair ranks.
        let mut chosen = BTreeSet::new();
        for top in total - count..total {
            let pick = rng.random_range(0..=top);
            chosen.insert(if chosen.contains(&pick) { top } else { pick });
        }
        // Ranks in increasing order are pairs in lexicographic order; walk the rows once.
        let (mut i, mut first_of_row) = (0, 0);
        chosen
            .into_iter()
            .map(|rank| {
                while rank >= first_of_row + (dims - 1 - i) {
                    first_of_row += dims - 1 - i;
                    i += 1;
                }
                [i, i + 1 + rank - first_of_row]
            })
            .collect()
    }
}

const PAIRS_FORMS: &str = "expected none, sample:K (K a whole number of at least 1) or all";

impl FromStr for PairSelection {
    type Err = String;

    /// Parses `none`, `sample:K` (K ≥ 1) or `all`.
    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        let name = text.trim().to_ascii_lowercase();
        match name.as_str() {
            "none" => Ok(PairSelection::None),
            "all" => Ok(PairSelection::All),
            _ => match name.strip_prefix("sample:").map(|k| k.trim().parse::<usize>()) {
                Some(Ok(k)) if k >= 1 => Ok(PairSelection::Sample(k)),
                _ => Err(format!("--pairs '{text}': {PAIRS_FORMS}")),
            },
        }
    }
}

impl fmt::Display for PairSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PairSelection::None => write!(f, "none"),
            PairSelection::Sample(k) => write!(f, "sample:{k}"),
            PairSelection::All => write!(f, "all"),
        }
    }
}

/// Grid side of the 2-D estimates: 128² cells, whose king-move transport takes about 0.3–0.6 s (2-core
/// machine, flights pairs); 256² took 2 s a pair and moved the flights means by under 1%. The measured
/// quantisation bound is at most 1/128 and usually far less.
pub const PAIRWISE_GRID_SIDE: usize = 128;

/// One pair of columns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairW1 {
    pub columns: [String; 2],
    /// W1 between the pair's 2-D marginals, normalised ℓ∞ units.
    pub w1: f64,
    /// |true 2-D W1 − w1| ≤ error_bound (0 when exact).
    pub error_bound: f64,
    /// `exact-transport` or `grid`.
    pub method: W1Method,
    /// Pearson correlation of the two columns in each table.
    pub correlation_real: f64,
    pub correlation_synth: f64,
    /// The columns' positions in the compared tables (not serialised: `columns` names them).
    #[serde(skip)]
    pub axes: [usize; 2],
}

/// Every pair, and the mean and max over them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairwiseW1 {
    /// Side of the grid of the `grid` pairs.
    pub side: usize,
    pub mean: f64,
    pub max: f64,
    /// The pair with the largest 2-D W1.
    pub worst_columns: [String; 2],
    /// The largest `error_bound` over the pairs.
    pub max_error_bound: f64,
    /// The compared pairs, in lexicographic order of the column positions.
    pub pairs: Vec<PairW1>,
    /// How many pairs were compared (`pairs.len()`) and how many there are, d(d−1)/2; fewer when sampled.
    pub pairs_compared: usize,
    pub pairs_total: usize,
}

impl PairwiseW1 {
    /// `" over K of M pairs (a seeded sample)"` when sampled, else empty: for the summary and the page.
    pub fn coverage(&self) -> String {
        if self.pairs_compared < self.pairs_total {
            format!(" over {} of {} pairs (a seeded sample)", self.pairs_compared, self.pairs_total)
        } else {
            String::new()
        }
    }
}

fn internal(error: W1Error) -> Error {
    Error::internal(format!("pairwise W1: {error}"))
}

/// The two coordinates `axes` of every row.
fn project(points: &[f64], dims: usize, axes: [usize; 2]) -> Vec<f64> {
    points.chunks_exact(dims).flat_map(|row| [row[axes[0]], row[axes[1]]]).collect()
}

/// W1 of one pair and its error bound: exact transport when the two tables' rows give at most
/// [`EXACT_MAX_PAIRS`] pairs (the rule of the joint headline), else the grid of [`PAIRWISE_GRID_SIDE`].
fn pair_w1(real: &[f64], synth: &[f64], dims: usize, axes: [usize; 2]) -> Result<(f64, f64, W1Method)> {
    let (real_rows, synth_rows) = (real.len() / dims, synth.len() / dims);
    if real_rows.saturating_mul(synth_rows) <= EXACT_MAX_PAIRS {
        let (a, b) = (project(real, dims, axes), project(synth, dims, axes));
        if let Some(((points_a, counts_a), (points_b, counts_b))) = distinct_rows(&a, &b, 2, EXACT_MAX_PAIRS) {
            let value = w1_exact_small(
                &Sample::with_counts(&points_a, 2, &counts_a).map_err(internal)?,
                &Sample::with_counts(&points_b, 2, &counts_b).map_err(internal)?,
            )
            .map_err(internal)?;
            return Ok((value, 0.0, W1Method::ExactTransport));
        }
    }
    let grid = grid_estimate_on_axes(real, synth, dims, &axes, PAIRWISE_GRID_SIDE).map_err(internal)?;
    Ok((grid.w1, grid.error_bound, W1Method::Grid))
}

/// The 2-D W1 of the column pairs that `selection` picks (with `seed`, see [`PairSelection::pairs`]);
/// `None` for d = 1 or [`PairSelection::None`]. `correlation_real` / `_synth` are the tables' correlation
/// matrices (row-major d × d) and `names` the column names. Pairs run in parallel on the current rayon
/// pool (each transport solve is sequential) and are collected in order.
#[allow(clippy::too_many_arguments)]
pub fn pairwise_w1(
    real: &[f64],
    synth: &[f64],
    dims: usize,
    names: &[String],
    correlation_real: &[f64],
    correlation_synth: &[f64],
    selection: PairSelection,
    seed: u64,
) -> Result<Option<PairwiseW1>> {
    let selected = selection.pairs(dims, seed);
    if dims < 2 || selected.is_empty() {
        return Ok(None);
    }
    let pairs = selected
        .into_par_iter()
        .map(|[i, j]| {
            let (w1, error_bound, method) = pair_w1(real, synth, dims, [i, j])?;
            Ok(PairW1 {
                columns: [names[i].clone(), names[j].clone()],
                w1,
                error_bound,
                method,
                correlation_real: correlation_real[i * dims + j],
                correlation_synth: correlation_synth[i * dims + j],
                axes: [i, j],
            })
        })
        .collect::<Result<Vec<PairW1>>>()?;
    let worst = pairs.iter().fold(&pairs[0], |worst, pair| if pair.w1 > worst.w1 { pair } else { worst });
    Ok(Some(PairwiseW1 {
        side: PAIRWISE_GRID_SIDE,
        mean: pairs.iter().map(|pair| pair.w1).sum::<f64>() / pairs.len() as f64,
        max: worst.w1,
        worst_columns: worst.columns.clone(),
        max_error_bound: pairs.iter().map(|pair| pair.error_bound).fold(0.0, f64::max),
        pairs_compared: pairs.len(),
        pairs_total: total_pairs(dims),
        pairs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn pairs_are_exact_on_small_tables_and_the_grid_holds_its_bound_on_large_ones() {
        // synth = real shifted by 0.2 along axis 1 (of 3): the pairs (0, 1) and (1, 2) are at W1 = 0.2
        // exactly (moving back costs 0.2, and axis 1's marginal alone needs it), the pair (0, 2) at 0.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let dims = 3;
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let identity: Vec<f64> = (0..9).map(|i| f64::from(u8::from(i % 4 == 0))).collect();
        for rows in [40, 3000] {
            let real: Vec<f64> = (0..rows * dims).map(|_| rng.random_range(0.0..0.8)).collect();
            let synth: Vec<f64> =
                real.iter().enumerate().map(|(i, &x)| if i % dims == 1 { x + 0.2 } else { x }).collect();
            let found =
                pairwise_w1(&real, &synth, dims, &names, &identity, &identity, PairSelection::All, 0).unwrap().unwrap();
            assert_eq!(found.pairs.len(), 3);
            let expected = [0.2, 0.0, 0.2];
            for (pair, want) in found.pairs.iter().zip(expected) {
                assert!((pair.w1 - want).abs() <= pair.error_bound + 1e-9, "{rows} rows: {pair:?} vs {want}");
                let method = if rows == 40 { W1Method::ExactTransport } else { W1Method::Grid };
                assert_eq!(pair.method, method);
                assert!(pair.error_bound <= 1.0 / PAIRWISE_GRID_SIDE as f64);
            }
            assert_eq!(found.pairs[0].columns, ["a".to_string(), "b".to_string()]);
            assert!((found.mean - (found.pairs.iter().map(|p| p.w1).sum::<f64>() / 3.0)).abs() < 1e-15);
            assert!(found.worst_columns.contains(&"b".to_string()));
        }
        assert!(pairwise_w1(&[0.5], &[0.5], 1, &names[..1], &[1.0], &[1.0], PairSelection::All, 0).unwrap().is_none());
    }

    #[test]
    fn pair_selection_picks_none_a_seeded_sample_or_all_and_parses_its_three_forms() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let dims = 5;
        let names: Vec<String> = ["a", "b", "c", "d", "e"].iter().map(|s| s.to_string()).collect();
        let identity: Vec<f64> = (0..dims * dims).map(|i| f64::from(u8::from(i % (dims + 1) == 0))).collect();
        let real: Vec<f64> = (0..60 * dims).map(|_| rng.random_range(0.0..1.0)).collect();
        let synth: Vec<f64> = (0..60 * dims).map(|_| rng.random_range(0.0..1.0)).collect();
        let run = |selection, seed| pairwise_w1(&real, &synth, dims, &names, &identity, &identity, selection, seed);
        assert!(run(PairSelection::None, 0).unwrap().is_none());

        let all = run(PairSelection::All, 0).unwrap().unwrap();
        assert_eq!((all.pairs.len(), all.pairs_compared, all.pairs_total), (10, 10, 10));
        assert_eq!(all.coverage(), "");
        assert_eq!(run(PairSelection::Sample(10), 7).unwrap().unwrap(), all);
        assert_eq!(run(PairSelection::Sample(99), 7).unwrap().unwrap(), all);

        let sample = run(PairSelection::Sample(3), 1).unwrap().unwrap();
        assert_eq!((sample.pairs.len(), sample.pairs_compared, sample.pairs_total), (3, 3, 10));
        assert_eq!(sample.coverage(), " over 3 of 10 pairs (a seeded sample)");
        let axes: Vec<[usize; 2]> = sample.pairs.iter().map(|pair| pair.axes).collect();
        assert!(axes.windows(2).all(|w| w[0] < w[1]), "distinct, in lexicographic order: {axes:?}");
        for (pair, [i, j]) in sample.pairs.iter().zip(&axes) {
            assert!(i < j && *j < dims);
            assert_eq!(pair.columns, [names[*i].clone(), names[*j].clone()]);
            // The same numbers as in the full run.
            assert_eq!(Some(pair), all.pairs.iter().find(|p| p.axes == [*i, *j]));
        }
        assert_eq!(run(PairSelection::Sample(3), 1).unwrap().unwrap(), sample);
        // Another seed gives other pairs (in general: over several seeds, at least one differs).
        assert!((2..8).any(|seed| PairSelection::Sample(3).pairs(dims, seed) != axes));
        // The draw does not depend on the thread count.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        assert_eq!(pool.install(|| run(PairSelection::Sample(3), 1)).unwrap().unwrap(), sample);
        // Every pair is drawn at some seed, each draw distinct and in range (d = 7: 21 pairs).
        let mut seen = BTreeSet::new();
        for seed in 0..200 {
            let drawn = PairSelection::Sample(4).pairs(7, seed);
            assert_eq!(drawn.len(), 4);
            assert!(drawn.windows(2).all(|w| w[0] < w[1]) && drawn.iter().all(|&[i, j]| i < j && j < 7));
            seen.extend(drawn);
        }
        assert_eq!(seen.len(), 21);

        assert_eq!(PairSelection::default_for(20), PairSelection::All);
        assert_eq!(PairSelection::All.pairs(20, 0).len(), DEFAULT_MAX_PAIRS);
        assert_eq!(PairSelection::default_for(21), PairSelection::Sample(DEFAULT_MAX_PAIRS));
        assert_eq!(PairSelection::default_for(21).pairs(21, 0).len(), 190);
        assert_eq!(PairSelection::default_for(1), PairSelection::All);

        assert_eq!("none".parse(), Ok(PairSelection::None));
        assert_eq!("sample:3".parse(), Ok(PairSelection::Sample(3)));
        assert_eq!("all".parse(), Ok(PairSelection::All));
        for bad in ["sample:0", "sample:x", "some", "sample:", ""] {
            let error = bad.parse::<PairSelection>().unwrap_err();
            assert!(error.contains("--pairs") && error.contains("none, sample:K") && error.contains("all"), "{error}");
        }
        for selection in [PairSelection::None, PairSelection::Sample(3), PairSelection::All] {
            assert_eq!(selection.to_string().parse(), Ok(selection));
        }
    }
}
