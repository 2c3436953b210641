//! Helpers shared by the integration tests: Parquet fixtures, running the binary, reading outputs.

use std::collections::HashMap;
use std::hash::Hash;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

/// Writes `columns` (name, array) to a Parquet file with row groups of `row_group_rows`.
pub fn write_parquet(path: &Path, columns: Vec<(&str, ArrayRef)>, row_group_rows: usize) {
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, array)| Field::new(*name, array.data_type().clone(), array.null_count() > 0))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(schema.clone(), columns.into_iter().map(|(_, array)| array).collect()).unwrap();
    let properties = WriterProperties::builder().set_max_row_group_row_count(Some(row_group_rows)).build();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// A float column from values.
pub fn floats(values: impl IntoIterator<Item = f64>) -> ArrayRef {
    Arc::new(Float64Array::from_iter_values(values))
}

/// Runs the dpsynth binary with `args`.
pub fn dpsynth(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpsynth")).args(args).output().expect("the binary runs")
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs dpsynth and asserts exit 2 (bad input) with every fragment in stderr, and no panic.
pub fn assert_refused(args: &[&str], fragments: &[&str]) {
    let result = dpsynth(args);
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{args:?}: {message}");
    for fragment in fragments {
        assert!(message.contains(fragment), "{args:?}: '{fragment}' missing from: {message}");
    }
    assert!(!message.contains("panicked"), "{message}");
}

/// The key-value metadata of a Parquet file's footer.
pub fn footer(path: &Path) -> HashMap<String, String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let pairs = reader.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
    pairs.into_iter().map(|pair| (pair.key, pair.value.unwrap_or_default())).collect()
}

/// Reads every column of a Parquet file: names, types, and values as f64.
pub fn read_parquet(path: &Path) -> (Vec<(String, DataType)>, Vec<Vec<f64>>) {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let mut fields = Vec::new();
    let mut columns: Vec<Vec<f64>> = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        if fields.is_empty() {
            fields =
                batch.schema().fields().iter().map(|field| (field.name().clone(), field.data_type().clone())).collect();
            columns = vec![Vec::new(); fields.len()];
        }
        for (index, column) in batch.columns().iter().enumerate() {
            // Temporal types only cast to numbers through their integer representation.
            let column = if column.data_type().is_temporal() {
                arrow::compute::cast(column, &DataType::Int64).unwrap()
            } else {
                column.clone()
            };
            let as_f64 = arrow::compute::cast(&column, &DataType::Float64).unwrap();
            let values = as_f64.as_any().downcast_ref::<Float64Array>().unwrap();
            columns[index].extend(values.values().iter().copied());
        }
    }
    (fields, columns)
}

/// Files in a directory (to check that a failed run left nothing).
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    files
}

/// A small deterministic pseudo-random stream for fixtures.
pub struct Fixture(u64);

impl Fixture {
    pub fn new(seed: u64) -> Self {
        Fixture(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit().max(1e-300), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// Largest |log ratio| between the outcome frequencies of a mechanism run many times on two neighbouring
/// inputs, over the outcomes seen at least `min_count` times in both (rarer ones are too noisy): the
/// empirical privacy loss, to compare with ε.
pub fn max_log_frequency_ratio<K: Hash + Eq>(first: &HashMap<K, u64>, second: &HashMap<K, u64>, min_count: u64) -> f64 {
    let mut compared = 0;
    let mut worst = 0.0f64;
    for (outcome, &count) in first {
        let other = second.get(outcome).copied().unwrap_or(0);
        if count >= min_count && other >= min_count {
            compared += 1;
            worst = worst.max((count as f64 / other as f64).ln().abs());
        }
    }
    assert!(compared >= 3, "only {compared} outcomes were frequent enough to compare");
    worst
}

/// A test that needs a wgpu adapter found none: a failure where CI installed one (DPSYNTH_REQUIRE_GPU
/// is set), else a loud line saying what went unchecked.
pub fn no_gpu_adapter(unchecked: &str) {
    assert!(std::env::var_os("DPSYNTH_REQUIRE_GPU").is_none(), "DPSYNTH_REQUIRE_GPU is set but no wgpu adapter exists");
    // Straight to the stderr handle: libtest captures eprintln! of passing tests.
    let _ = writeln!(std::io::stderr(), "SKIPPED: no wgpu adapter; {unchecked}");
}

/// Runs eval with `args` (plus `--quiet`) and returns the parsed JSON it wrote.
pub fn eval_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let json = dir.join("eval.json");
    let mut all = vec!["eval", "--json", json.to_str().unwrap(), "--quiet"];
    all.extend_from_slice(args);
    let output = dpsynth(&all);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// The number at `path` (object keys) in `value`.
pub fn number(value: &serde_json::Value, path: &[&str]) -> f64 {
    path.iter().fold(value, |v, key| &v[*key]).as_f64().unwrap_or_else(|| panic!("{path:?} is not a number in {value}"))
}
