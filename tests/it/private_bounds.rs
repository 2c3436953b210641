//! `--private-bounds`: the bounds of columns without public ones released from a share of ε. What it
//! spends (the report's breakdown adds up to ε, the bounds to their share), where it does not apply
//! (public bounds kept at no cost; category lists refused under pure ε; stream and the ranks refuse it by
//! name), and how much it clamps on generated, heavy-tailed and real tables. Its privacy loss is measured in
//! privacy_loss.rs.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;

use crate::common::*;
use dpsynth::io::source::Source;
use dpsynth::privacy::private_bounds::{BoundsGrid, PrivateBoundsPlan};
use dpsynth::progress::Progress;

fn report_of(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A table of `rows` rows: x spread over [−50, 950] in a heavy tail, y an integer code, z in [0, 1].
fn mixed_table(path: &Path, rows: usize) {
    let mut fixture = Fixture::new(11);
    let x: Vec<f64> = (0..rows).map(|_| 50.0 / (1.0 - 0.95 * fixture.unit()) - 100.0).collect();
    let y: ArrayRef = Arc::new(Int64Array::from_iter_values((0..rows).map(|i| (i * 7919 % 1000) as i64)));
    let z: Vec<f64> = (0..rows).map(|_| fixture.unit()).collect();
    write_parquet(path, vec![("x", floats(x)), ("y", y), ("z", floats(z))], 20_000);
}

#[test]
fn the_bounds_and_the_mechanism_spend_epsilon_exactly_and_public_bounds_cost_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.parquet");
    mixed_table(&input, 50_000);
    let (output, report) = (dir.path().join("out.parquet"), dir.path().join("report.json"));
    let args = [
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--epsilon",
        "1",
        "--private-bounds",
        "0.1",
        "--bounds",
        "z=0:1",
        "--seed",
        "4",
        "--quiet",
    ];
    let run = dpsynth(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let report = report_of(&report);
    let parts = report["guarantee"]["epsilon_breakdown"].as_array().unwrap();
    let total: f64 = parts.iter().map(|part| part["epsilon"].as_f64().unwrap()).sum();
    assert!(total <= 1.0 && total > 1.0 - 1e-6, "the breakdown adds up to ε = 1, not {total}");
    let bounds: Vec<&serde_json::Value> =
        parts.iter().filter(|part| part["release"].as_str().unwrap().starts_with("bounds of")).collect();
    let releases: Vec<&str> = bounds.iter().map(|part| part["release"].as_str().unwrap()).collect();
    assert_eq!(
        releases,
        ["bounds of x: lower end", "bounds of x: upper end", "bounds of y: lower end", "bounds of y: upper end"],
        "one release per end of each column without public bounds, none for z"
    );
    let spent: f64 = bounds.iter().map(|part| part["epsilon"].as_f64().unwrap()).sum();
    // An end spending the column's whole share (or the share per column not split) would spend 0.2.
    assert!(spent <= 0.1 && spent > 0.1 - 1e-6, "the bounds spend SHARE·ε = 0.1, not {spent}");
    assert_eq!(report["guarantee"]["epsilon_spent"].as_f64().unwrap(), total);
    let private = &report["private_bounds"];
    assert_eq!(private["share"].as_f64(), Some(0.1));
    let released: Vec<&str> =
        private["columns"].as_array().unwrap().iter().map(|column| column["column"].as_str().unwrap()).collect();
    assert_eq!(released, ["x", "y"]);
    let columns = report["input"]["columns"].as_array().unwrap();
    assert_eq!((columns[2]["lo"].as_f64(), columns[2]["hi"].as_f64()), (Some(0.0), Some(1.0)), "z keeps its bounds");
    for (column, reported) in columns.iter().zip(private["columns"].as_array().unwrap()) {
        assert_eq!(column["lo"], reported["lo"], "the mechanism ran on the released bounds");
        assert_eq!(column["hi"], reported["hi"]);
    }
    // The synthetic table lies inside the released bounds: values outside them were clamped.
    let (_, values) = read_parquet(&output);
    for (column, reported) in values.iter().zip(private["columns"].as_array().unwrap()) {
        let (lo, hi) = (reported["lo"].as_f64().unwrap(), reported["hi"].as_f64().unwrap());
        assert!(column.iter().all(|&value| value >= lo && value <= hi));
    }
    // With every column given public bounds, --private-bounds spends nothing: the run is the public one.
    let public_report = dir.path().join("public.json");
    let public_output = dir.path().join("public.parquet");
    let mut public = args.to_vec();
    public[3] = public_output.to_str().unwrap();
    public[5] = public_report.to_str().unwrap();
    let all_bounds = ["--bounds", "x=-64:1024", "--bounds", "y=0:1000"];
    let with_share = [&public[..], &all_bounds[..]].concat();
    let run = dpsynth(&with_share);
    assert!(run.status.success(), "{}", stderr(&run));
    let shared = report_of(&public_report);
    assert!(shared.get("private_bounds").is_none());
    let table = std::fs::read(&public_output).unwrap();
    let without_share: Vec<&str> = [&public[..8], &public[10..], &all_bounds[..]].concat().into_iter().collect();
    let run = dpsynth(&without_share);
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(std::fs::read(&public_output).unwrap(), table, "no column to release: the run of public bounds");
    assert_eq!(report_of(&public_report)["guarantee"], shared["guarantee"]);
}

#[test]
fn category_lists_are_not_released_under_pure_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.parquet");
    let carriers: ArrayRef = Arc::new(StringArray::from_iter_values((0..100).map(|i| ["AA", "B6"][i % 2])));
    write_parquet(&input, vec![("x", floats((0..100).map(f64::from))), ("carrier", carriers)], 100);
    let output = dir.path().join("out.parquet");
    let path = input.to_str().unwrap();
    let base = ["synth", path, "--output", output.to_str().unwrap(), "--epsilon", "1", "--quiet"];
    assert_refused(
        &[&base[..], &["--private-bounds", "0.1"]].concat(),
        &[
            "1 column has no public domain: carrier",
            "cannot be released under pure epsilon-DP",
            "needs a delta > 0",
            "--exclude carrier",
        ],
    );
    // Without the flag, the message offers it for the number, and refuses discovery for the category list.
    assert_refused(
        &base,
        &["2 columns have no public domain: x, carrier", "--private-bounds SHARE", "needs a delta > 0"],
    );
    assert!(!output.exists());
    // Excluding the categorical column, the run goes through.
    let run = dpsynth(&[&base[..], &["--private-bounds", "0.1", "--exclude", "carrier", "--seed", "1"]].concat());
    assert!(run.status.success(), "{}", stderr(&run));
}

#[test]
fn private_bounds_are_refused_where_they_do_not_apply() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.parquet");
    write_parquet(&input, vec![("x", floats((0..100).map(f64::from)))], 100);
    let (path, output) = (input.to_str().unwrap(), dir.path().join("out.parquet"));
    let base = ["synth", path, "--output", output.to_str().unwrap(), "--epsilon", "1", "--quiet"];
    for share in ["0", "1", "-0.5", "nan"] {
        assert_refused(&[&base[..], &["--private-bounds", share]].concat(), &["strictly between 0 and 1"]);
    }
    assert_refused(
        &[&base[..], &["--private-bounds", "0.1", "--mechanism", "pe", "--delta", "1e-6"]].concat(),
        &["--private-bounds applies to --mechanism auto, pmm, psmm and lowdim"],
    );
    let state = dir.path().join("state");
    assert_refused(
        &[
            "stream",
            path,
            "--state",
            state.to_str().unwrap(),
            "--epsilon",
            "1",
            "--bounds",
            "x=0:100",
            "--private-bounds",
            "0.1",
        ],
        &["--private-bounds does not apply to stream"],
    );
}

/// How many values of `values` lie below `lo` and above `hi`.
fn clamped(values: &[f64], lo: f64, hi: f64) -> (usize, usize) {
    (values.iter().filter(|&&value| value < lo).count(), values.iter().filter(|&&value| value > hi).count())
}

/// Released bounds of every column of `source` at ε = 1 with a share of 0.1 (seeded), checked: each end clamps
/// at most twice the rank it aims at (the 0.1% quantile, or τ where ε·n is too small for it), and the range
/// stays within twice the data's largest magnitude.
fn check_coverage(source: &Source, grids: &[BoundsGrid], seed: u64) {
    let names: Vec<String> = source.schema().fields().iter().map(|field| field.name().clone()).collect();
    let mut options = dpsynth::SynthOptions::new(1.0, Vec::new());
    (options.columns, options.private_bounds, options.seed) = (Some(names.clone()), Some(0.1), Some(seed));
    let fitted = dpsynth::synth::fit(source, &options, &Progress::hidden()).unwrap();
    let released = &fitted.report().private_bounds.as_ref().unwrap().columns;
    let plan = PrivateBoundsPlan::new(1.0, 0.1, names.len()).unwrap();
    for ((name, reported), grid) in names.iter().zip(released).zip(grids) {
        let values = column_values(source, name);
        let target = plan.target_rank(values.len() as u64, grid.points().len() - 1) as usize;
        let (below, above) = clamped(&values, reported.lo, reported.hi);
        assert!(below <= 2 * target && above <= 2 * target, "{name}: {below} and {above} clamped, target {target}");
        let magnitude = values.iter().fold(1.0f64, |most, value| most.max(value.abs()));
        assert!(reported.lo >= -2.0 * magnitude && reported.hi <= 2.0 * magnitude, "{name}: {reported:?}");
    }
}

fn column_values(source: &Source, name: &str) -> Vec<f64> {
    let index = source.schema().index_of(name).unwrap();
    let mut values = Vec::new();
    for row_group in 0..source.row_group_count() {
        for batch in source.row_group_reader_of(row_group, [index]).unwrap() {
            let batch = batch.unwrap();
            let column = arrow::compute::cast(batch.column(0), &DataType::Float64).unwrap();
            values.extend(column.as_any().downcast_ref::<Float64Array>().unwrap().values().iter());
        }
    }
    values
}

#[test]
fn released_bounds_cover_the_aimed_quantiles_on_generated_and_real_tables() {
    let dir = tempfile::tempdir().unwrap();
    let floats_grid = || BoundsGrid::log_scale(None, false);
    for law in ["mixture", "heavy-tailed"] {
        let path = dir.path().join(format!("{law}.parquet"));
        let run = dpsynth(&["generate", path.to_str().unwrap(), "--rows", "200000", "--dims", "3", "--law", law]);
        assert!(run.status.success(), "{}", stderr(&run));
        check_coverage(&Source::open(&path).unwrap(), &[floats_grid(), floats_grid(), floats_grid()], 1);
    }
    // Heavy tails on both sides, far from [0, 1]: a Cauchy-like column and a Pareto one in the thousands.
    let rows = 200_000;
    let mut fixture = Fixture::new(2);
    let cauchy: Vec<f64> = (0..rows).map(|_| (std::f64::consts::PI * (fixture.unit() - 0.5)).tan() * 30.0).collect();
    let pareto: Vec<f64> = (0..rows).map(|_| 2000.0 / (1.0 - fixture.unit()).max(1e-12).powf(1.0 / 1.2)).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("cauchy", DataType::Float64, false),
        Field::new("pareto", DataType::Float64, false),
    ]));
    let batch = RecordBatch::try_new(schema.clone(), vec![floats(cauchy), floats(pareto)]).unwrap();
    let source = Source::from_batches("heavy", schema, vec![batch]).unwrap();
    check_coverage(&source, &[floats_grid(), floats_grid()], 1);
    // The flights: five Int64 columns.
    let flights = Source::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/flights.parquet")).unwrap();
    let integers = || BoundsGrid::log_scale(Some((i64::MIN as f64, i64::MAX as f64)), true);
    check_coverage(&flights, &(0..5).map(|_| integers()).collect::<Vec<_>>(), 1);
}
