//! The library as the Python package calls it (issue 19): a table in memory reads as the same file would,
//! a fitted release samples again without the data, and a watcher can stop a run before it writes.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array};
use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;

use crate::common::*;
use dpsynth::error::Error;
use dpsynth::geometry::bounds::ColumnBounds;
use dpsynth::io::source::Source;
use dpsynth::progress::{Progress, ProgressWatcher};
use dpsynth::synth::{fit, synthesize, synthesize_source, OutputPaths};
use dpsynth::SynthOptions;

const ROWS: usize = 150_000;

fn fixture(path: &Path) {
    let mut fixture = Fixture::new(5);
    let x: Vec<f64> = (0..ROWS).map(|_| fixture.unit()).collect();
    let y: ArrayRef = Arc::new(Int32Array::from_iter_values((0..ROWS).map(|i| (i * 7919 % 1000) as i32)));
    write_parquet(path, vec![("x", floats(x)), ("y", y)], 40_000);
}

fn options() -> SynthOptions {
    let bounds = ["x=0:1", "y=0:999"].map(|text| text.parse::<ColumnBounds>().unwrap());
    let mut options = SynthOptions::new(1.0, bounds.to_vec());
    options.seed = Some(3);
    options.threads = Some(2);
    options
}

fn outputs(dir: &Path, name: &str) -> OutputPaths {
    OutputPaths { table: dir.join(format!("{name}.parquet")), report: None, diagnostics: None }
}

/// Every row group of `path` as batches, and as one batch (longer than a row group of the source).
fn batches(path: &Path) -> (arrow::datatypes::SchemaRef, Vec<RecordBatch>) {
    let source = Source::open(path).unwrap();
    let columns = source.schema().fields().len();
    let mut batches = Vec::new();
    for row_group in 0..source.row_group_count() {
        batches.extend(source.row_group_reader_of(row_group, 0..columns).unwrap().map(Result::unwrap));
    }
    (source.schema().clone(), batches)
}

#[test]
fn a_table_in_memory_gives_the_output_of_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.parquet");
    fixture(&input);
    let progress = Progress::hidden();
    synthesize(&input, &outputs(dir.path(), "file"), &options(), &progress).unwrap();
    let expected = std::fs::read(dir.path().join("file.parquet")).unwrap();
    let (schema, parts) = batches(&input);
    let whole = concat_batches(&schema, &parts).unwrap();
    for (name, given) in [("parts", parts), ("whole", vec![whole])] {
        let source = Source::from_batches("a table", schema.clone(), given).unwrap();
        assert_eq!(source.row_count(), ROWS as u64);
        let outcome = synthesize_source(&source, &outputs(dir.path(), name), &options(), &progress).unwrap();
        assert_eq!(outcome.report.input.file, "a table");
        let written = std::fs::read(dir.path().join(format!("{name}.parquet"))).unwrap();
        assert!(written == expected, "{name}: the in-memory table gave another output");
    }
}

#[test]
fn batches_of_another_schema_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.parquet");
    fixture(&input);
    let (schema, parts) = batches(&input);
    let other = parts[0].project(&[0]).unwrap();
    let refused = Source::from_batches("frame", schema, vec![parts[0].clone(), other]).err().unwrap();
    assert!(refused.to_string().starts_with("frame: a batch's columns differ"), "{refused}");
}

#[test]
fn a_fitted_release_samples_again_without_reading_or_spending() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.parquet");
    fixture(&input);
    let progress = Progress::hidden();
    let source = Source::open(&input).unwrap();
    let fitted = fit(&source, &options(), &progress).unwrap();
    // The input is gone: draws read the release only.
    drop(source);
    std::fs::remove_file(&input).unwrap();
    let first = fitted.sample(Some(5000), 0, &progress).unwrap();
    let again = fitted.sample(Some(5000), 0, &progress).unwrap();
    let second = fitted.sample(Some(5000), 1, &progress).unwrap();
    assert_eq!(first, again, "a draw is a function of the release and its number");
    assert_ne!(first, second, "draws have their own placement coins");
    let rows: usize = second.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 5000);
    let report = serde_json::to_value(fitted.draw_report(rows as u64, 1)).unwrap();
    assert_eq!(report["sample"]["draw"], 1);
    assert_eq!(report["sample"]["epsilon_spent_by_this_draw"], 0.0);
    assert_eq!(report["guarantee"], serde_json::to_value(&fitted.report().guarantee).unwrap());
    assert!(serde_json::to_value(fitted.report()).unwrap().get("sample").is_none());
}

/// Asks the run to stop once `after` rows have been reported.
struct StopAfter {
    after: u64,
    seen: AtomicU64,
    stopped: AtomicBool,
}

impl ProgressWatcher for StopAfter {
    fn started(&self, _phase: &str, _total: u64, _unit: &str) {}

    fn advanced(&self, _phase: &str, units: u64) {
        if self.seen.fetch_add(units, Ordering::Relaxed) + units >= self.after {
            self.stopped.store(true, Ordering::Relaxed);
        }
    }

    fn finished(&self, _phase: &str) {}

    fn interrupted(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}

#[test]
fn a_watcher_stops_the_run_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.parquet");
    fixture(&input);
    for after in [1, ROWS as u64 + 1] {
        // 1: stops in the binning pass; ROWS + 1: in the sampling pass, after the release.
        let watcher = Arc::new(StopAfter { after, seen: AtomicU64::new(0), stopped: AtomicBool::new(false) });
        let outputs = outputs(dir.path(), "stopped");
        let stopped = synthesize(&input, &outputs, &options(), &Progress::watched(watcher.clone()));
        assert!(matches!(stopped, Err(Error::Interrupted)), "{after}: {:?}", stopped.err());
        assert!(watcher.seen.load(Ordering::Relaxed) < 2 * ROWS as u64);
        assert_eq!(files_in(dir.path()), vec![input.clone()], "{after}: a stopped run left a file");
    }
}

/// Python's keywords are command-line words (`private_bounds=0.1` is `--private-bounds=0.1`), parsed by
/// `cli::parse_synth` and resolved against the table as the extension does: the flag reaches `fit`.
#[test]
fn private_bounds_reach_fit_through_the_words_python_passes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.parquet");
    fixture(&input);
    let (schema, parts) = batches(&input);
    let source = Source::from_batches("table", schema, parts).unwrap();
    let words = ["data", "--epsilon=1", "--private-bounds=0.1", "--bounds=y=0:999", "--seed=3"];
    let mut args = dpsynth::cli::parse_synth(words.map(std::ffi::OsString::from).to_vec()).unwrap();
    args.default_columns(&["x".into(), "y".into()]).unwrap();
    let options = args.resolve_options().unwrap();
    assert_eq!(options.private_bounds, Some(0.1));
    let fitted = fit(&source, &options, &Progress::hidden()).unwrap();
    let released = &fitted.report().private_bounds.as_ref().unwrap().columns;
    assert_eq!(released.iter().map(|column| column.column.as_str()).collect::<Vec<_>>(), ["x"], "y keeps its bounds");
}
