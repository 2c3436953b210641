//! Datasets as input (issue 17): a directory (recursively) or a glob of Parquet files reads as the
//! concatenation of their row groups; files that disagree on the used columns are refused naming the file.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float32Array, Int64Array};

use crate::common::*;

const ROWS: usize = 3000;

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

/// Columns `a` (float, [0, 1]) and `b` (integer, [0, 100)) for rows `range` of one fixed table.
fn columns(range: std::ops::Range<usize>) -> Vec<(&'static str, ArrayRef)> {
    let mut fixture = Fixture::new(21);
    let a: Vec<f64> = (0..ROWS).map(|_| fixture.unit()).collect();
    vec![
        ("a", floats(a[range.clone()].iter().copied())),
        ("b", Arc::new(Int64Array::from_iter_values(range.map(|i| (i * 37 % 100) as i64))) as ArrayRef),
    ]
}

fn synth(input: &Path, output: &Path, report: &Path) -> std::process::Output {
    dpsynth(&[
        "synth",
        text(input),
        "--output",
        text(output),
        "--report",
        text(report),
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--bounds",
        "b=0:100",
        "--seed",
        "7",
        "--quiet",
    ])
}

fn report_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_directory_or_a_glob_gives_the_output_of_the_concatenated_file() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.parquet");
    write_parquet(&whole, columns(0..ROWS), 1000);
    // The same rows in three files (nested, other row-group sizes, one with its columns swapped).
    let parts = dir.path().join("parts");
    std::fs::create_dir_all(parts.join("day=2")).unwrap();
    write_parquet(&parts.join("day=1.parquet"), columns(0..700), 300);
    let mut swapped = columns(700..2000);
    swapped.reverse();
    write_parquet(&parts.join("day=2/a.parquet"), swapped, 512);
    write_parquet(&parts.join("day=3.parquet"), columns(2000..ROWS), 5000);
    std::fs::write(parts.join("README.txt"), "not a table").unwrap();

    let expected = dir.path().join("from-file.parquet");
    assert!(synth(&whole, &expected, &dir.path().join("r0.json")).status.success());
    let glob = format!("{}/*.parquet", text(&parts));
    for (input, name) in [(parts.as_path(), "from-dir"), (Path::new(&glob), "from-glob")] {
        let output = dir.path().join(format!("{name}.parquet"));
        let report = dir.path().join(format!("{name}.json"));
        let result = synth(input, &output, &report);
        assert!(result.status.success(), "{name}: {}", stderr(&result));
        if name == "from-dir" {
            assert_eq!(std::fs::read(&output).unwrap(), std::fs::read(&expected).unwrap(), "{name}");
            assert_eq!(report_json(&report)["input"]["files"], 3);
        } else {
            // The glob is not recursive: day=2/a.parquet is not among its files.
            assert_eq!(report_json(&report)["input"]["files"], 2);
        }
    }
    // eval reads a dataset as --real like a file: the same numbers.
    let evaluate = |real: &Path, json: &str| {
        let json = dir.path().join(json);
        let result = dpsynth(&[
            "eval",
            "--real",
            text(real),
            "--synth",
            text(&expected),
            "--bounds",
            "a=0:1",
            "--bounds",
            "b=0:100",
            "--json",
            text(&json),
            "--seed",
            "3",
            "--quiet",
        ]);
        assert!(result.status.success(), "{}", stderr(&result));
        let mut value = report_json(&json);
        value["real"] = serde_json::Value::Null;
        value
    };
    let (from_dir, from_file) = (evaluate(&parts, "dir.json"), evaluate(&whole, "file.json"));
    assert!(from_dir["w1"]["value"].is_number(), "{from_dir}");
    assert_eq!(from_dir["w1"], from_file["w1"]);
    let listing = dpsynth(&["inspect", text(&parts)]);
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("(3 files)") && listing.contains("rows: 3000"), "{listing}");
    assert!(listing.contains("day=2/a.parquet") && listing.contains("1300 rows"), "{listing}");
}

#[test]
fn files_that_disagree_on_a_column_and_empty_datasets_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |input: &Path, fragments: &[&str]| {
        let output = dir.path().join("out.parquet");
        let result = synth(input, &output, &dir.path().join("out.json"));
        let message = stderr(&result);
        assert_eq!(result.status.code(), Some(2), "{message}");
        for fragment in fragments {
            assert!(message.contains(fragment), "'{fragment}' missing from: {message}");
        }
        assert!(!output.exists());
    };
    let missing = dir.path().join("missing");
    std::fs::create_dir(&missing).unwrap();
    write_parquet(&missing.join("1.parquet"), columns(0..100), 100);
    write_parquet(&missing.join("2.parquet"), columns(100..200)[..1].to_vec(), 100);
    refused(&missing, &["2.parquet", "column 'b'", "no such column"]);

    let retyped = dir.path().join("retyped");
    std::fs::create_dir(&retyped).unwrap();
    write_parquet(&retyped.join("1.parquet"), columns(0..100), 100);
    let mut other = columns(100..200);
    other[0].1 = Arc::new(Float32Array::from_iter_values((0..100).map(|i| i as f32 / 100.0)));
    write_parquet(&retyped.join("2.parquet"), other, 100);
    refused(&retyped, &["2.parquet", "column 'a'", "Float32", "Float64"]);

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "no tables here").unwrap();
    refused(&empty, &["no *.parquet files"]);
    refused(&dir.path().join("nothing-*.parquet"), &["matches no files"]);
}

#[test]
fn an_output_inside_an_input_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    write_parquet(&data.join("1.parquet"), columns(0..100), 100);
    let output = data.join("synthetic.parquet");
    let result = synth(&data, &output, &dir.path().join("r.json"));
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{message}");
    assert!(message.contains("inside the input"), "{message}");
    assert!(!output.exists());
}

#[test]
fn hive_folders_become_columns_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    // The concatenated table with `year` stored as its last column...
    let whole = dir.path().join("whole.parquet");
    let year = |range: std::ops::Range<usize>| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(range.map(|i| if i < 1800 { 2023 } else { 2024 })))
    };
    let mut all = columns(0..ROWS);
    all.push(("year", year(0..ROWS)));
    write_parquet(&whole, all, 1000);
    // ...and the same rows partitioned by year=... folders, the year only in the folder names.
    let parts = dir.path().join("parts");
    std::fs::create_dir_all(parts.join("year=2023")).unwrap();
    std::fs::create_dir_all(parts.join("year=2024")).unwrap();
    write_parquet(&parts.join("year=2023/a.parquet"), columns(0..1800), 700);
    write_parquet(&parts.join("year=2024/a.parquet"), columns(1800..ROWS), 700);
    let run = |input: &Path, name: &str, extra: &[&str]| {
        let output = dir.path().join(format!("{name}.parquet"));
        let mut args = vec![
            "synth",
            text(input),
            "--output",
            text(&output),
            "--epsilon",
            "1",
            "--bounds",
            "a=0:1",
            "--bounds",
            "b=0:100",
            "--bounds",
            "year=2000:2100",
            "--seed",
            "7",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        (dpsynth(&args), output)
    };
    let (result, expected) = run(&whole, "from-file", &[]);
    assert!(result.status.success(), "{}", stderr(&result));
    let (result, output) = run(&parts, "from-folders", &["--hive-columns"]);
    assert!(result.status.success(), "{}", stderr(&result));
    assert_eq!(std::fs::read(&output).unwrap(), std::fs::read(&expected).unwrap());
    // Without the flag the folders are only folders.
    let (result, _) = run(&parts, "unasked", &[]);
    assert_eq!(result.status.code(), Some(2));
    assert!(stderr(&result).contains("'year'") && stderr(&result).contains("no such column"), "{}", stderr(&result));
    let listing = dpsynth(&["inspect", text(&parts), "--hive-columns"]);
    assert!(String::from_utf8_lossy(&listing.stdout).contains("year"));
    // eval reads the partitioned real data as the file that stores the year.
    let evaluate = |real: &Path, json: &str, extra: &[&str]| {
        let json = dir.path().join(json);
        let mut args = vec![
            "eval",
            "--real",
            text(real),
            "--synth",
            text(&expected),
            "--bounds",
            "a=0:1",
            "--bounds",
            "b=0:100",
            "--bounds",
            "year=2000:2100",
            "--json",
            text(&json),
            "--seed",
            "3",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let result = dpsynth(&args);
        assert!(result.status.success(), "{}", stderr(&result));
        report_json(&json)["w1"].clone()
    };
    let from_folders = evaluate(&parts, "folders.json", &["--hive-columns"]);
    assert!(from_folders["value"].is_number(), "{from_folders}");
    assert_eq!(from_folders, evaluate(&whole, "file.json", &[]));
    // So does eval --marginals (the year one-hot over its two categories of bins).
    let marginals = |real: &Path, json: &str, extra: &[&str]| {
        let json = dir.path().join(json);
        let mut args = vec![
            "eval",
            "--marginals",
            "--real",
            text(real),
            "--synth",
            text(&expected),
            "--columns",
            "a,year",
            "--bounds",
            "a=0:1",
            "--bins",
            "a=4",
            "--bounds",
            "year=2023:2025",
            "--bins",
            "year=2",
            "--json",
            text(&json),
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let result = dpsynth(&args);
        assert!(result.status.success(), "{}", stderr(&result));
        report_json(&json)["comparisons"].clone()
    };
    assert_eq!(
        marginals(&parts, "marginals-folders.json", &["--hive-columns"]),
        marginals(&whole, "marginals-file.json", &[])
    );
    // A file outside the year=... folders has no year: refused naming it.
    write_parquet(&parts.join("stray.parquet"), columns(0..10), 10);
    let (result, _) = run(&parts, "stray", &["--hive-columns"]);
    assert_eq!(result.status.code(), Some(2));
    assert!(
        stderr(&result).contains("stray.parquet") && stderr(&result).contains("partition keys"),
        "{}",
        stderr(&result)
    );
}
