//! Scores that train a model (smartcore's learners; this module only samples rows, splits folds and scores):
//!
//! - detection: can a classifier tell real rows from synthetic ones? Logistic regression and gradient-boosted
//!   trees, each cross-validated on a balanced sample of both tables; the ROC AUC of the better one (0.5:
//!   indistinguishable, 1: always told apart). The detection score is 2·(1 − max(AUC, 0.5)), as SDMetrics'.
//! - utility (`--target COLUMN`): a model of the target from the other columns, trained on synthetic rows and
//!   tested on real ones, beside the same model trained on real rows (disjoint from the test rows): R² for a
//!   number, accuracy and macro F1 for a categorical or Boolean target.
//!
//! Both are sampled ([`LEARN_ROWS`] rows per table), which the report says.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus as Rng;
use serde::Serialize;
use smartcore::ensemble::random_forest_classifier::{RandomForestClassifier, RandomForestClassifierParameters};
use smartcore::linalg::basic::arrays::Array;
use smartcore::linalg::basic::matrix::DenseMatrix;
use smartcore::linear::logistic_regression::{LogisticRegression, LogisticRegressionParameters};
use smartcore::xgboost::{XGRegressor, XGRegressorParameters};

use super::table::{Table, ValueType};
use crate::error::{Error, Result};

/// Rows drawn from each table for a model (the default of `--detection-rows`): an AUC within about ±0.01,
/// seconds on two cores.
pub const LEARN_ROWS: usize = 4000;

/// Fewer rows in a table leave the detection score out (a warning says so): its folds would hold a handful
/// of rows each.
pub const MIN_DETECTION_ROWS: usize = 50;

/// Cross-validation folds of the detection score.
pub const FOLDS: usize = 5;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Detection {
    /// Rows drawn from each table.
    pub rows_per_table: usize,
    pub folds: usize,
    pub logistic_regression_auc: f64,
    pub boosted_trees_auc: f64,
    /// 2·(1 − max(AUC, 0.5)) of the better classifier: 1 = indistinguishable, 0 = always told apart.
    pub score: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelScores {
    /// R² (a number target).
    pub r2: Option<f64>,
    /// Accuracy and macro F1 (a categorical or Boolean target).
    pub accuracy: Option<f64>,
    pub macro_f1: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Utility {
    pub target: String,
    /// "regression" or "classification".
    pub task: &'static str,
    pub model: &'static str,
    pub train_rows: usize,
    pub test_rows: usize,
    /// Trained on synthetic rows, tested on real ones.
    pub train_synth_test_real: ModelScores,
    /// Trained on real rows, tested on other real ones: what the synthetic table is compared with.
    pub train_real_test_real: ModelScores,
    /// Where the real test rows come from: the holdout table, or real rows synthesis may have seen.
    pub test_rows_from: String,
}

fn failed(what: &str, error: impl std::fmt::Display) -> Error {
    Error::internal(format!("{what}: {error}"))
}

/// `count` row indices of `table` drawn without replacement (all of them, shuffled, if fewer).
fn draw(rows: usize, count: usize, rng: &mut Rng) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..rows).collect();
    indices.shuffle(rng);
    indices.truncate(count);
    indices
}

/// The rows `indices` of `table`, columns `features`, as a row-major matrix.
fn features(table: &Table, indices: &[usize], columns: &[usize]) -> Result<DenseMatrix<f64>> {
    let dims = table.dims();
    let values: Vec<f64> =
        indices.iter().flat_map(|&row| columns.iter().map(move |&axis| table.points[row * dims + axis])).collect();
    DenseMatrix::new(indices.len(), columns.len(), values, false).map_err(|error| failed("feature matrix", error))
}

/// ROC AUC of `scores` for the labels (Mann–Whitney U with mid-ranks for ties).
pub fn roc_auc(scores: &[f64], positive: &[bool]) -> f64 {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut ranks = vec![0.0; scores.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len() && scores[order[end + 1]] == scores[order[start]] {
            end += 1;
        }
        let mid_rank = (start + end) as f64 / 2.0 + 1.0;
        for &index in &order[start..=end] {
            ranks[index] = mid_rank;
        }
        start = end + 1;
    }
    let positives = positive.iter().filter(|&&p| p).count() as f64;
    let negatives = positive.len() as f64 - positives;
    if positives == 0.0 || negatives == 0.0 {
        return 0.5;
    }
    let rank_sum: f64 = ranks.iter().zip(positive).filter(|(_, &p)| p).map(|(rank, _)| rank).sum();
    (rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives)
}

/// The detection score of a synthetic table.
pub fn detection(real: &Table, synth: &Table, sample_rows: usize, seed: u64) -> Result<Detection> {
    let mut rng = Rng::seed_from_u64(seed);
    let rows = sample_rows.min(real.rows()).min(synth.rows());
    if rows < FOLDS {
        return Err(Error::bad_input(format!("--detection-rows {sample_rows}: at least {FOLDS} rows are needed")));
    }
    let columns: Vec<usize> = (0..real.dims()).collect();
    let (real_rows, synth_rows) = (draw(real.rows(), rows, &mut rng), draw(synth.rows(), rows, &mut rng));
    // Sample k: real when k < rows. The folds cut a shuffled order of both tables' samples.
    let mut order: Vec<usize> = (0..2 * rows).collect();
    order.shuffle(&mut rng);
    let (mut logistic_scores, mut tree_scores) = (vec![0.0; 2 * rows], vec![0.0; 2 * rows]);
    let matrix_of = |samples: &[usize]| -> Result<DenseMatrix<f64>> {
        let (real_part, synth_part): (Vec<usize>, Vec<usize>) = samples.iter().partition(|&&k| k < rows);
        let real_part: Vec<usize> = real_part.iter().map(|&k| real_rows[k]).collect();
        let synth_part: Vec<usize> = synth_part.iter().map(|&k| synth_rows[k - rows]).collect();
        let (a, b) = (features(real, &real_part, &columns)?, features(synth, &synth_part, &columns)?);
        let mut values: Vec<f64> = Vec::with_capacity((real_part.len() + synth_part.len()) * columns.len());
        for matrix in [&a, &b] {
            let (n, m) = matrix.shape();
            for i in 0..n {
                for j in 0..m {
                    values.push(*matrix.get((i, j)));
                }
            }
        }
        DenseMatrix::new(real_part.len() + synth_part.len(), columns.len(), values, false)
            .map_err(|error| failed("detection matrix", error))
    };
    // Rows of `matrix_of(samples)` are its real samples first: the order the labels and scores follow.
    let sorted = |samples: &[usize]| -> Vec<usize> {
        let (mut real_part, synth_part): (Vec<usize>, Vec<usize>) = samples.iter().partition(|&&k| k < rows);
        real_part.extend(synth_part);
        real_part
    };
    for fold in 0..FOLDS {
        let test: Vec<usize> = sorted(&order.iter().copied().skip(fold).step_by(FOLDS).collect::<Vec<_>>());
        let train: Vec<usize> =
            sorted(&order.iter().enumerate().filter(|(i, _)| i % FOLDS != fold).map(|(_, &k)| k).collect::<Vec<_>>());
        let (x_train, x_test) = (matrix_of(&train)?, matrix_of(&test)?);
        let labels: Vec<i32> = train.iter().map(|&k| i32::from(k < rows)).collect();
        let logistic =
            LogisticRegression::fit(&x_train, &labels, LogisticRegressionParameters::default().with_alpha(1e-3))
                .map_err(|error| failed("logistic regression", error))?;
        let (coefficients, intercept) = (logistic.coefficients(), *logistic.intercept().get((0, 0)));
        let targets: Vec<f64> = labels.iter().map(|&label| f64::from(label)).collect();
        let boosted = XGRegressor::fit(
            &x_train,
            &targets,
            XGRegressorParameters::default().with_n_estimators(40).with_max_depth(4).with_seed(seed),
        )
        .map_err(|error| failed("boosted trees", error))?;
        let predicted = boosted.predict(&x_test).map_err(|error| failed("boosted trees", error))?;
        for (i, &k) in test.iter().enumerate() {
            logistic_scores[k] =
                intercept + (0..columns.len()).map(|j| coefficients.get((0, j)) * x_test.get((i, j))).sum::<f64>();
            tree_scores[k] = predicted[i];
        }
    }
    let labels: Vec<bool> = (0..2 * rows).map(|k| k < rows).collect();
    let (logistic_auc, tree_auc) = (roc_auc(&logistic_scores, &labels), roc_auc(&tree_scores, &labels));
    Ok(Detection {
        rows_per_table: rows,
        folds: FOLDS,
        logistic_regression_auc: logistic_auc,
        boosted_trees_auc: tree_auc,
        score: 2.0 * (1.0 - logistic_auc.max(tree_auc).max(0.5)),
    })
}

/// Train-on-synthetic-test-on-real for `target`, beside train-on-real. The test rows are `holdout`'s when
/// given, else half of the real rows (the other half trains the real model).
pub fn utility(real: &Table, synth: &Table, holdout: Option<&Table>, target: &str, seed: u64) -> Result<Utility> {
    let axis = real.columns.iter().position(|column| column.name == target).ok_or_else(|| {
        let names: Vec<&str> = real.columns.iter().map(|column| column.name.as_str()).collect();
        Error::bad_input(format!("--target {target}: not a compared column (they are: {})", names.join(", ")))
    })?;
    let column = &real.columns[axis];
    let features_of: Vec<usize> = (0..real.dims()).filter(|&k| k != axis).collect();
    if features_of.is_empty() {
        return Err(Error::bad_input(format!("--target {target}: no other compared column to predict it from")));
    }
    let mut rng = Rng::seed_from_u64(seed);
    let valid = |table: &Table| -> Vec<usize> {
        (0..table.rows()).filter(|&row| !column.is_null(table.points[row * table.dims() + axis])).collect()
    };
    let pick = |mut rows: Vec<usize>, count: usize, rng: &mut Rng| {
        rows.shuffle(rng);
        rows.truncate(count);
        rows
    };
    let real_valid = valid(real);
    let (real_train, test_table, test_rows, test_rows_from) = match holdout {
        Some(holdout) => {
            let train = pick(real_valid, LEARN_ROWS, &mut rng);
            let test = pick(valid(holdout), LEARN_ROWS, &mut rng);
            (train, holdout, test, format!("the holdout table {}", holdout.file.display()))
        }
        None => {
            let mut shuffled = pick(real_valid, 2 * LEARN_ROWS, &mut rng);
            let test = shuffled.split_off(shuffled.len() / 2);
            (
                shuffled,
                real,
                test,
                "real rows that synthesis may have seen (give --holdout for rows it did not)".to_string(),
            )
        }
    };
    let synth_train = pick(valid(synth), real_train.len().max(1), &mut rng);
    if real_train.len() < 10 || test_rows.len() < 10 || synth_train.len() < 10 {
        return Err(Error::bad_input(format!(
            "--target {target}: fewer than 10 rows with a value to train or test on"
        )));
    }
    let x_test = features(test_table, &test_rows, &features_of)?;
    let value_of = |table: &Table, row: usize| table.bounds[axis].denormalise(table.points[row * table.dims() + axis]);
    let truth: Vec<f64> = test_rows.iter().map(|&row| value_of(test_table, row)).collect();
    let (task, model) = match column.value_type {
        ValueType::Number { .. } => ("regression", "gradient-boosted trees (smartcore XGRegressor)"),
        _ => ("classification", "random forest (smartcore RandomForestClassifier)"),
    };
    let score = |table: &Table, rows: &[usize]| -> Result<ModelScores> {
        let x = features(table, rows, &features_of)?;
        let y: Vec<f64> = rows.iter().map(|&row| value_of(table, row)).collect();
        if task == "regression" {
            let parameters = XGRegressorParameters::default().with_n_estimators(60).with_max_depth(5).with_seed(seed);
            let model = XGRegressor::fit(&x, &y, parameters).map_err(|error| failed("boosted trees", error))?;
            let predicted = model.predict(&x_test).map_err(|error| failed("boosted trees", error))?;
            return Ok(ModelScores { r2: Some(r_squared(&truth, &predicted)), accuracy: None, macro_f1: None });
        }
        let labels: Vec<i32> = y.iter().map(|&code| code.round() as i32).collect();
        let parameters =
            RandomForestClassifierParameters::default().with_n_trees(40).with_max_depth(10).with_seed(seed);
        let model =
            RandomForestClassifier::fit(&x, &labels, parameters).map_err(|error| failed("random forest", error))?;
        let predicted = model.predict(&x_test).map_err(|error| failed("random forest", error))?;
        let expected: Vec<i32> = truth.iter().map(|&code| code.round() as i32).collect();
        let (accuracy, f1) = classification_scores(&expected, &predicted);
        Ok(ModelScores { r2: None, accuracy: Some(accuracy), macro_f1: Some(f1) })
    };
    Ok(Utility {
        target: target.to_string(),
        task,
        model,
        train_rows: real_train.len(),
        test_rows: test_rows.len(),
        train_synth_test_real: score(synth, &synth_train)?,
        train_real_test_real: score(real, &real_train)?,
        test_rows_from,
    })
}

/// 1 − residual sum of squares / total sum of squares.
pub fn r_squared(truth: &[f64], predicted: &[f64]) -> f64 {
    let mean = truth.iter().sum::<f64>() / truth.len() as f64;
    let total: f64 = truth.iter().map(|value| (value - mean).powi(2)).sum();
    let residual: f64 = truth.iter().zip(predicted).map(|(value, guess)| (value - guess).powi(2)).sum();
    if total == 0.0 {
        return if residual == 0.0 { 1.0 } else { 0.0 };
    }
    1.0 - residual / total
}

/// Accuracy and macro F1 (the mean F1 over the classes that occur in the truth or the predictions).
pub fn classification_scores(truth: &[i32], predicted: &[i32]) -> (f64, f64) {
    let accuracy = truth.iter().zip(predicted).filter(|(a, b)| a == b).count() as f64 / truth.len().max(1) as f64;
    let mut classes: Vec<i32> = truth.iter().chain(predicted).copied().collect();
    classes.sort_unstable();
    classes.dedup();
    let f1: f64 = classes
        .iter()
        .map(|&class| {
            let hits = truth.iter().zip(predicted).filter(|(&t, &p)| t == class && p == class).count() as f64;
            let (in_truth, in_predicted) = (
                truth.iter().filter(|&&t| t == class).count() as f64,
                predicted.iter().filter(|&&p| p == class).count() as f64,
            );
            if hits == 0.0 {
                0.0
            } else {
                2.0 * hits / (in_truth + in_predicted)
            }
        })
        .sum::<f64>()
        / classes.len().max(1) as f64;
    (accuracy, f1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_and_scores_match_hand_worked_cases() {
        // Positives at 0.9, 0.4; negatives at 0.5, 0.1: 3 of 4 pairs ordered → 0.75; a tie counts one half.
        assert_eq!(roc_auc(&[0.9, 0.4, 0.5, 0.1], &[true, true, false, false]), 0.75);
        assert_eq!(roc_auc(&[0.5, 0.5], &[true, false]), 0.5);
        assert_eq!(r_squared(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]), 1.0);
        assert_eq!(r_squared(&[1.0, 2.0, 3.0], &[2.0, 2.0, 2.0]), 0.0);
        // Class 0: precision 1/1, recall 1/2 → F1 2/3; class 1: precision 2/3, recall 1 → F1 4/5.
        let (accuracy, f1) = classification_scores(&[0, 0, 1, 1], &[0, 1, 1, 1]);
        assert_eq!(accuracy, 0.75);
        assert!((f1 - (2.0 / 3.0 + 0.8) / 2.0).abs() < 1e-12);
    }
}
