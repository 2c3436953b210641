//! `--mechanism covloss` and `--mechanism microagg` end to end: encodings of boolean, 0/1 integer,
//! categorical (string and dictionary) and binned numeric columns, decoded back to the input's names and
//! types; the reports' guarantees; refusals; category lists that come from the options, never the data.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, DictionaryArray, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Int32Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::common::{dpsynth, files_in, stderr, write_parquet, Fixture};

/// A table whose columns are correlated through a hidden class: a boolean, a 0/1 int64, a string
/// carrier, a dictionary origin and a float distance.
fn mixed_table(dir: &Path, rows: usize) -> PathBuf {
    let mut fixture = Fixture::new(4);
    let carriers = ["AA", "B6", "UA"];
    let origins = ["EWR", "JFK", "LGA"];
    let mut flag = Vec::new();
    let mut delayed = Vec::new();
    let mut carrier = Vec::new();
    let mut origin = Vec::new();
    let mut distance = Vec::new();
    for _ in 0..rows {
        let class = (fixture.unit() * 3.0) as usize;
        flag.push(fixture.unit() < [0.1, 0.5, 0.9][class]);
        delayed.push(i64::from(fixture.unit() < [0.8, 0.2, 0.5][class]));
        carrier.push(carriers[if fixture.unit() < 0.7 { class } else { (class + 1) % 3 }]);
        origin.push(origins[if fixture.unit() < 0.6 { 2 - class } else { class }]);
        distance.push(300.0 + 1500.0 * class as f64 + 400.0 * fixture.unit());
    }
    let dictionary: DictionaryArray<Int32Type> = origin.iter().copied().collect();
    let path = dir.join("mixed.parquet");
    write_parquet(
        &path,
        vec![
            ("flag", Arc::new(BooleanArray::from(flag)) as ArrayRef),
            ("delayed", Arc::new(Int64Array::from(delayed))),
            ("carrier", Arc::new(StringArray::from(carrier))),
            ("origin", Arc::new(dictionary)),
            ("distance", crate::common::floats(distance)),
        ],
        1000,
    );
    path
}

fn encoded_args<'a>(input: &'a str, output: &'a str, report: &'a str) -> Vec<&'a str> {
    vec![
        "synth",
        input,
        "--output",
        output,
        "--report",
        report,
        "--quiet",
        "--columns",
        "flag,delayed,carrier,origin,distance",
        "--categories",
        "carrier=AA,B6,UA",
        "--categories",
        "origin=EWR,JFK,LGA",
        "--bins",
        "distance=8",
        "--bounds",
        "distance=0:5000",
    ]
}

fn report_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn batches(path: &Path) -> Vec<arrow::record_batch::RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn covloss_writes_the_input_columns_and_types_and_states_its_guarantee() {
    let dir = tempfile::tempdir().unwrap();
    let input = mixed_table(dir.path(), 6000);
    let output = dir.path().join("out.parquet");
    let report = dir.path().join("report.json");
    let (input_text, output_text, report_text) =
        (input.to_str().unwrap(), output.to_str().unwrap(), report.to_str().unwrap());
    let diagnostics = dir.path().join("diagnostics.json");
    let mut args = encoded_args(input_text, output_text, report_text);
    args.extend([
        "--mechanism",
        "covloss",
        "--epsilon",
        "2",
        "--neighbours",
        "replace",
        "--damping",
        "cells",
        "--seed",
        "7",
        "--rows",
        "5000",
    ]);
    args.extend(["--diagnostics", diagnostics.to_str().unwrap()]);
    let result = dpsynth(&args);
    assert!(result.status.success(), "{}", stderr(&result));
    // The covariance loss is owner-only: in the diagnostics, never in the publishable report.
    let loss = report_json(&diagnostics)["covariance_loss"].as_f64().expect("covariance_loss in the diagnostics");
    assert!(loss > 0.0 && loss < 1.0, "covariance loss {loss}");
    assert!(!std::fs::read_to_string(&report).unwrap().contains("covariance_loss"));
    let batches = batches(&output);
    let schema = batches[0].schema();
    let types: Vec<(String, DataType)> =
        schema.fields().iter().map(|field| (field.name().clone(), field.data_type().clone())).collect();
    assert_eq!(
        types,
        [
            ("flag".to_string(), DataType::Boolean),
            ("delayed".to_string(), DataType::Int64),
            ("carrier".to_string(), DataType::Utf8),
            ("origin".to_string(), DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))),
            ("distance".to_string(), DataType::Float64),
        ]
    );
    let rows: usize = batches.iter().map(|batch| batch.num_rows()).sum();
    assert_eq!(rows, 5000);
    for batch in &batches {
        let carriers = arrow::compute::cast(batch.column(2), &DataType::Utf8).unwrap();
        assert!(carriers.as_string::<i32>().iter().all(|c| ["AA", "B6", "UA"].contains(&c.unwrap())));
        let delayed = batch.column(1).as_primitive::<arrow::datatypes::Int64Type>();
        assert!(delayed.values().iter().all(|&v| v == 0 || v == 1));
        let distance = batch.column(4).as_primitive::<arrow::datatypes::Float64Type>();
        assert!(distance.values().iter().all(|&v| (0.0..=5000.0).contains(&v)));
    }
    let json = report_json(&report);
    assert_eq!(json["mechanism"], "covloss");
    let guarantee = &json["guarantee"];
    assert_eq!(guarantee["epsilon"], 2.0);
    assert!(guarantee["epsilon_spent"].as_f64().unwrap() <= 2.0);
    assert!(guarantee["epsilon_spent"].as_f64().unwrap() >= 2.0 * (1.0 - 1e-6));
    assert!(guarantee["neighbours"].as_str().unwrap().starts_with("replace"));
    assert_eq!(guarantee["fit_for_release"], false, "a seeded run");
    assert!(guarantee.get("anonymity").is_none());
    let parameters = &json["parameters"];
    assert_eq!(parameters["bits"], 1 + 1 + 3 + 3 + 8);
    assert!(parameters["t_rule"].as_str().unwrap().contains("ln"));
    assert!(parameters["independent_rounding_decodable_rows"].as_f64().unwrap() <= 1.0);
    assert_eq!(json["input"]["columns"][2]["encoding"], "one-hot over 3 public categories");
}

#[test]
fn seeded_runs_are_identical_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let input = mixed_table(dir.path(), 3000);
    let mut tables = Vec::new();
    for (mechanism, threads) in [("covloss", "1"), ("covloss", "2"), ("microagg", "1"), ("microagg", "2")] {
        let output = dir.path().join(format!("{mechanism}-{threads}.parquet"));
        let report = dir.path().join(format!("{mechanism}-{threads}.json"));
        let mut args = encoded_args(input.to_str().unwrap(), output.to_str().unwrap(), report.to_str().unwrap());
        args.extend(["--mechanism", mechanism, "--seed", "3", "--threads", threads, "--rows", "40000"]);
        if mechanism == "covloss" {
            args.extend(["--epsilon", "1", "--neighbours", "replace"]);
        } else {
            args.extend(["--k", "30"]);
        }
        let result = dpsynth(&args);
        assert!(result.status.success(), "{}", stderr(&result));
        tables.push(std::fs::read(&output).unwrap());
    }
    assert_eq!(tables[0], tables[1], "covloss: 1 vs 2 threads");
    assert_eq!(tables[2], tables[3], "microagg: 1 vs 2 threads");
}

#[test]
fn microagg_reports_anonymity_not_differential_privacy_and_is_never_fit_for_release() {
    let dir = tempfile::tempdir().unwrap();
    let input = mixed_table(dir.path(), 3000);
    let output = dir.path().join("out.parquet");
    let report = dir.path().join("report.json");
    let mut args = encoded_args(input.to_str().unwrap(), output.to_str().unwrap(), report.to_str().unwrap());
    args.extend(["--mechanism", "microagg", "--k", "100"]);
    let result = dpsynth(&args);
    assert!(result.status.success(), "{}", stderr(&result));
    let json = report_json(&report);
    let guarantee = &json["guarantee"];
    assert!(guarantee["epsilon"].is_null(), "no epsilon: {guarantee}");
    assert_eq!(guarantee["fit_for_release"], false, "not DP, even without --seed");
    let anonymity = guarantee["anonymity"].as_str().unwrap();
    assert!(
        anonymity.contains("at least 30 input rows") && anonymity.contains("NOT differential privacy"),
        "{anonymity}"
    );
    assert_eq!(json["parameters"]["anonymity"], 30);
    assert_eq!(json["release"]["synthetic_rows"], 3000);
}

#[test]
fn wrong_relations_options_and_values_are_refused_by_name_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = mixed_table(dir.path(), 500);
    let before = files_in(dir.path());
    let output = dir.path().join("out.parquet");
    let report = dir.path().join("report.json");
    let (i, o, r) = (input.to_str().unwrap(), output.to_str().unwrap(), report.to_str().unwrap());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--mechanism", "covloss", "--epsilon", "1"], "--neighbours replace"),
        (vec!["--mechanism", "covloss", "--epsilon", "1", "--neighbours", "replace", "--k", "5"], "--k"),
        (vec!["--mechanism", "microagg", "--k", "5", "--epsilon", "1"], "NOT differentially"),
        (vec!["--mechanism", "microagg"], "--k"),
        (vec!["--mechanism", "microagg", "--k", "5", "--damping", "cells"], "--damping"),
        (vec!["--mechanism", "microagg", "--k", "501"], "--k"),
    ];
    for (extra, expected) in cases {
        let mut args = encoded_args(i, o, r);
        args.extend(extra.iter().copied());
        let result = dpsynth(&args);
        assert_eq!(result.status.code(), Some(2), "{extra:?}: {}", stderr(&result));
        assert!(stderr(&result).contains(expected), "{extra:?}: {}", stderr(&result));
    }
    // A carrier outside the public list: an error naming the file, column and value, unless --unlisted other.
    let short_list = |extra: &[&'static str]| {
        let mut args = vec![
            "synth",
            i,
            "--output",
            o,
            "--report",
            r,
            "--quiet",
            "--columns",
            "carrier",
            "--categories",
            "carrier=AA,B6",
            "--mechanism",
            "microagg",
            "--k",
            "10",
        ];
        args.extend_from_slice(extra);
        dpsynth(&args)
    };
    let result = short_list(&[]);
    assert_eq!(result.status.code(), Some(2));
    let message = stderr(&result);
    assert!(
        message.contains("mixed.parquet") && message.contains("'carrier'") && message.contains("'UA'"),
        "{message}"
    );
    // A numeric column given neither categories nor bins is not a bit.
    let mut args =
        vec!["synth", i, "--output", o, "--quiet", "--columns", "distance", "--mechanism", "microagg", "--k", "10"];
    let result = dpsynth(&args);
    assert_eq!(result.status.code(), Some(2));
    assert!(stderr(&result).contains("'distance'") && stderr(&result).contains("not a bit"), "{}", stderr(&result));
    assert_eq!(files_in(dir.path()), before, "nothing half-written");
    args.clear();
    let result = short_list(&["--unlisted", "other"]);
    assert!(result.status.success(), "{}", stderr(&result));
    let values: Vec<Option<String>> = batches(&output)
        .iter()
        .flat_map(|batch| batch.column(0).as_string::<i32>().iter().map(|v| v.map(str::to_string)).collect::<Vec<_>>())
        .collect();
    assert!(values.iter().any(Option::is_none), "the 'other' bit decodes to null");
    assert!(values.iter().flatten().all(|v| v == "AA" || v == "B6"));
}

#[test]
fn category_lists_come_from_the_config_never_from_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let input = mixed_table(dir.path(), 2000);
    let config = dir.path().join("run.toml");
    // ZZ never occurs in the data; DL neither. Both are in the public list, so both get bits.
    std::fs::write(
        &config,
        "columns = [\"carrier\", \"flag\"]\n[categories]\ncarrier = [\"AA\", \"B6\", \"UA\", \"ZZ\", \"DL\"]\n",
    )
    .unwrap();
    let output = dir.path().join("out.parquet");
    let report = dir.path().join("report.json");
    let result = dpsynth(&[
        "synth",
        input.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--quiet",
        "--mechanism",
        "covloss",
        "--epsilon",
        "0.05",
        "--neighbours",
        "replace",
        "--seed",
        "1",
        "--rows",
        "20000",
    ]);
    assert!(result.status.success(), "{}", stderr(&result));
    let json = report_json(&report);
    assert_eq!(json["parameters"]["bits"], 6, "5 listed categories + 1 bit, whatever the data holds");
    // Columns come in the file's order: flag, then carrier.
    assert_eq!(json["input"]["columns"][1]["name"], "carrier");
    assert_eq!(json["input"]["columns"][1]["encoding"], "one-hot over 5 public categories");
    // At ε = 0.05 the noisy centroids give the absent categories mass: they appear in the output.
    let seen: std::collections::BTreeSet<String> = batches(&output)
        .iter()
        .flat_map(|batch| {
            let carrier = batch.column_by_name("carrier").unwrap();
            carrier.as_string::<i32>().iter().map(|v| v.unwrap().to_string()).collect::<Vec<_>>()
        })
        .collect();
    assert!(seen.contains("ZZ") || seen.contains("DL"), "{seen:?}");
}

#[test]
fn integer_categories_and_zero_one_integers_round_trip_their_types() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ints.parquet");
    let months: Vec<i32> = (0..1200).map(|i| 1 + i % 12).collect();
    let bits: Vec<i32> = (0..1200).map(|i| i32::from(i % 12 < 6)).collect();
    write_parquet(
        &path,
        vec![("month", Arc::new(Int32Array::from(months)) as ArrayRef), ("summer", Arc::new(Int32Array::from(bits)))],
        500,
    );
    let output = dir.path().join("out.parquet");
    let months_list = format!("month={}", (1..=12).map(|m| m.to_string()).collect::<Vec<_>>().join(","));
    let result = dpsynth(&[
        "synth",
        path.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--quiet",
        "--columns",
        "month,summer",
        "--categories",
        &months_list,
        "--mechanism",
        "microagg",
        "--k",
        "12",
        "--cells-from",
        "k",
        "--seed",
        "2",
    ]);
    assert!(result.status.success(), "{}", stderr(&result));
    let batches = batches(&output);
    assert_eq!(batches[0].schema().field(0).data_type(), &DataType::Int32);
    assert_eq!(batches[0].schema().field(1).data_type(), &DataType::Int32);
    for batch in &batches {
        let month = batch.column(0).as_primitive::<Int32Type>();
        assert!(month.values().iter().all(|m| (1..=12).contains(m)));
        assert_eq!(month.null_count(), 0);
    }
    // A 0/1 column with a 2 in it is refused, naming the value.
    let bad = dir.path().join("bad.parquet");
    write_parquet(&bad, vec![("summer", Arc::new(Int32Array::from(vec![0, 1, 2])) as ArrayRef)], 10);
    let result = dpsynth(&[
        "synth",
        bad.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--quiet",
        "--columns",
        "summer",
        "--mechanism",
        "microagg",
        "--k",
        "1",
    ]);
    assert_eq!(result.status.code(), Some(2));
    assert!(stderr(&result).contains("value 2 is not a bit"), "{}", stderr(&result));
}

#[test]
fn eval_marginals_scores_a_generated_latent_class_table_and_its_synthetic_versions() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.parquet");
    let result = dpsynth(&[
        "generate",
        real.to_str().unwrap(),
        "--rows",
        "20000",
        "--dims",
        "6",
        "--law",
        "latent-class:3",
        "--seed",
        "5",
    ]);
    assert!(result.status.success(), "{}", stderr(&result));
    let columns = "x0,x1,x2,x3,x4,x5";
    let mut outputs = Vec::new();
    for (name, extra) in [
        ("microagg", vec!["--mechanism", "microagg", "--k", "100", "--cells-from", "k"]),
        ("covloss", vec!["--mechanism", "covloss", "--epsilon", "1", "--neighbours", "replace", "--damping", "cells"]),
    ] {
        let output = dir.path().join(format!("{name}.parquet"));
        let mut args = vec![
            "synth",
            real.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--quiet",
            "--columns",
            columns,
            "--seed",
            "1",
        ];
        args.extend(extra);
        let result = dpsynth(&args);
        assert!(result.status.success(), "{name}: {}", stderr(&result));
        outputs.push(output);
    }
    let json_path = dir.path().join("marginals.json");
    let result = dpsynth(&[
        "eval",
        "--real",
        real.to_str().unwrap(),
        "--synth",
        real.to_str().unwrap(),
        "--synth",
        outputs[0].to_str().unwrap(),
        "--synth",
        outputs[1].to_str().unwrap(),
        "--marginals",
        "--columns",
        columns,
        "--json",
        json_path.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(result.status.success(), "{}", stderr(&result));
    let json = report_json(&json_path);
    let mse = |comparison: usize, degree: usize| {
        json["comparisons"][comparison]["marginals"]["degrees"][degree - 1]["mse"].as_f64().unwrap()
    };
    assert_eq!((mse(0, 1), mse(0, 2), mse(0, 3)), (0.0, 0.0, 0.0), "a table against itself");
    // Both mechanisms keep the pairwise marginals of a 3-class table to a few percent (√MSE_2 < 0.05);
    // a broken rounding or centroid (bits 0 or ½ everywhere) is off by ~0.2.
    for comparison in [1, 2] {
        for degree in [1, 2, 3] {
            assert!(
                mse(comparison, degree) < 0.05f64.powi(2),
                "comparison {comparison}, d = {degree}: {}",
                mse(comparison, degree)
            );
        }
        assert_eq!(json["comparisons"][comparison]["marginals"]["degrees"][2]["sampled"], false);
    }
}
