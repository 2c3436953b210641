//! `dpsynth eval` end to end through the binary: known distances, the JSON contract, bad input (exit 2,
//! file and column named, nothing written) and the report directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use arrow::array::{ArrayRef, Int32Array, StringArray};
use serde_json::Value;

/// A table of columns x (in [0, 100]) and y (in [-1, 1]) from `points` in [0,1]², plus a text column.
fn write_xy(path: &Path, points: &[(f64, f64)]) {
    write_parquet(
        path,
        vec![
            ("x", floats(points.iter().map(|p| p.0 * 100.0))),
            ("y", floats(points.iter().map(|p| p.1 * 2.0 - 1.0))),
            ("label", Arc::new(StringArray::from_iter_values(points.iter().map(|_| "a"))) as ArrayRef),
        ],
        64,
    );
}

fn random_points(seed: u64, n: usize, scale: f64) -> Vec<(f64, f64)> {
    let mut fixture = Fixture::new(seed);
    (0..n).map(|_| (fixture.unit() * scale, fixture.unit() * scale)).collect()
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

const XY_BOUNDS: [&str; 4] = ["--bounds", "x=0:100", "--bounds", "y=-1:1"];

#[test]
fn identical_tables_are_at_distance_zero_and_the_json_has_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.parquet");
    write_xy(&real, &random_points(1, 300, 1.0));
    let mut args = vec!["--real", path_str(&real), "--synth", path_str(&real)];
    args.extend_from_slice(&XY_BOUNDS);
    let json = eval_json(dir.path(), &args);
    assert_eq!(number(&json, &["w1", "value"]), 0.0);
    assert_eq!(json["w1"]["method"], "exact-transport");
    assert_eq!(number(&json, &["w1", "lower"]), 0.0);
    assert!(number(&json, &["w1", "upper"]) < 1e-10);
    assert_eq!(number(&json, &["sandwich", "lower"]), 0.0);
    assert_eq!(json["units"], "normalised l-infinity on [0,1]^d");
    assert_eq!(number(&json, &["real", "rows"]), 300.0);
    assert_eq!(json["real"]["clamped_values"], serde_json::json!([0, 0]));
    assert_eq!(json["columns"][0]["name"], "x");
    assert_eq!(number(&json["columns"][1], &["lo"]), -1.0);
    for key in ["w1", "w1_column_units", "mean_error", "std_error"] {
        assert_eq!(number(&json["columns"][0], &[key]), 0.0, "{key}");
    }
    assert!(json["grid"].is_null());
    assert_eq!(number(&json, &["mean_error", "max_abs"]), 0.0);
    assert_eq!(number(&json, &["mean_error", "l2"]), 0.0);
    assert_eq!(number(&json, &["covariance_error", "frobenius"]), 0.0);
    assert_eq!(number(&json, &["covariance_error", "max_abs"]), 0.0);
    assert_eq!(number(&json, &["rank_correlation_error", "frobenius"]), 0.0);
    let marginals = json["marginals"].as_array().unwrap();
    assert_eq!(marginals.len(), 2);
    for marginal in marginals {
        assert_eq!(number(marginal, &["max_tv"]), 0.0);
        assert!(number(marginal, &["side"]) >= 2.0);
    }
    assert_eq!(number(&marginals[1], &["count"]), 1.0);
}

#[test]
fn a_known_shift_gives_its_w1_by_every_method() {
    // synth = real shifted by 0.2 (normalised) along x: W1 = 0.2 exactly in ℓ∞ (moving back costs 0.2; the
    // x marginal alone needs 0.2).
    let dir = tempfile::tempdir().unwrap();
    let (real, synth) = (dir.path().join("real.parquet"), dir.path().join("synth.parquet"));
    let points = random_points(2, 400, 0.8);
    write_xy(&real, &points);
    write_xy(&synth, &points.iter().map(|&(x, y)| (x + 0.2, y)).collect::<Vec<_>>());
    let base = ["--real", path_str(&real), "--synth", path_str(&synth)];
    let mut args = base.to_vec();
    args.extend_from_slice(&XY_BOUNDS);
    let json = eval_json(dir.path(), &args);
    assert_eq!(json["w1"]["method"], "exact-transport");
    assert!((number(&json, &["w1", "value"]) - 0.2).abs() < 1e-9);
    assert!((number(&json["columns"][0], &["w1"]) - 0.2).abs() < 1e-12);
    assert!((number(&json["columns"][0], &["w1_column_units"]) - 20.0).abs() < 1e-9);
    assert!((number(&json["columns"][0], &["mean_error"]) - 20.0).abs() < 1e-9);
    assert!(number(&json["columns"][1], &["w1"]) < 1e-12);
    assert!(number(&json["columns"][0], &["std_error"]) < 1e-9);
    assert!((number(&json, &["mean_error", "max_abs"]) - 0.2).abs() < 1e-12);
    assert!(number(&json, &["covariance_error", "max_abs"]) < 1e-12);
    let (lower, upper) = (number(&json, &["sandwich", "lower"]), number(&json, &["sandwich", "upper"]));
    assert!(lower <= 0.2 + 1e-12 && 0.2 <= upper, "{lower} {upper}");

    // The grid estimate, forced: within its stated error of 0.2.
    args.extend_from_slice(&["--grid-side", "40"]);
    let json = eval_json(dir.path(), &args);
    let (grid, error) = (number(&json, &["grid", "w1"]), number(&json, &["grid", "error_bound"]));
    assert_eq!(number(&json, &["grid", "side"]), 40.0);
    assert!((grid - 0.2).abs() <= error + 1e-12, "{grid} ± {error}");
    assert!(error <= 1.0 / 40.0);
}

#[test]
fn one_column_is_exact_by_sorted_cdfs_and_columns_select_from_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let (real, synth) = (dir.path().join("real.parquet"), dir.path().join("synth.parquet"));
    // x: real {0, 50, 100}, synth {25, 25}: W1 = (1/3)(0.25 + 0.25 + 0.75) = 5/12 normalised.
    write_xy(&real, &[(0.0, 0.1), (0.5, 0.2), (1.0, 0.3)]);
    write_xy(&synth, &[(0.25, 0.9), (0.25, 0.9)]);
    let mut args = vec!["--real", path_str(&real), "--synth", path_str(&synth), "--columns", "x"];
    args.extend_from_slice(&XY_BOUNDS);
    let json = eval_json(dir.path(), &args);
    assert_eq!(json["w1"]["method"], "exact-1d");
    assert_eq!(json["columns"].as_array().unwrap().len(), 1);
    let w1 = number(&json, &["w1", "value"]);
    assert!((w1 - 5.0 / 12.0).abs() < 1e-12, "{w1}");
    assert_eq!(number(&json, &["w1", "lower"]), w1);
    assert_eq!(number(&json, &["w1", "upper"]), w1);
    assert_eq!(number(&json, &["synth", "rows"]), 2.0);
}

#[test]
fn values_outside_the_bounds_are_clamped_and_counted_per_file_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let (real, synth) = (dir.path().join("real.parquet"), dir.path().join("synth.parquet"));
    write_xy(&real, &[(0.5, 0.5), (1.5, 0.5), (-0.5, 2.0)]);
    write_xy(&synth, &[(0.5, 0.5)]);
    let mut args = vec!["--real", path_str(&real), "--synth", path_str(&synth)];
    args.extend_from_slice(&XY_BOUNDS);
    let json = eval_json(dir.path(), &args);
    assert_eq!(json["real"]["clamped_values"], serde_json::json!([2, 1]));
    assert_eq!(json["synth"]["clamped_values"], serde_json::json!([0, 0]));
    // Clamped real points: (0.5, 0.5), (1, 0.5), (0, 1); the x marginal W1 to δ(0.5) is 1/3.
    assert!((number(&json["columns"][0], &["w1"]) - 1.0 / 3.0).abs() < 1e-12);
}

#[test]
fn config_file_bounds_apply_and_the_summary_goes_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.parquet");
    write_xy(&real, &random_points(3, 50, 1.0));
    let config = dir.path().join("run.toml");
    std::fs::write(&config, "epsilon = 1.0\noutput = \"ignored.parquet\"\n[bounds]\nx = [0, 100]\ny = [-1, 1]\n")
        .unwrap();
    let output =
        dpsynth(&["eval", "--real", path_str(&real), "--synth", path_str(&real), "--config", path_str(&config)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("W1 = 0.000000"), "{text}");
    assert!(text.contains("sandwich"), "{text}");
    assert_eq!(files_in(dir.path()), vec![real.clone(), config.clone()]);
}

/// Asserts exit 2, every fragment in stderr, and that `dir` holds only `inputs` afterwards.
fn assert_rejected(dir: &Path, inputs: &[PathBuf], args: &[&str], fragments: &[&str]) {
    let json = dir.join("out.json");
    let report = dir.join("report");
    let mut all = vec!["eval", "--json", path_str(&json), "--report-dir", path_str(&report), "--quiet"];
    all.extend_from_slice(args);
    let output = dpsynth(&all);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {message}");
    for fragment in fragments {
        assert!(message.contains(fragment), "{args:?}: '{fragment}' missing from: {message}");
    }
    assert!(!message.contains("panicked"), "{message}");
    let mut expected = inputs.to_vec();
    expected.sort();
    assert_eq!(files_in(dir), expected, "{args:?} left files behind");
}

#[test]
fn bad_input_is_rejected_naming_file_and_column_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (real, other) = (dir.path().join("real.parquet"), dir.path().join("other.parquet"));
    write_xy(&real, &random_points(4, 20, 1.0));
    // `other` has x and a text column named y, but no z.
    write_parquet(
        &other,
        vec![
            ("x", floats((0..20).map(|i| i as f64))),
            ("y", Arc::new(StringArray::from_iter_values((0..20).map(|_| "b"))) as ArrayRef),
            ("z", Arc::new(Int32Array::from_iter_values(0..20)) as ArrayRef),
        ],
        8,
    );
    let inputs = [real.clone(), other.clone()];
    let (r, o) = (path_str(&real), path_str(&other));

    // A column of the bounds that the synthetic file lacks, or has with a non-numeric type.
    assert_rejected(
        dir.path(),
        &inputs,
        &["--real", r, "--synth", o, "--bounds", "x=0:100", "--bounds", "y=-1:1"],
        &["other.parquet", "'y'", "is not a number"],
    );
    assert_rejected(
        dir.path(),
        &inputs,
        &["--real", o, "--synth", r, "--bounds", "z=0:20"],
        &["real.parquet", "'z'", "no such column"],
    );
    // A column named without public bounds, or no bounds at all.
    assert_rejected(
        dir.path(),
        &inputs,
        &["--real", r, "--synth", r, "--columns", "x,y", "--bounds", "x=0:100"],
        &["'y'", "no public bounds"],
    );
    assert_rejected(dir.path(), &inputs, &["--real", r, "--synth", r], &["no columns", "--bounds"]);
    // Malformed bounds, a missing file, a bad grid side.
    assert_rejected(
        dir.path(),
        &inputs,
        &["--real", r, "--synth", r, "--bounds", "x=5:1"],
        &["'x'", "lo 5 must be below hi 1"],
    );
    let missing = dir.path().join("missing.parquet");
    assert_rejected(
        dir.path(),
        &inputs,
        &["--real", r, "--synth", path_str(&missing), "--bounds", "x=0:100"],
        &["missing.parquet", "cannot open"],
    );
    assert_rejected(
        dir.path(),
        &inputs,
        &["--real", r, "--synth", r, "--bounds", "x=0:100", "--grid-side", "0"],
        &["--grid-side"],
    );
}

#[test]
fn nulls_are_an_error_naming_the_column_unless_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (real, synth) = (dir.path().join("real.parquet"), dir.path().join("synth.parquet"));
    write_xy(&real, &[(0.1, 0.1), (0.2, 0.2)]);
    write_parquet(&synth, vec![("x", floats([10.0, f64::NAN, 20.0])), ("y", floats([0.0, 0.0, 0.0]))], 8);
    let inputs = [real.clone(), synth.clone()];
    let mut args = vec!["--real", path_str(&real), "--synth", path_str(&synth)];
    args.extend_from_slice(&XY_BOUNDS);
    assert_rejected(dir.path(), &inputs, &args, &["synth.parquet", "'x'", "NaN", "row 1"]);
    args.extend_from_slice(&["--nulls", "drop"]);
    let json = eval_json(dir.path(), &args);
    assert_eq!(number(&json, &["synth", "rows"]), 2.0);
    assert_eq!(number(&json, &["synth", "dropped_rows"]), 1.0);
    assert!((number(&json["columns"][0], &["w1"]) - 0.0).abs() < 1e-12);
}

#[test]
fn report_dir_has_the_page_the_plots_and_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let (real, synth) = (dir.path().join("real.parquet"), dir.path().join("synth.parquet"));
    write_xy(&real, &random_points(5, 200, 1.0));
    write_xy(&synth, &random_points(6, 150, 0.9));
    let report = dir.path().join("report");
    let mut args = vec!["--real", path_str(&real), "--synth", path_str(&synth), "--report-dir", path_str(&report)];
    args.extend_from_slice(&XY_BOUNDS);
    let json = eval_json(dir.path(), &args);
    let names: Vec<String> =
        files_in(&report).iter().map(|path| path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["density-0-1-x-y.svg", "eval.json", "hist-0-x.svg", "hist-1-y.svg", "index.html", "index.md"]);
    let same: Value = serde_json::from_str(&std::fs::read_to_string(report.join("eval.json")).unwrap()).unwrap();
    assert_eq!(same["w1"], json["w1"]);
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 3, "every plot inline");
    assert!(html.contains(&dpsynth::eval::format::sig(number(&json, &["w1", "value"]))));
    let markdown = std::fs::read_to_string(report.join("index.md")).unwrap();
    for name in &names[..] {
        if name.ends_with(".svg") {
            assert!(markdown.contains(&format!("]({name})")), "index.md links {name}");
            let svg = std::fs::read_to_string(report.join(name)).unwrap();
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        }
    }
    // Running again into the existing directory replaces the files.
    let again = eval_json(dir.path(), &args);
    assert_eq!(again["w1"], json["w1"]);
    assert_eq!(files_in(&report).len(), names.len());
}

#[test]
fn dropped_rows_leave_exactly_the_valid_rows_across_row_groups() {
    // synth = real's 30 rows with null, NaN and infinite rows spliced in, in row groups of 7: with
    // --nulls drop the two tables must be identical (W1 = 0, equal moments).
    let dir = tempfile::tempdir().unwrap();
    let (real, synth) = (dir.path().join("real.parquet"), dir.path().join("synth.parquet"));
    let points = random_points(7, 30, 1.0);
    write_xy(&real, &points);
    let mut x: Vec<Option<f64>> = Vec::new();
    let mut y = Vec::new();
    for (i, &(px, py)) in points.iter().enumerate() {
        match i % 4 {
            0 => (x.push(None), y.push(0.5)),
            1 => (x.push(Some(f64::NAN)), y.push(0.5)),
            2 => (x.push(Some(50.0)), y.push(f64::INFINITY)),
            _ => (x.push(Some(-1e9)), y.push(f64::NEG_INFINITY)),
        };
        x.push(Some(px * 100.0));
        y.push(py * 2.0 - 1.0);
    }
    write_parquet(&synth, vec![("x", Arc::new(arrow::array::Float64Array::from(x)) as ArrayRef), ("y", floats(y))], 7);
    let mut args = vec!["--real", path_str(&real), "--synth", path_str(&synth), "--nulls", "drop"];
    args.extend_from_slice(&XY_BOUNDS);
    let json = eval_json(dir.path(), &args);
    assert_eq!(number(&json, &["synth", "rows"]), 30.0);
    assert_eq!(number(&json, &["synth", "dropped_rows"]), 30.0);
    assert_eq!(json["synth"]["clamped_values"], serde_json::json!([0, 0]), "dropped rows are not counted");
    assert_eq!(number(&json, &["w1", "value"]), 0.0);
    assert_eq!(number(&json, &["covariance_error", "max_abs"]), 0.0);
}

/// A run report with the keys eval reads, as `dpsynth synth --report` writes them.
fn write_run_report(path: &Path, mechanism: &str, epsilon: f64, depth: u32, rows: usize) {
    let report = serde_json::json!({
        "mechanism": mechanism,
        "guarantee": {"epsilon": epsilon, "delta": 0.0, "neighbours": "add-remove: datasets differ by one row",
                      "fit_for_release": false},
        "parameters": {"depth": depth},
        "release": {"synthetic_rows": rows},
    });
    std::fs::write(path, serde_json::to_string(&report).unwrap()).unwrap();
}

#[test]
fn several_synthetic_tables_are_ranked_on_the_same_real_subsamples_with_their_runs() {
    // `close` is another sample of the real law, `far` the real rows shifted by 0.2 along x: the subsample
    // estimate must put `close` near the real-vs-real floor and `far` well above it.
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let points = random_points(7, 800, 0.8);
    write_xy(&path("real.parquet"), &points);
    write_xy(&path("close.parquet"), &random_points(8, 800, 0.8));
    let shifted: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x + 0.2, y)).collect();
    write_xy(&path("far.parquet"), &shifted);
    write_run_report(&path("close.json"), "pmm", 1.0, 12, 800);
    write_run_report(&path("far.json"), "pmm", 0.1, 9, 799);
    let files = ["real.parquet", "close.parquet", "far.parquet", "close.json", "far.json"].map(path);
    let [real, close, far, close_run, far_run] = files.each_ref().map(|p| path_str(p));
    let mut args = vec![
        "--real",
        real,
        "--synth",
        close,
        "--run-report",
        close_run,
        "--synth",
        far,
        "--run-report",
        far_run,
        "--subsample-rows",
        "200",
        "--subsample-repeats",
        "4",
        "--seed",
        "3",
    ];
    args.extend_from_slice(&XY_BOUNDS);
    let json = eval_json(dir.path(), &args);

    // The top level is the first table's report, every key of a single comparison included.
    let comparisons = json["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 2);
    for key in ["real", "synth", "units", "columns", "w1", "sandwich", "grid", "mean_error"] {
        assert_eq!(json[key], comparisons[0][key], "{key}");
    }
    assert_eq!(json["synth"]["file"], close);
    assert_eq!(comparisons[1]["synth"]["file"], far);
    assert_eq!(comparisons[0]["label"], "pmm, ε = 1, depth 12");
    assert_eq!(number(&comparisons[1], &["run", "epsilon"]), 0.1);
    assert_eq!(comparisons[1]["run"]["neighbours"], "add-remove: datasets differ by one row");

    let subsample = |k: usize, key: &str| number(&comparisons[k]["subsample_transport"], &[key, "mean"]);
    assert_eq!(number(&comparisons[0]["subsample_transport"], &["rows_per_sample"]), 200.0);
    assert_eq!(subsample(0, "floor"), subsample(1, "floor"), "one real floor for every table");
    assert!(subsample(0, "w1") < 1.6 * subsample(0, "floor"), "{json}");
    assert!(subsample(1, "w1") > 0.19 && subsample(1, "w1") > 3.0 * subsample(0, "w1"));
    // The x column carries the shift: every 2-D pair and the marginals see it, and only `far` is warned
    // about (its run report claims 799 rows for a table of 800).
    let pairs = &comparisons[1]["pairwise_w1"];
    assert!((number(pairs, &["max"]) - 0.2).abs() <= number(pairs, &["max_error_bound"]) + 1e-9);
    assert_eq!(pairs["pairs"][0]["columns"], serde_json::json!(["x", "y"]));
    let equal = comparisons[1]["marginals_equal_grid"].as_array().unwrap();
    assert_eq!(equal.len(), 2);
    assert!(equal.iter().all(|marginal| marginal["side"] == 16));
    assert!(number(&equal[0], &["max_tv"]) <= number(&equal[1], &["max_tv"]));
    assert!(number(&comparisons[0], &["correlation_error", "max_abs"]) < 0.2);
    assert!(number(&comparisons[0], &["rank_correlation_error", "max_abs"]) < 0.2);
    // A shift keeps every column's order, so the ranks' dependence is the real table's exactly.
    assert_eq!(number(&comparisons[1], &["rank_correlation_error", "frobenius"]), 0.0);
    assert_eq!(comparisons[0]["warnings"], serde_json::json!([]));
    let warnings = comparisons[1]["warnings"].to_string();
    assert!(warnings.contains("799") && warnings.contains("far.json"), "{warnings}");

    // The same seed gives the same numbers on one thread; another seed draws other rows.
    let mut again = args.clone();
    again.extend_from_slice(&["--threads", "1"]);
    let one_thread = eval_json(dir.path(), &again);
    for k in 0..2 {
        assert_eq!(one_thread["comparisons"][k]["subsample_transport"], comparisons[k]["subsample_transport"]);
        assert_eq!(one_thread["comparisons"][k]["pairwise_w1"], comparisons[k]["pairwise_w1"]);
    }
    let seed = args.iter().position(|&arg| arg == "3").unwrap();
    args[seed] = "4";
    let other = eval_json(dir.path(), &args);
    assert_ne!(other["subsample_transport"]["w1"]["values"], json["subsample_transport"]["w1"]["values"]);

    // The summary has one line per table side by side.
    let mut summary_args = vec!["eval", "--quiet"];
    summary_args.extend_from_slice(&args);
    let output = dpsynth(&summary_args);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("side by side") && text.contains("pmm, ε = 0.1, depth 9:"), "{text}");
}

#[test]
fn run_reports_and_outputs_are_checked_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.parquet");
    write_xy(&real, &random_points(9, 30, 1.0));
    let not_json = dir.path().join("notes.txt");
    std::fs::write(&not_json, "not a report").unwrap();
    let inputs = [real.clone(), not_json.clone()];
    let (r, n) = (path_str(&real), path_str(&not_json));
    let base = vec!["--real", r, "--synth", r, "--bounds", "x=0:100", "--bounds", "y=-1:1"];
    let with = |extra: &[&'static str]| [base.clone(), extra.to_vec()].concat();
    assert_rejected(
        dir.path(),
        &inputs,
        &[base.clone(), vec!["--run-report", n]].concat(),
        &["notes.txt", "not a JSON run report"],
    );
    assert_rejected(
        dir.path(),
        &inputs,
        &[base.clone(), vec!["--run-report", n, "--run-report", n]].concat(),
        &["--run-report is given 2 times for 1 --synth"],
    );
    assert_rejected(dir.path(), &inputs, &with(&["--subsample-rows", "5000"]), &["--subsample-rows", "2048"]);
    // An output path that is an input (here the real table) is refused and the input left as it was.
    let before = std::fs::read(&real).unwrap();
    let mut args = vec!["eval", "--quiet", "--json", r];
    args.extend_from_slice(&with(&[]));
    let output = dpsynth(&args);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("would overwrite the input"), "{}", stderr(&output));
    assert_eq!(std::fs::read(&real).unwrap(), before);
    let mut expected = inputs.to_vec();
    expected.sort();
    assert_eq!(files_in(dir.path()), expected);
}

/// The first of `names` found on PATH.
fn find_on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

#[test]
fn the_report_page_renders_in_a_headless_browser() {
    // A real browser draws the page: the screenshot must have the window's size and enough non-white
    // pixels (tables, bars, densities), some of them coloured (plots, not only text). CI (CI=true)
    // installs chromium and must run this; elsewhere it is skipped when no browser is installed.
    let Some(browser) = find_on_path(&["chromium", "chromium-browser", "google-chrome"]) else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI must run the browser test: install chromium (.ci/run does)"
        );
        eprintln!("SKIPPED: no chromium on PATH for the report-page screenshot test");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (real, synth, run) =
        (dir.path().join("real.parquet"), dir.path().join("synth.parquet"), dir.path().join("run.json"));
    // A skewed x (mass near the bottom of wide bounds) to exercise the zoomed panels.
    let skewed = |seed| -> Vec<(f64, f64)> {
        random_points(seed, 2500, 1.0).into_iter().map(|(x, y)| (0.1 * x * x, y)).collect()
    };
    let holdout = dir.path().join("holdout.parquet");
    write_xy(&real, &skewed(10));
    write_xy(&synth, &skewed(11));
    write_xy(&holdout, &skewed(12));
    // A run of the default `--mechanism auto`, which says why it chose PMM.
    write_run_report(&run, "pmm", 1.0, 14, 2500);
    let mut report_json: Value = serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    report_json["parameters"]["auto"] = "--mechanism auto: PMM for this table".into();
    std::fs::write(&run, report_json.to_string()).unwrap();
    let report = dir.path().join("report");
    let mut args = vec![
        "--real",
        path_str(&real),
        "--synth",
        path_str(&synth),
        "--run-report",
        path_str(&run),
        "--report-dir",
        path_str(&report),
        "--holdout",
        path_str(&holdout),
        "--rules",
        "x <= 5",
        "--target",
        "y",
        "--detection-rows",
        "500",
    ];
    args.extend_from_slice(&XY_BOUNDS);
    eval_json(dir.path(), &args);
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("zoom:") && html.contains("auto (chose pmm), ε = 1, depth 14"));
    // The page leads with the score and the verdicts; the transport numbers follow the publishing scores.
    let at = |text: &str| html.find(text).unwrap_or_else(|| panic!("'{text}' missing from the page"));
    let sections = [
        "<h2>Verdict</h2>",
        "quality score (0–100)",
        "<h2>What was compared</h2>",
        "<h2>Column shapes, domain and support</h2>",
        "<h2>Validity rules</h2>",
        "<h2>Detection and utility</h2>",
        "<h2>Disclosure risk (owner only)</h2>",
        "<h2>Transport numbers</h2>",
        "Joint W1 on subsamples",
        "Joint W1, whole tables",
    ];
    for pair in sections.windows(2) {
        assert!(at(pair[0]) < at(pair[1]), "'{}' should come before '{}'", pair[0], pair[1]);
    }
    assert!(html.contains("x &lt;= 5") && html.contains("OWNER ONLY"));

    let (width, height) = (1280u32, 3000u32);
    let shot = dir.path().join("shot.png");
    let profile = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("file://{}", report.join("index.html").display()))
        .output()
        .expect("the browser starts");
    assert!(shot.exists(), "no screenshot: {}", String::from_utf8_lossy(&output.stderr));

    let mut decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((info.width, info.height), (width, height));
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let (mut ink, mut coloured) = (0usize, 0usize);
    for pixel in pixels[..info.buffer_size()].chunks_exact(channels) {
        let (r, g, b) = (i32::from(pixel[0]), i32::from(pixel[1]), i32::from(pixel[2]));
        ink += usize::from(r.min(g).min(b) < 235);
        coloured += usize::from((r - g).abs().max((g - b).abs()).max((r - b).abs()) > 40);
    }
    let total = (width * height) as usize;
    assert!(ink * 20 > total, "only {ink} of {total} pixels are not blank");
    assert!(coloured * 100 > total, "only {coloured} of {total} pixels are coloured");
}

#[test]
fn pairs_none_leaves_the_pairwise_w1_out_and_a_sample_says_how_many_of_how_many() {
    let dir = tempfile::tempdir().unwrap();
    let (real, synth) = (dir.path().join("real.parquet"), dir.path().join("synth.parquet"));
    for (path, seed, scale) in [(&real, 11, 1.0), (&synth, 12, 0.8)] {
        let mut fixture = Fixture::new(seed);
        let rows: Vec<[f64; 3]> = (0..120).map(|_| [0; 3].map(|_| fixture.unit() * scale)).collect();
        let columns =
            ["a", "b", "c"].iter().enumerate().map(|(k, name)| (*name, floats(rows.iter().map(|row| row[k]))));
        write_parquet(path, columns.collect(), 64);
    }
    let mut args = vec!["--real", path_str(&real), "--synth", path_str(&synth)];
    args.extend_from_slice(&["--bounds", "a=0:1", "--bounds", "b=0:1", "--bounds", "c=0:1"]);

    let everything = eval_json(dir.path(), &args);
    assert_eq!(number(&everything, &["pairwise_w1", "pairs_compared"]), 3.0);
    assert_eq!(number(&everything, &["pairwise_w1", "pairs_total"]), 3.0);
    let none = eval_json(dir.path(), &[&args[..], &["--pairs", "none"]].concat());
    assert!(none["pairwise_w1"].is_null(), "{}", none["pairwise_w1"]);
    assert_eq!(none["w1"], everything["w1"]);

    let report = dir.path().join("report");
    let sampled_args = [&args[..], &["--pairs", "sample:1", "--seed", "3", "--report-dir", path_str(&report)]].concat();
    let sampled = eval_json(dir.path(), &sampled_args);
    let pairwise = &sampled["pairwise_w1"];
    assert_eq!(number(pairwise, &["pairs_compared"]), 1.0);
    assert_eq!(number(pairwise, &["pairs_total"]), 3.0);
    let pairs = pairwise["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1);
    // The sampled pair's numbers are those of the same pair in the full run, and its density plot is of it.
    let full = everything["pairwise_w1"]["pairs"].as_array().unwrap();
    let p = full.iter().position(|pair| pair["columns"] == pairs[0]["columns"]).expect("one of the three pairs");
    assert_eq!(pairs[0], full[p]);
    let (i, j) = [(0, 1), (0, 2), (1, 2)][p];
    let density = format!("density-{i}-{j}-{}-{}.svg", ["a", "b", "c"][i], ["a", "b", "c"][j]);
    assert!(report.join(&density).exists(), "{density} in {:?}", files_in(&report));
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("over 1 of 3 pairs (a seeded sample)"), "the page says it was sampled");
    assert_eq!(eval_json(dir.path(), &sampled_args)["pairwise_w1"], *pairwise, "the same seed, the same pair");

    let output = dpsynth(&[&["eval", "--quiet"], &args[..], &["--pairs", "sample:1"]].concat());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("over 1 of 3 pairs (a seeded sample)"), "{text}");

    let output = dpsynth(&[&["eval", "--quiet"], &args[..], &["--pairs", "some"]].concat());
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("--pairs") && stderr(&output).contains("sample:K"), "{}", stderr(&output));
}
