//! `dpsynth stream`: releases of exactly t rows inside the bounds, resumption identical to one run,
//! refusals that leave the state untouched, a failed run that leaves a valid state, and the empirical
//! privacy loss of neighbouring streams.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array};
use arrow::datatypes::DataType;
use dpsynth::geometry::partition::CellGeometry;
use dpsynth::mechanism::online::{OnlinePlan, OnlineTree, MAX_ONLINE_DEPTH};
use dpsynth::privacy::NoiseKey;

use crate::common::{dpsynth, floats, footer, max_log_frequency_ratio, read_parquet, stderr, write_parquet, Fixture};

/// Writes rows [from, to) of a fixed two-column stream (x float in [−1, 3], n int32 in [0, 100]).
fn write_rows(path: &Path, from: usize, to: usize) {
    let mut fixture = Fixture::new(11);
    let mut xs = Vec::new();
    let mut ns = Vec::new();
    for row in 0..to {
        let (x, n) = (fixture.unit() * 4.0 - 1.0, (fixture.unit() * 100.0).round() as i32);
        if row >= from {
            xs.push(x);
            ns.push(n);
        }
    }
    let ns: ArrayRef = Arc::new(Int32Array::from(ns));
    write_parquet(path, vec![("x", floats(xs)), ("n", ns)], 128);
}

const BOUNDS: [&str; 4] = ["--bounds", "x=-1:3", "--bounds", "n=0:100"];

fn stream(inputs: &[&Path], state: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = vec!["stream".into()];
    args.extend(inputs.iter().map(|path| path.display().to_string()));
    for arg in ["--state", &state.display().to_string(), "--output-dir", &out.display().to_string(), "--quiet"] {
        args.push(arg.to_string());
    }
    args.extend(BOUNDS.iter().map(|arg| arg.to_string()));
    args.extend(extra.iter().map(|arg| arg.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    dpsynth(&args)
}

fn report(out: &Path, t: u64) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join(format!("release-{t}.json"))).unwrap()).unwrap()
}

#[test]
fn every_release_has_exactly_t_rows_inside_the_bounds_with_the_input_columns() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.parquet");
    write_rows(&input, 0, 700);
    let out = dir.path().join("out");
    let state = dir.path().join("state");
    let output = stream(
        &[&input],
        &state,
        &out,
        &["--epsilon", "0.5", "--release-at", "1,7,100", "--release-every", "250", "--release-at-end"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    for t in [1u64, 7, 100, 250, 500, 700] {
        let (fields, columns) = read_parquet(&out.join(format!("release-{t}.parquet")));
        assert_eq!(fields, vec![("x".to_string(), DataType::Float64), ("n".to_string(), DataType::Int32)]);
        assert_eq!(columns[0].len() as u64, t, "release {t}");
        assert!(columns[0].iter().all(|&x| (-1.0..=3.0).contains(&x)));
        assert!(columns[1].iter().all(|&n| (0.0..=100.0).contains(&n) && n.fract() == 0.0));
        let report = report(&out, t);
        assert_eq!(report["t"], t);
        assert_eq!(report["synthetic_rows"], t);
        // depth = ⌊log2(εt)⌋ with ε = 1/2, i.e. ⌊log2 t⌋ − 1 (0 below t = 4).
        let expected_depth = (63 - t.leading_zeros() as i64 - 1).max(0);
        assert_eq!(report["depth"], expected_depth, "release {t}");
        let guarantee = &report["guarantee"];
        let per_path = guarantee["epsilon_spent_per_path"].as_f64().unwrap();
        assert!(per_path > 0.0 || t < 4);
        assert!(per_path <= 0.25 && guarantee["epsilon_spent"].as_f64().unwrap() <= 0.5);
        assert_eq!(guarantee["fit_for_release"], true);
        let keys = footer(&out.join(format!("release-{t}.parquet")));
        assert_eq!((keys["dpsynth.mechanism"].as_str(), keys["dpsynth.epsilon"].as_str()), ("online", "0.5"));
        assert_eq!(keys["dpsynth.neighbours"], "replace");
    }
    assert!(!out.join("release-2.parquet").exists());
}

#[test]
fn release_at_end_on_a_stream_without_rows_says_it_released_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("empty.parquet");
    write_rows(&input, 0, 0);
    let (state, out) = (dir.path().join("state"), dir.path().join("out"));
    let (state_arg, out_arg) = (state.display().to_string(), out.display().to_string());
    let mut args = vec!["stream", input.to_str().unwrap(), "--state", &state_arg, "--output-dir", &out_arg];
    args.extend(BOUNDS);
    args.extend(["--epsilon", "1", "--release-at-end"]);
    let output = dpsynth(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("--release-at-end released nothing"), "{}", stderr(&output));
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(), "nothing released at t = 0");
}

#[test]
fn a_one_column_stream_replays_history_into_new_cells() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.parquet");
    write_rows(&input, 0, 300);
    let out = dir.path().join("out");
    let output = stream(
        &[&input],
        &dir.path().join("state"),
        &out,
        &["--columns", "x", "--epsilon", "2", "--release-at", "3,64,300", "--seed", "1"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    for t in [3u64, 64, 300] {
        let (fields, columns) = read_parquet(&out.join(format!("release-{t}.parquet")));
        assert_eq!(fields.len(), 1);
        assert_eq!(columns[0].len() as u64, t);
        let report = report(&out, t);
        assert_eq!(report["guarantee"]["fit_for_release"], false, "a seeded stream");
        // d = 1 keeps the paper's constant and says what it really spends.
        assert!(report["schedule"]["note"].as_str().unwrap().contains("0.392"));
        assert!(
            report["guarantee"]["epsilon_spent_per_path"].as_f64().unwrap()
                <= (0.5 - 3.0 / std::f64::consts::PI.powi(2)) * 2.0
        );
    }
}

#[test]
fn resuming_gives_the_same_bytes_as_one_run_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.parquet");
    let later = dir.path().join("later");
    std::fs::create_dir(&later).unwrap();
    write_rows(&first, 0, 300);
    // A directory is read in name order: b-1 before b-2.
    write_rows(&later.join("b-2.parquet"), 500, 650);
    write_rows(&later.join("b-1.parquet"), 300, 500);
    let releases = ["--epsilon", "1", "--seed", "9", "--release-at", "150,300,420,650", "--release-every", "200"];
    let (one_out, one_state) = (dir.path().join("one"), dir.path().join("one.state"));
    let mut args = releases.to_vec();
    args.extend(["--threads", "1"]);
    let output = stream(&[&first, &later], &one_state, &one_out, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let (two_out, two_state) = (dir.path().join("two"), dir.path().join("two.state"));
    let mut args = releases.to_vec();
    args.extend(["--threads", "2"]);
    for inputs in [[first.as_path()], [later.as_path()]] {
        let inputs = &inputs[..];
        let output = stream(inputs, &two_state, &two_out, &args);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let names: Vec<_> =
        crate::common::files_in(&one_out).into_iter().map(|path| path.file_name().unwrap().to_owned()).collect();
    // 150, 300, 420, 650 and every 200: seven tables and seven reports.
    assert_eq!(names.len(), 2 * 7, "{names:?}");
    for name in names {
        let one = std::fs::read(one_out.join(&name)).unwrap();
        let two = std::fs::read(two_out.join(&name)).unwrap();
        assert!(one == two, "{name:?} differs between one run and a resumed one");
    }
    assert_eq!(std::fs::read(&one_state).unwrap(), std::fs::read(&two_state).unwrap());
}

#[test]
fn changed_parameters_and_files_read_before_are_refused_and_the_state_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.parquet");
    write_rows(&first, 0, 200);
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let output = stream(&[&first], &state, &out, &["--epsilon", "1", "--seed", "4"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let saved = std::fs::read(&state).unwrap();
    let next = dir.path().join("b.parquet");
    write_rows(&next, 200, 300);
    let copy = dir.path().join("copy-of-a.parquet");
    std::fs::copy(&first, &copy).unwrap();
    let refusals: [(&[&Path], &[&str], &str); 6] = [
        (&[&next], &["--epsilon", "2", "--seed", "4"], "--epsilon 2"),
        (&[&next], &["--epsilon", "1"], "no --seed"),
        (&[&next], &["--epsilon", "1", "--seed", "5"], "--seed 5"),
        (&[&next], &["--epsilon", "1", "--seed", "4", "--bounds", "x=-1:4"], "--bounds x=-1:4"),
        (&[&next, &first], &["--epsilon", "1", "--seed", "4"], "already read"),
        (&[&copy], &["--epsilon", "1", "--seed", "4"], "already read"),
    ];
    for (inputs, extra, expected) in refusals {
        let output = stream(inputs, &state, &out, extra);
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{extra:?}: {}", stderr(&output));
        assert_eq!(std::fs::read(&state).unwrap(), saved, "{extra:?} touched the state");
    }
    let dropped_column = stream(&[&next], &state, &out, &["--epsilon", "1", "--seed", "4", "--columns", "x"]);
    assert_eq!(dropped_column.status.code(), Some(2));
    assert_eq!(std::fs::read(&state).unwrap(), saved);
}

#[test]
fn a_run_that_fails_half_way_leaves_a_valid_state_and_the_same_releases_after() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.parquet");
    write_rows(&first, 0, 200);
    let good = dir.path().join("b.parquet");
    write_rows(&good, 200, 400);
    // The same rows with a NaN late in the file: the run stops there, after writing release 250.
    let bad = dir.path().join("b-bad.parquet");
    let (_, mut columns) = {
        write_rows(&bad, 200, 400);
        read_parquet(&bad)
    };
    columns[0][150] = f64::NAN;
    let ns: ArrayRef = Arc::new(Int32Array::from_iter_values(columns[1].iter().map(|&n| n as i32)));
    write_parquet(&bad, vec![("x", floats(columns[0].clone())), ("n", ns)], 128);

    let args = ["--epsilon", "1", "--seed", "2", "--release-at", "250,400"];
    let (reference_out, reference_state) = (dir.path().join("reference"), dir.path().join("reference.state"));
    for inputs in [&first, &good] {
        assert!(stream(&[inputs], &reference_state, &reference_out, &args).status.success());
    }
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    assert!(stream(&[&first], &state, &out, &args).status.success());
    let before = std::fs::read(&state).unwrap();
    let failed = stream(&[&bad], &state, &out, &args);
    assert_eq!(failed.status.code(), Some(2));
    assert!(stderr(&failed).contains("NaN") && stderr(&failed).contains("'x'"), "{}", stderr(&failed));
    assert_eq!(std::fs::read(&state).unwrap(), before, "the failed file must not enter the state");
    assert!(!out.join("release-400.parquet").exists());
    // No temporary file is left beside the state or the releases.
    for directory in [dir.path(), out.as_path()] {
        for path in crate::common::files_in(directory) {
            assert!(!path.file_name().unwrap().to_string_lossy().ends_with(".tmp"), "{path:?} left behind");
        }
    }
    let resumed = stream(&[&good], &state, &out, &args);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    for t in [250, 400] {
        let name = format!("release-{t}.parquet");
        assert!(std::fs::read(out.join(&name)).unwrap() == std::fs::read(reference_out.join(&name)).unwrap());
    }
    assert_eq!(std::fs::read(&state).unwrap(), std::fs::read(&reference_state).unwrap());
}

/// The released counts of the two depth-1 cells at t = 2 for a 2-D stream with ε = 16: levels 0–3 are
/// empty, x_1 is of level 4 and t = 2 starts level 5, so each output is (x_1's count) + Lap_Z(2/ε_{1,4}).
/// Moving x_1 across the first split changes both, so the pair's privacy loss is exactly the
/// 2 · ε_{1,4}/2 that the plan charges both paths for these releases.
fn depth_one_outputs(first_x: u32, runs: std::ops::Range<u64>) -> HashMap<(i64, i64), u64> {
    let geometry = CellGeometry::new(2, MAX_ONLINE_DEPTH);
    let plan = OnlinePlan::new(16.0, 2).unwrap();
    let codes = [geometry.leaf_code(&[first_x, 7]), geometry.leaf_code(&[3, 3])];
    let mut frequencies = HashMap::new();
    for run in runs {
        let mut tree = OnlineTree::new(plan);
        tree.feed(&codes, &NoiseKey::from_user_seed(run)).unwrap();
        let depth_one = &tree.cells()[0];
        let outcome = (depth_one[0].counter.output(), depth_one[1].counter.output());
        *frequencies.entry(outcome).or_insert(0) += 1;
    }
    frequencies
}

#[test]
fn neighbouring_streams_stay_within_what_the_plan_charges() {
    let plan = OnlinePlan::new(16.0, 2).unwrap();
    assert_eq!(plan.level_at(1), 4);
    assert_eq!(plan.level_start(5), 2);
    let charged = plan.cell_noise(1, 4).unwrap().level_total;
    // Two cells, each Lap_Z(σ) with a count moved by one: log ratio 2/σ = ε_{1,4}.
    let loss_bound = 2.0 / charged.to_f64();
    assert!(loss_bound <= plan.cell_epsilon(1, 4) && loss_bound <= plan.epsilon() / 2.0);
    let runs = 100_000;
    let left = depth_one_outputs(0, 0..runs);
    // x on the other side of the first split (axis 0 has 15 bits at depth 30 in d = 2).
    let right = depth_one_outputs(1 << 14, runs..2 * runs);
    let worst = max_log_frequency_ratio(&left, &right, 1_000);
    // Slack for sampling (±0.05 per ratio at 1000 hits); a halved scale would give 2·loss_bound ≈ 1.5.
    assert!(worst <= loss_bound + 0.2, "log ratio {worst} exceeds the charged {loss_bound}");
    assert!(worst >= 0.8 * loss_bound, "log ratio {worst}: far less distinguishable than charged ({loss_bound})");
}

#[test]
fn a_config_file_stands_for_its_flags_and_a_synth_config_works() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rows.parquet");
    write_rows(&input, 0, 300);
    let by_flags = dir.path().join("by-flags");
    let result = stream(
        &[&input],
        &dir.path().join("a.state"),
        &by_flags,
        &["--epsilon", "1", "--seed", "4", "--release-at-end"],
    );
    assert!(result.status.success(), "{}", stderr(&result));
    // The synth keys (root-share, neighbours) are skipped; epsilon and the bounds come from the file.
    let config = dir.path().join("run.toml");
    std::fs::write(
        &config,
        "epsilon = 1\nseed = 4\nroot-share = 0.1\nneighbours = \"replace\"\n[bounds]\nx = [-1, 3]\nn = [0, 100]\n",
    )
    .unwrap();
    let by_config = dir.path().join("by-config");
    let state = dir.path().join("b.state");
    let args = [
        "stream",
        input.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--output-dir",
        by_config.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--release-at-end",
        "--quiet",
    ];
    let result = dpsynth(&args);
    assert!(result.status.success(), "{}", stderr(&result));
    let table = |dir: &Path| std::fs::read(dir.join("release-300.parquet")).unwrap();
    assert_eq!(table(&by_flags), table(&by_config));
    // An unknown key is refused naming the file and the key.
    std::fs::write(&config, "epsilon = 1\nrelease-sometimes = 3\n").unwrap();
    let result = dpsynth(&args);
    assert_eq!(result.status.code(), Some(2));
    assert!(stderr(&result).contains("release-sometimes"), "{}", stderr(&result));
}
