//! Tables as they come: categorical, Boolean, date, timestamp and null values in the default mechanism.
//! Every column is kept with its public domain or refused by name; the output has the input's schema.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, DictionaryArray, Float32Array, Float64Array, Int32Array,
    LargeStringArray, RecordBatchReader, StringArray, TimestampMicrosecondArray, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Int16Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;

use crate::common::{assert_refused, dpsynth, stderr, write_parquet};

const ROWS: usize = 20_000;

/// Writes `batch` with its own schema (nullability as declared).
pub(crate) fn write_batch(path: &Path, batch: &RecordBatch) {
    let mut writer = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

pub(crate) fn read_table(path: &Path) -> (SchemaRef, RecordBatch) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap().build().unwrap();
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    (schema.clone(), arrow::compute::concat_batches(&schema, &batches).unwrap())
}

/// Every type the coding reads, with nulls where the field allows them: row i's values follow from i.
pub(crate) fn every_type_table() -> RecordBatch {
    let carriers = ["AA", "B6", "UA", "DL"];
    let carrier = |i: usize| carriers[(i * 7 + i / 3) % 4];
    let fields = vec![
        Field::new("carrier", DataType::Utf8, true),
        Field::new("origin", DataType::LargeUtf8, false),
        Field::new("dest", DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)), false),
        Field::new("month", DataType::Int32, false),
        Field::new("cancelled", DataType::Boolean, true),
        Field::new("day", DataType::Date32, false),
        Field::new(
            "at",
            DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("Europe/Paris".into())),
            true,
        ),
        Field::new("seats", DataType::UInt8, false),
        Field::new("delay", DataType::Float32, true),
    ];
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter((0..ROWS).map(|i| (i % 10 != 0).then(|| carrier(i))))),
        Arc::new(LargeStringArray::from_iter_values((0..ROWS).map(|i| ["EWR", "JFK", "LGA"][i % 3]))),
        Arc::new((0..ROWS).map(|i| ["BOS", "ORD", "SFO"][(i / 2) % 3]).collect::<DictionaryArray<Int16Type>>()),
        Arc::new(Int32Array::from_iter_values((0..ROWS).map(|i| (i % 12) as i32 + 1))),
        Arc::new(BooleanArray::from_iter((0..ROWS).map(|i| (i % 7 != 0).then_some(i % 5 == 0)))),
        Arc::new(Date32Array::from_iter_values((0..ROWS).map(|i| 19_723 + (i % 366) as i32))),
        Arc::new(
            TimestampMicrosecondArray::from_iter(
                (0..ROWS)
                    .map(|i| (i % 4 != 0).then_some(1_704_067_200_000_000 + (i as i64 % 1000) * 86_400_000_000 / 1000)),
            )
            .with_timezone("Europe/Paris"),
        ),
        Arc::new(UInt8Array::from_iter_values((0..ROWS).map(|i| (i % 200) as u8))),
        Arc::new(Float32Array::from_iter((0..ROWS).map(|i| (i % 3 != 0).then_some((i % 100) as f32 - 20.0)))),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

pub(crate) const EVERY_TYPE_CONFIG: &str = r#"
[bounds]
month = [1, 12]
day = ["2024-01-01", "2025-01-01"]
at = ["2024-01-01T00:00:00Z", "2024-01-02T00:00:00+00:00"]
seats = [0, 255]
delay = [-60, 120]
[categories]
carrier = ["AA", "B6", "UA", "DL", "WN"]
origin = ["EWR", "JFK", "LGA"]
dest = ["BOS", "ORD", "SFO", "LAX"]
"#;

fn shares<T: std::hash::Hash + Eq>(values: impl Iterator<Item = T>) -> HashMap<T, f64> {
    let mut counts: HashMap<T, f64> = HashMap::new();
    let mut total = 0.0;
    for value in values {
        *counts.entry(value).or_insert(0.0) += 1.0;
        total += 1.0;
    }
    counts.values_mut().for_each(|count| *count /= total);
    counts
}

#[test]
fn every_type_round_trips_with_its_name_order_unit_zone_and_nullability() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output, config, report) = (
        dir.path().join("in.parquet"),
        dir.path().join("out.parquet"),
        dir.path().join("run.toml"),
        dir.path().join("r.json"),
    );
    let table = every_type_table();
    write_batch(&input, &table);
    std::fs::write(&config, EVERY_TYPE_CONFIG).unwrap();
    let result = dpsynth(&[
        "synth",
        input.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--epsilon",
        "4",
        "--seed",
        "3",
        "--output",
        output.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    let (schema, synthetic) = read_table(&output);
    assert_eq!(schema.fields(), table.schema().fields(), "names, order, types, units, zones and nullability");
    assert!(synthetic.num_rows() > ROWS * 9 / 10);

    // Category shares follow the real ones (ε = 4 on 2·10^4 rows: a few hundredths at most), listed but
    // absent categories stay rare, and the null shares follow too.
    let real_carriers = shares(table.column(0).as_string::<i32>().iter());
    let synthetic_carriers = shares(synthetic.column(0).as_string::<i32>().iter());
    for (carrier, share) in &real_carriers {
        let got = synthetic_carriers.get(carrier).copied().unwrap_or(0.0);
        assert!((got - share).abs() < 0.03, "carrier {carrier:?}: {got} against {share}");
    }
    assert!(synthetic_carriers.get(&Some("WN")).copied().unwrap_or(0.0) < 0.01);
    for (column, real_nulls) in [(4, 1.0 / 7.0), (6, 0.25), (8, 1.0 / 3.0)] {
        let got = synthetic.column(column).null_count() as f64 / synthetic.num_rows() as f64;
        assert!((got - real_nulls).abs() < 0.03, "column {column}: null share {got} against {real_nulls}");
    }
    let booleans = shares(synthetic.column(4).as_boolean().iter().flatten());
    assert!((booleans[&true] - 0.2).abs() < 0.03, "true share {}", booleans[&true]);
    // Values stay in their domains.
    let dest = synthetic.column(2).as_dictionary::<Int16Type>();
    let dest_names = dest.values().as_string::<i32>();
    assert!(dest
        .keys()
        .iter()
        .flatten()
        .all(|key| ["BOS", "ORD", "SFO", "LAX"].contains(&dest_names.value(key as usize))));
    let months = synthetic.column(3).as_primitive::<arrow::datatypes::Int32Type>();
    assert!(months.values().iter().all(|month| (1..=12).contains(month)));
    let at = synthetic.column(6).as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
    assert!(at.iter().flatten().all(|at| (1_704_067_200_000_000..=1_704_153_600_000_000).contains(&at)));

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let guarantee = &report["guarantee"];
    let parts: f64 =
        guarantee["epsilon_breakdown"].as_array().unwrap().iter().map(|part| part["epsilon"].as_f64().unwrap()).sum();
    let spent = guarantee["epsilon_spent"].as_f64().unwrap();
    assert!((parts - spent).abs() < 1e-9 && spent <= 4.0, "the breakdown {parts} sums to the spent {spent} ≤ ε");
    let carrier = &report["input"]["columns"][0];
    assert!(carrier["encoding"].as_str().unwrap().contains("5 categories"), "{carrier}");
}

#[test]
fn category_lists_are_never_read_from_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    // 'ZZ' is in the data but not in the list.
    let values: Vec<&str> = (0..ROWS).map(|i| if i % 50 == 0 { "ZZ" } else { ["AA", "B6"][i % 2] }).collect();
    write_parquet(&input, vec![("carrier", Arc::new(StringArray::from(values)) as ArrayRef)], 4096);
    let base = ["synth", input.to_str().unwrap(), "--categories", "carrier=AA,B6", "--epsilon", "1"];
    let output = dir.path().join("out.parquet");
    let strict: Vec<&str> = base.iter().copied().chain(["--output", output.to_str().unwrap()]).collect();
    assert_refused(
        &strict,
        &["in.parquet", "'carrier'", "value 'ZZ'", "not in the public category list", "--unlisted other"],
    );
    assert!(!output.exists(), "nothing written");
    let other: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--unlisted", "other", "--seed", "1", "--quiet", "--output", output.to_str().unwrap()])
        .collect();
    let result = dpsynth(&other);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    let (schema, synthetic) = read_table(&output);
    assert!(schema.field(0).is_nullable(), "'other' comes back as null");
    let carriers = synthetic.column(0).as_string::<i32>();
    assert!(carriers.iter().flatten().all(|carrier| carrier == "AA" || carrier == "B6"), "only listed categories");
    let other_share = carriers.null_count() as f64 / carriers.len() as f64;
    assert!((other_share - 0.02).abs() < 0.015, "the unlisted share {other_share} is released as 'other'");
}

#[test]
fn columns_without_a_domain_are_listed_together_and_exclude_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    let output = dir.path().join("out.parquet");
    write_parquet(
        &input,
        vec![
            ("x", Arc::new(Float64Array::from_iter_values((0..1000).map(|i| i as f64 / 1000.0))) as ArrayRef),
            ("carrier", Arc::new(StringArray::from_iter_values((0..1000).map(|i| ["AA", "B6"][i % 2])))),
            ("day", Arc::new(Date32Array::from_iter_values((0..1000).map(|i| 19_723 + i % 30)))),
            ("flag", Arc::new(BooleanArray::from_iter((0..1000).map(|i| Some(i % 3 == 0))))),
        ],
        1000,
    );
    let path = input.to_str().unwrap();
    // The Boolean needs no domain; the other three are named in one message, with a snippet for each.
    assert_refused(
        &["synth", path, "--epsilon", "1", "--output", output.to_str().unwrap()],
        &[
            "3 columns have no public domain: x, carrier, day",
            "--exclude x,carrier,day",
            "[bounds]",
            "x = [LO, HI]",
            "day = [\"YYYY-MM-DD\"",
            "[categories]",
            "carrier = [",
        ],
    );
    assert!(!output.exists());
    let report = dir.path().join("r.json");
    let result = dpsynth(&[
        "synth",
        path,
        "--epsilon",
        "1",
        "--bounds",
        "x=0:1",
        "--exclude",
        "carrier,day",
        "--seed",
        "2",
        "--quiet",
        "--output",
        output.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    let (schema, _) = read_table(&output);
    let names: Vec<&str> = schema.fields().iter().map(|field| field.name().as_str()).collect();
    assert_eq!(names, ["x", "flag"]);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["input"]["excluded"], serde_json::json!(["carrier", "day"]));
    assert_refused(
        &["synth", path, "--epsilon", "1", "--exclude", "nope", "--output", output.to_str().unwrap()],
        &["column 'nope'", "no such column (named by --exclude)", "x, carrier, day, flag"],
    );
    assert_refused(
        &[
            "synth",
            path,
            "--epsilon",
            "1",
            "--columns",
            "x",
            "--exclude",
            "day",
            "--bounds",
            "x=0:1",
            "--output",
            output.to_str().unwrap(),
        ],
        &["not both"],
    );
    // A column a mechanism cannot read is refused by name, with the way out.
    assert_refused(
        &[
            "synth",
            path,
            "--epsilon",
            "1",
            "--mechanism",
            "lowdim",
            "--root-share",
            "0.1",
            "--bounds",
            "x=0:1",
            "--exclude",
            "day",
            "--categories",
            "carrier=AA,B6",
            "--output",
            output.to_str().unwrap(),
        ],
        &["'carrier'", "reads numbers only", "--exclude carrier"],
    );
}
