//! Disclosure-risk figures (`--holdout H`: real rows that synthesis did not read), for the owner only:
//! they are computed from the real rows and must never be published.
//!
//! - distance to closest record (DCR): for synthetic rows and for holdout rows, the distance to the nearest
//!   training row; a synthetic table that memorises sits closer to the training rows than fresh real rows do
//!   (ratio of medians below 1);
//! - the share of synthetic rows closer to a training row than to any holdout row (the training and holdout
//!   references have the same size, so a table that does not memorise gives about 0.5);
//! - exact copies: the share of synthetic rows equal to a training row, beside the share of holdout rows
//!   equal to one (what duplicates in the data give anyway);
//! - membership inference: the ROC AUC of the standard distance attack, which calls a real row a member
//!   when a synthetic row lies close to it (0.5: members and non-members look alike).
//!
//! Distances are Gower's: the mean over columns of |difference| in normalised units for a number, and 0 or
//! 1 (equal or not) for a categorical or Boolean column.
//!
//! What these can and cannot show: under ε-DP the synthetic table cannot depend much on any one row, so
//! these figures should look like a fresh sample's. They are empirical checks of one table against one
//! attack: a quiet result does not prove privacy (only the DP guarantee bounds every attack), and a loud
//! one on a DP release means a bug or a domain read from the data, not bad luck.

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::Serialize;

use super::learn::roc_auc;
use super::table::Table;

/// Query rows (synthetic, holdout, training) whose nearest neighbours are searched.
pub const QUERY_ROWS: usize = 2000;
/// Rows of each reference table searched (training, holdout, synthetic): brute force stays within seconds.
pub const REFERENCE_ROWS: usize = 20_000;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Disclosure {
    pub holdout_file: String,
    pub query_rows: usize,
    pub reference_rows: usize,
    /// Whether queries or references are random subsets (exact copies are counted on every row).
    pub sampled: bool,
    /// Median Gower distance from a synthetic row to its closest training row.
    pub dcr_synth_median: f64,
    /// The same from a holdout row.
    pub dcr_holdout_median: f64,
    /// dcr_synth_median / dcr_holdout_median; null when the holdout median is 0.
    pub dcr_ratio: Option<f64>,
    /// Share of synthetic rows closer to a training row than to any holdout row (ties count half); about
    /// 0.5 without memorisation.
    pub closer_to_train_share: f64,
    /// Share of synthetic rows equal to a training row.
    pub exact_copy_share: f64,
    /// Share of holdout rows equal to a training row: the level duplicates in the data give.
    pub holdout_exact_copy_share: f64,
    /// ROC AUC of the distance attack telling training rows from holdout rows.
    pub membership_inference_auc: f64,
}

/// Gower distance between two rows.
fn distance(a: &[f64], b: &[f64], coded: &[bool]) -> f64 {
    let total: f64 = a
        .iter()
        .zip(b)
        .zip(coded)
        .map(|((x, y), &coded)| if coded { f64::from(u8::from(x != y)) } else { (x - y).abs() })
        .sum();
    total / a.len() as f64
}

/// Each query's distance to its nearest reference row.
fn nearest(queries: &[&[f64]], references: &[&[f64]], coded: &[bool]) -> Vec<f64> {
    queries
        .par_iter()
        .map(|query| references.iter().map(|row| distance(query, row, coded)).fold(f64::INFINITY, f64::min))
        .collect()
}

fn rows<'a>(table: &'a Table, count: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<&'a [f64]> {
    let mut all: Vec<&[f64]> = table.points.chunks_exact(table.dims()).collect();
    if all.len() > count {
        all.shuffle(rng);
        all.truncate(count);
    }
    all
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// A row's hash (of its values' bits, in normalised units).
fn row_hash(row: &[f64]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for unit in row {
        hasher.write_u64(unit.to_bits());
    }
    hasher.finish()
}

/// The training rows by hash, sorted: a row's equals are found by binary search and then compared, with
/// no allocation per row (a million rows take a fraction of a second).
fn hashed_rows(table: &Table) -> Vec<(u64, usize)> {
    let mut keys: Vec<(u64, usize)> =
        table.points.par_chunks_exact(table.dims()).enumerate().map(|(row, values)| (row_hash(values), row)).collect();
    keys.par_sort_unstable();
    keys
}

/// Share of `table`'s rows equal to a row of `train` (bit for bit, in normalised units).
fn copy_share(train: &Table, keys: &[(u64, usize)], table: &Table) -> f64 {
    let dims = train.dims();
    let copies = table
        .points
        .par_chunks_exact(dims)
        .filter(|row| {
            let hash = row_hash(row);
            let first = keys.partition_point(|&(key, _)| key < hash);
            keys[first..]
                .iter()
                .take_while(|&&(key, _)| key == hash)
                .any(|&(_, index)| &train.points[index * dims..(index + 1) * dims] == *row)
        })
        .count();
    copies as f64 / table.rows().max(1) as f64
}

/// The disclosure figures of `synth`, made from `train` (the real rows synthesis read) and `holdout`.
pub fn disclosure(train: &Table, holdout: &Table, synth: &Table, seed: u64) -> Disclosure {
    let coded: Vec<bool> = train.columns.iter().map(|column| !column.value_type.is_number()).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let reference_rows = REFERENCE_ROWS.min(train.rows()).min(holdout.rows());
    let train_reference = rows(train, reference_rows, &mut rng);
    let holdout_reference = rows(holdout, reference_rows, &mut rng);
    let synth_queries = rows(synth, QUERY_ROWS, &mut rng);
    let holdout_queries = rows(holdout, QUERY_ROWS, &mut rng);
    let member_queries = rows(train, QUERY_ROWS.min(holdout_queries.len()), &mut rng);
    let synth_reference = rows(synth, REFERENCE_ROWS, &mut rng);

    let synth_to_train = nearest(&synth_queries, &train_reference, &coded);
    let synth_to_holdout = nearest(&synth_queries, &holdout_reference, &coded);
    // A holdout row is its own nearest neighbour in the holdout reference; against the training reference
    // it is a fresh row.
    let holdout_to_train = nearest(&holdout_queries, &train_reference, &coded);
    let closer: f64 = synth_to_train
        .iter()
        .zip(&synth_to_holdout)
        .map(|(t, h)| match t.total_cmp(h) {
            std::cmp::Ordering::Less => 1.0,
            std::cmp::Ordering::Equal => 0.5,
            std::cmp::Ordering::Greater => 0.0,
        })
        .sum();
    let member_distance = nearest(&member_queries, &synth_reference, &coded);
    let non_member_distance = nearest(&holdout_queries, &synth_reference, &coded);
    let scores: Vec<f64> = member_distance.iter().chain(&non_member_distance).map(|distance| -distance).collect();
    let members: Vec<bool> = (0..scores.len()).map(|k| k < member_distance.len()).collect();

    let training = hashed_rows(train);
    let (dcr_synth_median, dcr_holdout_median) = (median(synth_to_train.clone()), median(holdout_to_train));
    Disclosure {
        holdout_file: holdout.file.display().to_string(),
        query_rows: synth_queries.len(),
        reference_rows,
        sampled: synth.rows() > QUERY_ROWS || train.rows() > reference_rows || holdout.rows() > reference_rows,
        dcr_synth_median,
        dcr_holdout_median,
        dcr_ratio: (dcr_holdout_median > 0.0).then(|| dcr_synth_median / dcr_holdout_median),
        closer_to_train_share: closer / synth_queries.len().max(1) as f64,
        exact_copy_share: copy_share(train, &training, synth),
        holdout_exact_copy_share: copy_share(train, &training, holdout),
        membership_inference_auc: roc_auc(&scores, &members),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gower_distance_and_median_by_hand() {
        // |0.2 − 0.6| = 0.4 on the number, 1 on the mismatched code: (0.4 + 1) / 2.
        assert!((distance(&[0.2, 0.25], &[0.6, 0.75], &[false, true]) - 0.7).abs() < 1e-12);
        assert_eq!(distance(&[0.2, 0.25], &[0.2, 0.25], &[false, true]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
