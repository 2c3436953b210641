//! End-to-end properties of `dpsynth synth`: types and names survive, seeded runs are reproducible
//! whatever the thread count, the release and the diagnostics stay apart, bounds come from the user.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use arrow::array::*;
use arrow::datatypes::DataType;

fn run_ok(args: &[&str]) {
    let result = dpsynth(args);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn uniform_table(dir: &Path, name: &str, rows: usize, dims: usize, seed: u64) -> PathBuf {
    let path = dir.join(name);
    let mut fixture = Fixture::new(seed);
    let names = ["x", "y", "z", "w"];
    let columns = (0..dims).map(|axis| (names[axis], floats((0..rows).map(|_| fixture.unit())))).collect();
    write_parquet(&path, columns, 1000);
    path
}

#[test]
fn every_numeric_type_round_trips_with_its_name_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("types.parquet");
    let rows = 400;
    let ints = |modulus: i64| (0..rows as i64).map(move |i| i % modulus);
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("f32", Arc::new(Float32Array::from_iter_values(ints(100).map(|v| v as f32 / 10.0)))),
        ("label", Arc::new(StringArray::from_iter_values(ints(3).map(|v| v.to_string())))),
        ("f64", floats(ints(100).map(|v| v as f64 / 10.0))),
        ("i8", Arc::new(Int8Array::from_iter_values(ints(100).map(|v| v as i8)))),
        ("i16", Arc::new(Int16Array::from_iter_values(ints(100).map(|v| v as i16)))),
        ("i32", Arc::new(Int32Array::from_iter_values(ints(100).map(|v| v as i32)))),
        ("i64", Arc::new(Int64Array::from_iter_values(ints(100)))),
        ("u8", Arc::new(UInt8Array::from_iter_values(ints(100).map(|v| v as u8)))),
        ("u16", Arc::new(UInt16Array::from_iter_values(ints(100).map(|v| v as u16)))),
        ("u32", Arc::new(UInt32Array::from_iter_values(ints(100).map(|v| v as u32)))),
        ("u64", Arc::new(UInt64Array::from_iter_values(ints(100).map(|v| v as u64)))),
        ("day", Arc::new(Date32Array::from_iter_values(ints(100).map(|v| 19000 + v as i32)))),
        ("ms", Arc::new(Date64Array::from_iter_values(ints(100).map(|v| v * 86_400_000)))),
        (
            "ts",
            Arc::new(
                TimestampMillisecondArray::from_iter_values(ints(100).map(|v| 1_700_000_000_000 + v * 1000))
                    .with_timezone("UTC"),
            ),
        ),
        ("clock", Arc::new(Time32SecondArray::from_iter_values(ints(100).map(|v| 36_000 + v as i32 * 60)))),
        ("micros", Arc::new(Time64MicrosecondArray::from_iter_values(ints(100).map(|v| v * 1_000_000)))),
        ("wait", Arc::new(DurationMillisecondArray::from_iter_values(ints(100).map(|v| v * 250)))),
    ];
    let expected_types: Vec<(String, DataType)> = columns
        .iter()
        .filter(|(name, _)| *name != "label")
        .map(|(name, array)| (name.to_string(), array.data_type().clone()))
        .collect();
    write_parquet(&input, columns, 128);
    let output = dir.path().join("out.parquet");
    // Bounds given in a different order from the file's: the output keeps the file's order.
    let bounds = [
        "wait=0:25000",
        "micros=0:100000000",
        "clock=36000:42000",
        "ts=1700000000000:1700000100000",
        "ms=0:8640000000",
        "day=19000:19100",
        "u64=0:100",
        "u32=0:100",
        "u16=0:100",
        "u8=0:100",
        "i64=0:100",
        "i32=0:100",
        "i16=0:100",
        "i8=0:100",
        "f64=0:10",
        "f32=0:10",
    ];
    let mut args = vec![
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--epsilon",
        "2",
        "--seed",
        "3",
        "--quiet",
        "--exclude",
        "label",
    ];
    for bound in &bounds {
        args.extend(["--bounds", bound]);
    }
    run_ok(&args);
    let (fields, values) = read_parquet(&output);
    assert_eq!(fields, expected_types);
    for ((name, data_type), column) in fields.iter().zip(&values) {
        assert!(!column.is_empty());
        if !matches!(data_type, DataType::Float32 | DataType::Float64) {
            assert!(column.iter().all(|v| v.fract() == 0.0), "{name} came back with fractions");
        }
        let (lo, hi) = match name.as_str() {
            "f32" | "f64" => (0.0, 10.0),
            "day" => (19000.0, 19100.0),
            "ms" => (0.0, 8_640_000_000.0),
            "ts" => (1_700_000_000_000.0, 1_700_000_100_000.0),
            "clock" => (36_000.0, 42_000.0),
            "micros" => (0.0, 100_000_000.0),
            "wait" => (0.0, 25_000.0),
            _ => (0.0, 100.0),
        };
        assert!(column.iter().all(|&v| v >= lo && v <= hi), "{name} left its bounds");
    }
}

/// Hours 6, 8 and 10 on [0, 24] in 32 cells of 0.75: the cell [6, 6.75) holds only 6, so its rows come
/// back as 6 (rounding each value drawn in it to nearest sent a third of them to 7), and every cell's
/// rows stay on the integers it holds. PSMM (a regular grid) too.
#[test]
fn integer_columns_stay_on_the_integers_of_their_released_cells() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("hours.parquet");
    let hours: Vec<i32> = (0..9000).map(|row| [6, 8, 10][row % 3]).collect();
    write_parquet(&input, vec![("hour", Arc::new(Int32Array::from(hours)) as ArrayRef)], 3000);
    let output = dir.path().join("out.parquet");
    let (input, output) = (input.to_str().unwrap(), output.to_str().unwrap());
    let common = ["--bounds", "hour=0:24", "--epsilon", "1000", "--seed", "1", "--quiet"];
    for mechanism in [&["--depth", "5"][..], &["--mechanism", "psmm", "--cells", "32"]] {
        let mut args = vec!["synth", input, "--output", output];
        args.extend(common);
        args.extend(mechanism);
        run_ok(&args);
        let (_, values) = read_parquet(Path::new(output));
        for hour in [6.0, 8.0, 10.0] {
            let count = values[0].iter().filter(|&&value| value == hour).count();
            assert!((2950..=3050).contains(&count), "{mechanism:?}: {count} rows of {hour} of 3000");
        }
    }
}

#[test]
fn seeded_runs_are_identical_whatever_the_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let input = uniform_table(dir.path(), "in.parquet", 20_000, 2, 5);
    let run = |threads: &str, seed: Option<&str>| {
        let output = dir.path().join(format!("out-{threads}-{}.parquet", seed.unwrap_or("os")));
        let report = dir.path().join(format!("report-{threads}-{}.json", seed.unwrap_or("os")));
        let mut args = vec![
            "synth",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--epsilon",
            "1",
            "--bounds",
            "x=0:1",
            "--bounds",
            "y=0:1",
            "--threads",
            threads,
            "--report",
            report.to_str().unwrap(),
            "--quiet",
        ];
        if let Some(seed) = seed {
            args.extend(["--seed", seed]);
        }
        run_ok(&args);
        (read_parquet(&output).1, json(&report))
    };
    let (one, report_one) = run("1", Some("42"));
    let (two, report_two) = run("2", Some("42"));
    let (three, _) = run("3", Some("42"));
    assert_eq!(one, two);
    assert_eq!(one, three);
    assert_eq!(report_one["parameters"], report_two["parameters"]);
    assert_eq!(report_one["guarantee"]["fit_for_release"], false);
    let (other_seed, _) = run("2", Some("43"));
    assert_ne!(one, other_seed);
    let (unseeded, report) = run("2", None);
    assert_ne!(one, unseeded);
    assert_eq!(report["guarantee"]["fit_for_release"], true);
}

#[test]
fn the_release_never_contains_what_only_the_owner_may_see() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    let mut fixture = Fixture::new(9);
    // 1237 rows, 17 of them outside the public bounds.
    let values: Vec<f64> = (0..1237).map(|i| if i < 17 { 5.0 + i as f64 } else { fixture.unit() }).collect();
    write_parquet(&input, vec![("x", floats(values))], 500);
    let output = dir.path().join("out.parquet");
    let report = dir.path().join("report.json");
    let diagnostics = dir.path().join("diagnostics.json");
    run_ok(&[
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--epsilon",
        "1",
        "--bounds",
        "x=0:1",
        "--report",
        report.to_str().unwrap(),
        "--diagnostics",
        diagnostics.to_str().unwrap(),
        "--quiet",
    ]);
    let diagnostics = json(&diagnostics);
    assert_eq!(diagnostics["true_rows"], 1237);
    assert_eq!(diagnostics["rows_clamped"], 17);
    assert_eq!(diagnostics["clamped_values"][0]["clamped"], 17);
    assert!(diagnostics["warning"].as_str().unwrap().contains("NOT PRIVATE"));
    let text = std::fs::read_to_string(&report).unwrap();
    for owner_only in [
        "true_rows",
        "rows_read",
        "rows_clamped",
        "clamped_values",
        "rows_dropped",
        "timings_seconds",
        "peak_memory_bytes",
    ] {
        assert!(!text.contains(owner_only), "the report mentions '{owner_only}'");
    }
    let report = json(&report);
    // Under add-remove the row count in the release is the noisy n̂, and the table has that many rows.
    let released = report["release"]["root_count"].as_u64().unwrap();
    assert_eq!(report["release"]["synthetic_rows"].as_u64().unwrap(), released);
    assert_eq!(read_parquet(&output).1[0].len() as u64, released);
    assert!(report["guarantee"]["epsilon_spent"].as_f64().unwrap() <= 1.0);
    assert!(report["accuracy"]["expected_w1_bound"].as_f64().unwrap() > 0.0);
}

#[test]
fn bounds_come_from_the_user_not_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    let mut fixture = Fixture::new(4);
    write_parquet(&input, vec![("x", floats((0..2000).map(|_| 2.0 + fixture.unit())))], 500);
    let output = dir.path().join("out.parquet");
    run_ok(&[
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--epsilon",
        "0.5",
        "--bounds",
        "x=0:10",
        "--seed",
        "1",
        "--quiet",
    ]);
    let values = &read_parquet(&output).1[0];
    assert!(values.iter().all(|&v| (0.0..=10.0).contains(&v)));
    // Noise on empty cells of [0, 10] must place some points away from the data's range [2, 3].
    let outside = values.iter().filter(|&&v| !(2.0..=3.0).contains(&v)).count();
    assert!(outside > 0, "every synthetic point stayed inside the data's own min/max");

    // With the depth and n public (replace), the schedule is the same for any data.
    let other = dir.path().join("other.parquet");
    write_parquet(&other, vec![("x", floats((0..2000).map(|i| (i % 7) as f64)))], 500);
    let parameters = |input: &Path| {
        let report = dir.path().join("r.json");
        run_ok(&[
            "synth",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--epsilon",
            "1",
            "--bounds",
            "x=0:10",
            "--neighbours",
            "replace",
            "--report",
            report.to_str().unwrap(),
            "--quiet",
        ]);
        json(&report)["parameters"].clone()
    };
    assert_eq!(parameters(&input), parameters(&other));
}

#[test]
fn rows_option_gives_exactly_that_many_rows_and_config_file_works() {
    let dir = tempfile::tempdir().unwrap();
    let input = uniform_table(dir.path(), "in.parquet", 5000, 3, 2);
    let config = dir.path().join("run.toml");
    std::fs::write(
        &config,
        "epsilon = 1.0\nrows = 777\nplacement = \"centre\"\n[bounds]\nx = [0, 1]\ny = [0, 1]\nz = [0, 1]\n",
    )
    .unwrap();
    let output = dir.path().join("out.parquet");
    run_ok(&[
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--quiet",
    ]);
    let (fields, values) = read_parquet(&output);
    assert_eq!(fields.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(), ["x", "y", "z"]);
    assert!(values.iter().all(|column| column.len() == 777));
    // The command line wins over the file.
    run_ok(&[
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--rows",
        "10",
        "--columns",
        "y",
        "--quiet",
    ]);
    let (fields, values) = read_parquet(&output);
    assert_eq!(fields.len(), 1);
    assert_eq!(values[0].len(), 10);
}

#[test]
fn inspect_shows_the_schema_without_values() {
    let dir = tempfile::tempdir().unwrap();
    let input = uniform_table(dir.path(), "in.parquet", 2500, 2, 3);
    let result = dpsynth(&["inspect", input.to_str().unwrap()]);
    assert_eq!(result.status.code(), Some(0));
    let text = String::from_utf8(result.stdout).unwrap();
    assert!(text.contains("rows: 2500"));
    assert!(text.contains("row groups: 3"));
    assert!(text.contains("x ") && text.contains("Float64") && text.contains("needs bounds"));
}

#[test]
fn the_first_rows_of_the_default_output_are_a_sample_of_it_and_in_cell_order_they_are_not() {
    // y follows x: in cell order the first rows are the first cells of the Morton order, a corner where both
    // are small. In the default random order the first 1% of the rows are a uniform sample without
    // replacement of the output, so each column's mean over them lies within z = 5 standard errors
    // s·√((1 − m/N)/m) of the whole output's (z = 5: a false alarm about once in 10^6 seeds).
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trend.parquet");
    let mut fixture = Fixture::new(8);
    let x: Vec<f64> = (0..100_000).map(|_| fixture.unit()).collect();
    let y: Vec<f64> = x.iter().map(|&x| 0.8 * x + 0.2 * fixture.unit()).collect();
    write_parquet(&input, vec![("x", floats(x)), ("y", floats(y))], 10_000);
    let config = dir.path().join("cells.toml");
    std::fs::write(&config, "row-order = \"cells\"\n").unwrap();
    let synth = |name: &str, extra: &[&str]| {
        let output = dir.path().join(format!("{name}.parquet"));
        let mut args = vec![
            "synth",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--epsilon",
            "1",
            "--bounds",
            "x=0:1",
            "--bounds",
            "y=0:1",
            "--seed",
            "4",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        run_ok(&args);
        (read_parquet(&output).1, std::fs::read(&output).unwrap())
    };
    let (random, random_bytes) = synth("default", &["--threads", "2"]);
    // The default is random order, and its bytes do not depend on the thread count.
    assert!(synth("random-1", &["--row-order", "random", "--threads", "1"]).1 == random_bytes);
    let (cells, cells_bytes) = synth("cells", &["--row-order", "cells", "--threads", "2"]);
    assert!(synth("cells-config", &["--config", config.to_str().unwrap()]).1 == cells_bytes, "config key row-order");
    assert_eq!(random[0].len(), cells[0].len());
    let z_scores = |columns: &[Vec<f64>]| -> Vec<f64> {
        columns
            .iter()
            .map(|column| {
                let (rows, prefix) = (column.len() as f64, column.len() / 100);
                let mean = column.iter().sum::<f64>() / rows;
                let variance = column.iter().map(|value| (value - mean).powi(2)).sum::<f64>() / (rows - 1.0);
                let prefix_mean = column[..prefix].iter().sum::<f64>() / prefix as f64;
                let standard_error = (variance * (1.0 - prefix as f64 / rows) / prefix as f64).sqrt();
                (prefix_mean - mean) / standard_error
            })
            .collect()
    };
    let (random_z, cells_z) = (z_scores(&random), z_scores(&cells));
    assert!(random_z.iter().all(|z| z.abs() < 5.0), "random order: the first 1% is not a sample: z = {random_z:?}");
    assert!(cells_z.iter().all(|&z| z < -5.0), "cell order: the first 1% is not the corner: z = {cells_z:?}");
}
