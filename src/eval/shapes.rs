//! Scores that read each column by its type (numbers, dates and timestamps; categories; Booleans; null):
//! the shape of every column, the trend of every column pair, and whether the synthetic values stay in the
//! public domain and in the support of the real table. The names follow SDMetrics' Quality and Diagnostic
//! reports, whose users expect them:
//!
//! - column shape: 1 − KS statistic for a number (null is its lowest value, so a different null share
//!   shows), 1 − total variation of the category shares for a coded column (null and "other" included);
//! - pair trend: 1 − total variation of the pair's contingency table, a number on [`PAIR_BINS`] equal bins
//!   of its public bounds (plus null), a coded column by its codes; beside it the error of the pair's
//!   association measure: Pearson's r (two numbers), Cramér's V (two coded columns), the correlation ratio
//!   η (a coded column and a number);
//! - domain adherence: the share of synthetic values inside the public bounds or list;
//! - support: the share of synthetic rows with a value (or, for a pair, a cell) the real table never has.

use rayon::prelude::*;
use serde::Serialize;

use super::table::{EvalColumn, Table, ValueType};

/// Equal bins of a number's public bounds in a pair's contingency table.
pub const PAIR_BINS: usize = 10;

/// A real column with at most this many distinct values (and at most one per [`DISCRETE_ROWS_PER_VALUE`]
/// rows) is read as discrete: a synthetic value it never has is then off its support.
pub const DISCRETE_MAX_VALUES: usize = 10_000;
pub const DISCRETE_ROWS_PER_VALUE: usize = 20;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColumnShape {
    pub name: String,
    /// "number", "categorical" or "boolean".
    pub value_type: &'static str,
    /// "ks_complement" or "tv_complement".
    pub metric: &'static str,
    /// 1 = same shape, 0 = disjoint.
    pub score: f64,
    pub null_share_real: f64,
    pub null_share_synth: f64,
    /// Share of synthetic values inside the public bounds (before clamping) or the public list.
    pub in_domain_share_synth: f64,
    pub distinct_real: usize,
    pub distinct_synth: usize,
    /// Whether the real column looks discrete (see [`DISCRETE_MAX_VALUES`]); `unseen_value_share` only
    /// means something then.
    pub discrete: bool,
    /// Share of synthetic rows whose value the real column never has.
    pub unseen_value_share: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairTrend {
    pub columns: [String; 2],
    /// 1 − total variation of the contingency tables (numbers on public bins).
    pub score: f64,
    /// "pearson", "cramers_v" or "correlation_ratio".
    pub association: &'static str,
    pub association_real: f64,
    pub association_synth: f64,
    pub association_error: f64,
    /// Share of synthetic rows in a cell of the contingency table that no real row is in.
    pub unseen_combination_share: f64,
}

/// One column of a table as the scores read it: its values in normalised units.
fn column_units(table: &Table, axis: usize) -> Vec<f64> {
    table.points[axis..].iter().step_by(table.dims()).copied().collect()
}

/// The code of a coded column's value (−1 for null, the list's length for "other").
fn code(table: &Table, axis: usize, unit: f64) -> i64 {
    table.bounds[axis].denormalise(unit).round() as i64
}

/// The cell of a value in a pair's contingency table: 0 for null, then a number's public bin or a code.
fn cell(table: &Table, axis: usize, unit: f64) -> usize {
    let column = &table.columns[axis];
    if column.is_null(unit) {
        return 0;
    }
    match column.value_type {
        ValueType::Number { .. } => {
            let public = &column.public;
            let share = (table.bounds[axis].denormalise(unit) - public.lo) / (public.hi - public.lo);
            1 + ((share * PAIR_BINS as f64).floor().max(0.0) as usize).min(PAIR_BINS - 1)
        }
        _ => (code(table, axis, unit) + 1).max(0) as usize,
    }
}

fn cells(column: &EvalColumn) -> usize {
    match column.value_type {
        ValueType::Number { .. } => PAIR_BINS + 1,
        // Null, the codes, and one spare past "other".
        _ => (column.public.hi + 0.5).round() as usize + 2,
    }
}

/// Largest gap between the empirical CDFs of two sorted samples.
pub fn ks_statistic(a: &[f64], b: &[f64]) -> f64 {
    let (mut i, mut j, mut largest) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        largest = largest.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    largest
}

/// Half the ℓ1 distance between the shares of two count vectors.
pub fn total_variation(a: &[u64], b: &[u64]) -> f64 {
    let (total_a, total_b) = (a.iter().sum::<u64>().max(1) as f64, b.iter().sum::<u64>().max(1) as f64);
    0.5 * a.iter().zip(b).map(|(&x, &y)| (x as f64 / total_a - y as f64 / total_b).abs()).sum::<f64>()
}

/// Distinct values of a sorted sample.
fn distinct(sorted: &[f64]) -> usize {
    sorted.iter().zip(sorted.iter().skip(1)).filter(|(a, b)| a != b).count() + usize::from(!sorted.is_empty())
}

/// Share of the sorted `synth` values absent from the sorted `real` ones.
fn unseen_share(real: &[f64], synth: &[f64]) -> f64 {
    let (mut i, mut unseen) = (0, 0usize);
    for &value in synth {
        while i < real.len() && real[i] < value {
            i += 1;
        }
        unseen += usize::from(i == real.len() || real[i] != value);
    }
    unseen as f64 / synth.len().max(1) as f64
}

/// The shape score of every column.
pub fn column_shapes(real: &Table, synth: &Table) -> Vec<ColumnShape> {
    (0..real.dims()).into_par_iter().map(|axis| column_shape(real, synth, axis)).collect()
}

fn column_shape(real: &Table, synth: &Table, axis: usize) -> ColumnShape {
    let column = &real.columns[axis];
    let (mut real_units, mut synth_units) = (column_units(real, axis), column_units(synth, axis));
    real_units.sort_unstable_by(f64::total_cmp);
    synth_units.sort_unstable_by(f64::total_cmp);
    let null_share = |table: &Table, units: &[f64]| {
        units.iter().filter(|&&unit| table.columns[axis].is_null(unit)).count() as f64 / units.len().max(1) as f64
    };
    let (metric, score, in_domain) = match &column.value_type {
        ValueType::Number { .. } => {
            let clamped = synth.clamped_values[axis] as f64 / synth_units.len().max(1) as f64;
            ("ks_complement", 1.0 - ks_statistic(&real_units, &synth_units), 1.0 - clamped)
        }
        coded => {
            let codes = cells(column);
            let histogram = |table: &Table, units: &[f64]| {
                let mut counts = vec![0u64; codes];
                for &unit in units {
                    counts[((code(table, axis, unit) + 1).max(0) as usize).min(codes - 1)] += 1;
                }
                counts
            };
            let (counts_real, counts_synth) = (histogram(real, &real_units), histogram(synth, &synth_units));
            let listed = match coded {
                ValueType::Categories { names } => names.len(),
                _ => 2,
            };
            // Codes 0..listed are in the list; null (slot 0) is a value of the domain too.
            let outside: u64 = counts_synth[listed + 1..].iter().sum();
            let in_domain = 1.0 - outside as f64 / synth_units.len().max(1) as f64;
            ("tv_complement", 1.0 - total_variation(&counts_real, &counts_synth), in_domain)
        }
    };
    let distinct_real = distinct(&real_units);
    let discrete = !column.value_type.is_number()
        || (distinct_real <= DISCRETE_MAX_VALUES && distinct_real * DISCRETE_ROWS_PER_VALUE <= real_units.len());
    ColumnShape {
        name: column.name.clone(),
        value_type: column.value_type.name(),
        metric,
        score,
        null_share_real: null_share(real, &real_units),
        null_share_synth: null_share(synth, &synth_units),
        in_domain_share_synth: in_domain,
        distinct_real,
        distinct_synth: distinct(&synth_units),
        discrete,
        unseen_value_share: unseen_share(&real_units, &synth_units),
    }
}

/// The trend score of every column pair.
pub fn pair_trends(real: &Table, synth: &Table) -> Vec<PairTrend> {
    let dims = real.dims();
    let pairs: Vec<(usize, usize)> = (0..dims).flat_map(|a| (a + 1..dims).map(move |b| (a, b))).collect();
    pairs.into_par_iter().map(|(a, b)| pair_trend(real, synth, a, b)).collect()
}

fn contingency(table: &Table, a: usize, b: usize, side_b: usize, size: usize) -> Vec<u64> {
    let mut counts = vec![0u64; size];
    for row in table.points.chunks_exact(table.dims()) {
        counts[cell(table, a, row[a]) * side_b + cell(table, b, row[b])] += 1;
    }
    counts
}

fn pair_trend(real: &Table, synth: &Table, a: usize, b: usize) -> PairTrend {
    let (column_a, column_b) = (&real.columns[a], &real.columns[b]);
    let (side_a, side_b) = (cells(column_a), cells(column_b));
    let (counts_real, counts_synth) =
        (contingency(real, a, b, side_b, side_a * side_b), contingency(synth, a, b, side_b, side_a * side_b));
    let synth_rows = synth.rows().max(1) as f64;
    let unseen: u64 = counts_real.iter().zip(&counts_synth).filter(|(&r, _)| r == 0).map(|(_, &s)| s).sum();
    let (association, measure): (&'static str, fn(&Table, usize, usize) -> f64) =
        match (column_a.value_type.is_number(), column_b.value_type.is_number()) {
            (true, true) => ("pearson", pearson),
            (false, false) => ("cramers_v", cramers_v),
            _ => ("correlation_ratio", correlation_ratio),
        };
    let (association_real, association_synth) = (measure(real, a, b), measure(synth, a, b));
    PairTrend {
        columns: [column_a.name.clone(), column_b.name.clone()],
        score: 1.0 - total_variation(&counts_real, &counts_synth),
        association,
        association_real,
        association_synth,
        association_error: (association_real - association_synth).abs(),
        unseen_combination_share: unseen as f64 / synth_rows,
    }
}

/// Pearson's r over the rows where neither number is null (0 where one is constant).
pub fn pearson(table: &Table, a: usize, b: usize) -> f64 {
    let (column_a, column_b) = (&table.columns[a], &table.columns[b]);
    let (mut n, mut sa, mut sb, mut saa, mut sbb, mut sab) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for row in table.points.chunks_exact(table.dims()) {
        let (x, y) = (row[a], row[b]);
        if column_a.is_null(x) || column_b.is_null(y) {
            continue;
        }
        n += 1.0;
        sa += x;
        sb += y;
        saa += x * x;
        sbb += y * y;
        sab += x * y;
    }
    let covariance = sab / n - (sa / n) * (sb / n);
    let (var_a, var_b) = (saa / n - (sa / n).powi(2), sbb / n - (sb / n).powi(2));
    if n < 2.0 || var_a <= 1e-15 || var_b <= 1e-15 {
        return 0.0;
    }
    (covariance / (var_a * var_b).sqrt()).clamp(-1.0, 1.0)
}

/// Cramér's V of two coded columns (null a category), over the categories that occur.
pub fn cramers_v(table: &Table, a: usize, b: usize) -> f64 {
    let (side_a, side_b) = (cells(&table.columns[a]), cells(&table.columns[b]));
    let counts = contingency(table, a, b, side_b, side_a * side_b);
    let n = counts.iter().sum::<u64>() as f64;
    let rows: Vec<f64> = (0..side_a).map(|i| counts[i * side_b..(i + 1) * side_b].iter().sum::<u64>() as f64).collect();
    let columns: Vec<f64> =
        (0..side_b).map(|j| (0..side_a).map(|i| counts[i * side_b + j]).sum::<u64>() as f64).collect();
    let mut chi2 = 0.0;
    for i in (0..side_a).filter(|&i| rows[i] > 0.0) {
        for j in (0..side_b).filter(|&j| columns[j] > 0.0) {
            let expected = rows[i] * columns[j] / n;
            chi2 += (counts[i * side_b + j] as f64 - expected).powi(2) / expected;
        }
    }
    let levels = rows.iter().filter(|&&r| r > 0.0).count().min(columns.iter().filter(|&&c| c > 0.0).count());
    if levels < 2 {
        return 0.0;
    }
    (chi2 / n / (levels - 1) as f64).sqrt().min(1.0)
}

/// The correlation ratio η of a number by the categories of a coded column (either may come first), over
/// the rows where the number is not null.
pub fn correlation_ratio(table: &Table, a: usize, b: usize) -> f64 {
    let (coded, number) = if table.columns[a].value_type.is_number() { (b, a) } else { (a, b) };
    let side = cells(&table.columns[coded]);
    let (mut counts, mut sums) = (vec![0.0; side], vec![0.0; side]);
    let (mut n, mut total, mut squares) = (0.0, 0.0, 0.0);
    for row in table.points.chunks_exact(table.dims()) {
        let value = row[number];
        if table.columns[number].is_null(value) {
            continue;
        }
        let group = cell(table, coded, row[coded]);
        counts[group] += 1.0;
        sums[group] += value;
        n += 1.0;
        total += value;
        squares += value * value;
    }
    let spread = squares - total * total / n;
    if n < 2.0 || spread <= 1e-12 * n {
        return 0.0;
    }
    let between: f64 =
        counts.iter().zip(&sums).filter(|(&c, _)| c > 0.0).map(|(&c, &s)| s * s / c).sum::<f64>() - total * total / n;
    (between / spread).clamp(0.0, 1.0).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::bounds::ColumnBounds;

    #[test]
    fn ks_and_tv_match_hand_worked_cases() {
        // CDFs of {1,2,3,4} and {3,4,5,6} differ most at 2 (0.5 vs 0).
        assert_eq!(ks_statistic(&[1.0, 2.0, 3.0, 4.0], &[3.0, 4.0, 5.0, 6.0]), 0.5);
        assert_eq!(ks_statistic(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert_eq!(total_variation(&[2, 2], &[1, 3]), 0.25);
        assert_eq!(unseen_share(&[1.0, 2.0], &[1.0, 1.5, 2.0, 3.0]), 0.5);
        assert_eq!(distinct(&[1.0, 1.0, 2.0]), 2);
    }

    #[test]
    fn association_measures_match_hand_worked_cases() {
        // Two numbers on [0, 1]: y = 1 − x gives r = −1.
        let bounds = vec![ColumnBounds::new("x", 0.0, 1.0).unwrap(), ColumnBounds::new("y", 0.0, 1.0).unwrap()];
        let table = Table::of_numbers("t", bounds, vec![0.0, 1.0, 0.5, 0.5, 1.0, 0.0]);
        assert!((pearson(&table, 0, 1) + 1.0).abs() < 1e-12);
        // The number is a function of the category: η = 1; a category of the same mean in each group: 0.
        let mut mixed = Table::of_numbers(
            "t",
            vec![ColumnBounds::new("c", -0.5, 1.5).unwrap(), ColumnBounds::new("v", 0.0, 1.0).unwrap()],
            // codes 0, 1, 0, 1 (units (code + 0.5) / 2), values 0.2, 0.8, 0.2, 0.8
            vec![0.25, 0.2, 0.75, 0.8, 0.25, 0.2, 0.75, 0.8],
        );
        mixed.columns[0].value_type = ValueType::Boolean;
        assert!((correlation_ratio(&mixed, 0, 1) - 1.0).abs() < 1e-12);
        mixed.points = vec![0.25, 0.2, 0.75, 0.2, 0.25, 0.8, 0.75, 0.8];
        assert!(correlation_ratio(&mixed, 1, 0).abs() < 1e-12);
        // Two Booleans equal on every row: V = 1; independent (each combination once): V = 0.
        let mut coded = Table::of_numbers(
            "t",
            vec![ColumnBounds::new("a", -0.5, 1.5).unwrap(), ColumnBounds::new("b", -0.5, 1.5).unwrap()],
            vec![0.25, 0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 0.75],
        );
        coded.columns[0].value_type = ValueType::Boolean;
        coded.columns[1].value_type = ValueType::Boolean;
        assert!((cramers_v(&coded, 0, 1) - 1.0).abs() < 1e-12);
        coded.points = vec![0.25, 0.25, 0.75, 0.75, 0.25, 0.75, 0.75, 0.25];
        assert!(cramers_v(&coded, 0, 1).abs() < 1e-12);
    }
}
