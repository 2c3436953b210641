//! `dpsynth eval`'s publishing scores end to end: mixed columns against hand-counted shares, validity
//! rules, the quality score's formula, detection on one law and on shifted laws, utility, and the
//! disclosure figures on a table that copies training rows and on a fresh sample.

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use arrow::array::{ArrayRef, BooleanArray, Float64Array, StringArray};
use serde_json::Value;

/// [`eval_json`] without the subsample transport's repeats, which these scores do not need.
fn scores_json(dir: &Path, args: &[&str]) -> Value {
    eval_json(dir, &[&["--subsample-repeats", "0"], args].concat())
}

fn shape<'a>(json: &'a Value, column: &str) -> &'a Value {
    json["column_shapes"].as_array().unwrap().iter().find(|shape| shape["name"] == column).unwrap()
}

/// A small mixed table: carrier (string), late (Boolean), delay (float, nullable).
fn write_mixed(path: &Path, carriers: &[&str], late: &[bool], delays: &[Option<f64>]) {
    write_parquet(
        path,
        vec![
            ("carrier", Arc::new(StringArray::from_iter_values(carriers.iter())) as ArrayRef),
            ("late", Arc::new(BooleanArray::from(late.to_vec())) as ArrayRef),
            ("delay", Arc::new(Float64Array::from(delays.to_vec())) as ArrayRef),
        ],
        3,
    );
}

#[test]
fn mixed_columns_are_scored_by_type_against_hand_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (real, synth) = (dir.path().join("real.parquet"), dir.path().join("synth.parquet"));
    write_mixed(
        &real,
        &["AA", "AA", "B6", "UA"],
        &[true, false, false, false],
        &[Some(10.0), Some(20.0), None, Some(40.0)],
    );
    // One carrier outside the list (ZZ), one more null, a delay outside the bounds, a value real never has.
    write_mixed(&synth, &["AA", "ZZ", "B6", "B6"], &[true, true, false, false], &[Some(10.0), None, None, Some(500.0)]);
    let json = scores_json(
        dir.path(),
        &[
            "--real",
            real.to_str().unwrap(),
            "--synth",
            synth.to_str().unwrap(),
            "--categories",
            "carrier=AA,B6,UA",
            "--bounds",
            "delay=0:100",
            "--columns",
            "carrier,late,delay",
            "--nulls",
            "keep",
            "--rules",
            "delay <= 30",
            "--detection-rows",
            "0",
        ],
    );
    // carrier: real AA 2/4, B6 1/4, UA 1/4; synth AA 1/4, B6 2/4, other 1/4: TV = (1/4 + 1/4 + 1/4 + 1/4)/2.
    let carrier = shape(&json, "carrier");
    assert_eq!(carrier["value_type"], "categorical");
    assert!((number(carrier, &["score"]) - 0.5).abs() < 1e-12, "{carrier}");
    assert!((number(carrier, &["in_domain_share_synth"]) - 0.75).abs() < 1e-12);
    // late: real true 1/4, synth 2/4: TV 1/4.
    assert!((number(shape(&json, "late"), &["score"]) - 0.75).abs() < 1e-12);
    // delay: null 1/4 real, 2/4 synth; 500 is clamped to 100 and lies outside the bounds.
    let delay = shape(&json, "delay");
    assert_eq!(number(delay, &["null_share_real"]), 0.25);
    assert_eq!(number(delay, &["null_share_synth"]), 0.5);
    assert!((number(delay, &["in_domain_share_synth"]) - 0.75).abs() < 1e-12);
    // KS with null as the lowest value: CDFs after null 1/4 vs 2/4, after 10: 2/4 vs 3/4, after 40: 1 vs 3/4.
    assert!((number(delay, &["score"]) - 0.75).abs() < 1e-12, "{delay}");
    // The rule reads delay: nulls are not evaluated; real 40 breaks it (1 of 3), synth 100 (1 of 2).
    let rule = &json["rules"][0];
    assert!((number(rule, &["broken_share_real"]) - 1.0 / 3.0).abs() < 1e-12, "{rule}");
    assert!((number(rule, &["broken_share_synth"]) - 0.5).abs() < 1e-12);
    assert_eq!(number(rule, &["not_evaluated_synth"]), 2.0);
    // Three pairs, each with its association measure.
    let measures: Vec<&str> =
        json["pair_trends"].as_array().unwrap().iter().map(|pair| pair["association"].as_str().unwrap()).collect();
    assert_eq!(measures, ["cramers_v", "correlation_ratio", "correlation_ratio"]);
    // The quality score is 100 × the mean of its components, as its formula says.
    let components: Vec<f64> =
        json["quality"]["components"].as_array().unwrap().iter().map(|c| number(c, &["score"])).collect();
    assert_eq!(components.len(), 3, "no detection asked for");
    let mean = components.iter().sum::<f64>() / 3.0;
    assert!((number(&json, &["quality", "score"]) - 100.0 * mean).abs() < 1e-9);
    assert!((components[0] - (0.5 + 0.75 + 0.75) / 3.0).abs() < 1e-12);
    let verdicts = json["verdicts"].to_string();
    assert!(verdicts.contains("delay <= 30") && verdicts.contains("outside the public list"), "{verdicts}");
}

/// Rows of (x, y, group) from one law: x ~ U(0, 1) + shift, y = x + noise, group by x.
fn law_rows(seed: u64, rows: usize, shift: f64) -> Vec<(f64, f64, bool)> {
    let mut fixture = Fixture::new(seed);
    (0..rows)
        .map(|_| {
            let x = (fixture.unit() * 0.6 + shift).min(1.0);
            let y = (x * 0.5 + 0.25 * fixture.unit()).min(1.0);
            (x, y, x > 0.4)
        })
        .collect()
}

fn write_law(path: &Path, rows: &[(f64, f64, bool)]) {
    write_parquet(
        path,
        vec![
            ("x", floats(rows.iter().map(|r| r.0))),
            ("y", floats(rows.iter().map(|r| r.1))),
            ("group", Arc::new(BooleanArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())) as ArrayRef),
        ],
        1000,
    );
}

const LAW_DOMAINS: [&str; 6] = ["--bounds", "x=0:1", "--bounds", "y=0:1", "--columns", "x,y,group"];

#[test]
fn detection_is_near_a_half_on_one_law_and_near_one_on_shifted_laws() {
    let dir = tempfile::tempdir().unwrap();
    let (real, same, shifted) =
        (dir.path().join("real.parquet"), dir.path().join("same.parquet"), dir.path().join("shifted.parquet"));
    write_law(&real, &law_rows(1, 3000, 0.0));
    write_law(&same, &law_rows(2, 3000, 0.0));
    write_law(&shifted, &law_rows(3, 3000, 0.7));
    let mut args = vec!["--real", real.to_str().unwrap(), "--synth", same.to_str().unwrap()];
    args.extend(["--synth", shifted.to_str().unwrap(), "--detection-rows", "1500", "--target", "y"]);
    args.extend(LAW_DOMAINS);
    let json = scores_json(dir.path(), &args);
    let auc = |k: usize| {
        let found = &json["comparisons"][k]["detection"];
        number(found, &["logistic_regression_auc"]).max(number(found, &["boosted_trees_auc"]))
    };
    assert!(auc(0) < 0.6, "one law: {}", json["comparisons"][0]["detection"]);
    assert!(auc(1) > 0.95, "shifted: {}", json["comparisons"][1]["detection"]);
    assert!(
        number(&json["comparisons"][0], &["quality", "score"]) > number(&json["comparisons"][1], &["quality", "score"])
    );
    // Utility: y is a function of x plus noise; a sample of the same law predicts it as well as real rows do.
    let utility = &json["comparisons"][0]["utility"];
    let (synthetic, real_r2) =
        (number(utility, &["train_synth_test_real", "r2"]), number(utility, &["train_real_test_real", "r2"]));
    assert!(real_r2 > 0.4 && (synthetic - real_r2).abs() < 0.1, "{utility}");
    assert!(number(&json["comparisons"][1]["utility"], &["train_synth_test_real", "r2"]) < synthetic);
}

#[test]
fn disclosure_flags_copied_training_rows_and_stays_quiet_on_a_fresh_sample() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let train = law_rows(11, 2000, 0.0);
    write_law(&path("train.parquet"), &train);
    write_law(&path("holdout.parquet"), &law_rows(12, 2000, 0.0));
    write_law(&path("fresh.parquet"), &law_rows(13, 2000, 0.0));
    // 10% of the rows are training rows, the rest fresh.
    let mut copying = law_rows(14, 1800, 0.0);
    copying.extend(train.iter().step_by(10).copied());
    write_law(&path("copying.parquet"), &copying);
    let (real, holdout) = (path("train.parquet"), path("holdout.parquet"));
    let mut args = vec!["--real", path_of(&real), "--holdout", path_of(&holdout)];
    let (fresh, copying) = (path("fresh.parquet"), path("copying.parquet"));
    args.extend(["--synth", path_of(&fresh), "--synth", path_of(&copying), "--detection-rows", "0"]);
    args.extend(LAW_DOMAINS);
    let json = scores_json(dir.path(), &args);
    let (quiet, loud) = (&json["comparisons"][0]["disclosure"], &json["comparisons"][1]["disclosure"]);
    assert_eq!(number(quiet, &["exact_copy_share"]), 0.0, "{quiet}");
    assert!((number(loud, &["exact_copy_share"]) - 0.1).abs() < 1e-12, "{loud}");
    let closer = number(quiet, &["closer_to_train_share"]);
    assert!((closer - 0.5).abs() < 0.05, "{quiet}");
    assert!(number(loud, &["closer_to_train_share"]) > 0.52, "{loud}");
    assert!((number(quiet, &["membership_inference_auc"]) - 0.5).abs() < 0.05, "{quiet}");
    assert!(number(loud, &["membership_inference_auc"]) > number(quiet, &["membership_inference_auc"]));
    let verdicts = |k: usize| json["comparisons"][k]["verdicts"].to_string();
    assert!(verdicts(1).contains("copy a training row"), "{}", verdicts(1));
    assert!(!verdicts(0).contains("disclosure"), "{}", verdicts(0));
}

fn path_of(path: &Path) -> &str {
    path.to_str().unwrap()
}
