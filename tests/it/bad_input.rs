//! Bad input always gets exit code 2, a message naming the file, column and reason, and leaves no
//! output (nor a temporary file) behind.

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use arrow::array::{ArrayRef, Float64Array, Int32Array, StringArray};

/// Runs `synth` on `input` into an empty directory; asserts exit 2, that stderr mentions every
/// `expected` fragment, and that nothing was written.
fn assert_rejected(input: &Path, extra: &[&str], expected: &[&str]) {
    let out_dir = tempfile::tempdir().unwrap();
    let output = out_dir.path().join("out.parquet");
    let report = out_dir.path().join("report.json");
    let mut args = vec![
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let result = dpsynth(&args);
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "args {extra:?}: {message}");
    for fragment in expected {
        assert!(message.contains(fragment), "args {extra:?}: '{fragment}' missing from: {message}");
    }
    assert!(!message.contains("panicked"), "{message}");
    assert!(files_in(out_dir.path()).is_empty(), "a failed run left {:?}", files_in(out_dir.path()));
}

fn good_table(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("good.parquet");
    let mut fixture = Fixture::new(1);
    let names: Vec<String> = (0..500).map(|i| format!("row{i}")).collect();
    write_parquet(
        &path,
        vec![
            ("a", floats((0..500).map(|_| fixture.unit()))),
            ("b", Arc::new(Int32Array::from_iter_values((0..500).map(|i| i % 50))) as ArrayRef),
            ("name", Arc::new(StringArray::from_iter_values(names)) as ArrayRef),
        ],
        100,
    );
    path
}

const BOUNDS: [&str; 8] = ["--epsilon", "1", "--bounds", "a=0:1", "--bounds", "b=0:50", "--exclude", "name"];

#[test]
fn missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.parquet");
    assert_rejected(&missing, &BOUNDS, &["nope.parquet", "cannot open"]);
}

#[test]
fn not_parquet_and_truncated_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text.parquet");
    std::fs::write(&text, "a,b\n1,2\n").unwrap();
    assert_rejected(&text, &BOUNDS, &["text.parquet", "not a readable Parquet file"]);

    let bytes = std::fs::read(good_table(dir.path())).unwrap();
    let truncated = dir.path().join("truncated.parquet");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    assert_rejected(&truncated, &BOUNDS, &["truncated.parquet", "not a readable Parquet file"]);

    // Footer intact, data pages overwritten: the failure comes while decoding a row group.
    let mut corrupt = bytes.clone();
    for byte in &mut corrupt[4..bytes.len() / 2] {
        *byte = 0xff;
    }
    let corrupted = dir.path().join("corrupted.parquet");
    std::fs::write(&corrupted, &corrupt).unwrap();
    assert_rejected(&corrupted, &BOUNDS, &["corrupted.parquet", "row group"]);
}

#[test]
fn missing_and_non_numeric_columns() {
    let dir = tempfile::tempdir().unwrap();
    let input = good_table(dir.path());
    assert_rejected(&input, &["--epsilon", "1", "--bounds", "zz=0:1"], &["good.parquet", "'zz'", "no such column"]);
    assert_rejected(
        &input,
        &["--epsilon", "1", "--bounds", "name=0:1"],
        &["'name'", "not a number", "--categories name="],
    );
    assert_rejected(&input, &["--epsilon", "1", "--bounds", "a=0:1", "--columns", "a,b"], &["no public domain: b"]);
}

#[test]
fn nulls_nan_and_infinity_name_the_column_and_row_group() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bad) in [("null", None), ("nan", Some(f64::NAN)), ("inf", Some(f64::INFINITY))] {
        let path = dir.path().join(format!("{name}.parquet"));
        let values: Vec<Option<f64>> = (0..300).map(|i| if i == 250 { bad } else { Some(0.5) }).collect();
        write_parquet(&path, vec![("x", Arc::new(Float64Array::from(values)) as ArrayRef)], 100);
        let what = match name {
            "null" => "a null",
            "nan" => "NaN",
            _ => "an infinite value",
        };
        assert_rejected(
            &path,
            &["--epsilon", "1", "--bounds", "x=0:1", "--nulls", "error"],
            &["'x'", what, "row group 2", "row 50", "--nulls drop"],
        );

        // Dropping works, and the dropped row is counted in the owner-only diagnostics.
        let out_dir = tempfile::tempdir().unwrap();
        let output = out_dir.path().join("out.parquet");
        let diagnostics = out_dir.path().join("diag.json");
        let result = dpsynth(&[
            "synth",
            path.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--epsilon",
            "1",
            "--bounds",
            "x=0:1",
            "--nulls",
            "drop",
            "--diagnostics",
            diagnostics.to_str().unwrap(),
            "--quiet",
        ]);
        assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
        let diagnostics: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(diagnostics).unwrap()).unwrap();
        assert_eq!(diagnostics["rows_dropped"], 1);
        assert_eq!(diagnostics["true_rows"], 299);
    }
}

#[test]
fn bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let input = good_table(dir.path());
    assert_rejected(&input, &["--epsilon", "1", "--bounds", "a=1:0"], &["'a'", "must be below"]);
    assert_rejected(&input, &["--epsilon", "1", "--bounds", "a=2:2"], &["'a'", "must be below"]);
    for epsilon in ["0", "-1", "NaN", "inf"] {
        assert_rejected(&input, &["--epsilon", epsilon, "--bounds", "a=0:1"], &["epsilon"]);
    }
    assert_rejected(
        &input,
        &["--epsilon", "1", "--bounds", "a=0:1", "--columns", "a", "--depth", "30", "--memory-limit-mib", "64"],
        &["--depth 30", "too large", "memory"],
    );
    assert_rejected(
        &input,
        &["--epsilon", "1", "--bounds", "a=0:1", "--neighbours", "replace", "--nulls", "drop"],
        &["--nulls drop", "replace"],
    );
    assert_rejected(&input, &["--epsilon", "1", "--bounds", "b=0.2:0.8"], &["'b'", "no integer"]);
    assert_rejected(
        &input,
        &["--epsilon", "1", "--bounds", "a=0:1", "--columns", "a", "--mechanism", "lowdim"],
        &["lowdim", "add-remove", "--root-share"],
    );
}

#[test]
fn unwritable_output_and_overwriting_the_input_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = good_table(dir.path());
    let result = dpsynth(&[
        "synth",
        input.to_str().unwrap(),
        "--output",
        "/nonexistent-dir/out.parquet",
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--columns",
        "a",
        "--quiet",
    ]);
    assert_eq!(result.status.code(), Some(2), "{}", stderr(&result));
    assert!(stderr(&result).contains("/nonexistent-dir/out.parquet"));

    let before = std::fs::read(&input).unwrap();
    let result = dpsynth(&[
        "synth",
        input.to_str().unwrap(),
        "--output",
        input.to_str().unwrap(),
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--columns",
        "a",
        "--quiet",
    ]);
    assert_eq!(result.status.code(), Some(2));
    assert!(stderr(&result).contains("would overwrite the input"));
    assert_eq!(std::fs::read(&input).unwrap(), before);
}

#[test]
fn usage_errors_exit_2() {
    let result = dpsynth(&["synth"]);
    assert_eq!(result.status.code(), Some(2));
    let result = dpsynth(&["synth", "x.parquet", "--output", "y.parquet", "--bounds", "a=0:1"]);
    assert_eq!(result.status.code(), Some(2));
    assert!(stderr(&result).contains("--epsilon is required"));
}

#[test]
fn options_of_another_mechanism_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = good_table(dir.path());
    let base = ["--epsilon", "1", "--bounds", "a=0:1"];
    let with = |extra: &[&'static str]| [&base[..], extra].concat();
    assert_rejected(&input, &with(&["--cells", "64"]), &["--cells", "psmm"]);
    assert_rejected(&input, &with(&["--target-dim", "2"]), &["--target-dim", "lowdim"]);
    assert_rejected(&input, &with(&["--inner-mechanism", "psmm"]), &["--inner-mechanism", "lowdim"]);
    assert_rejected(
        &input,
        &with(&["--mechanism", "lowdim", "--root-share", "1.5"]),
        &["--root-share", "between 0 and 1"],
    );
    assert_rejected(&input, &with(&["--mechanism", "psmm", "--cells", "0"]), &["--cells", "at least 1"]);
}
