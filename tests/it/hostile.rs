//! Hostile input (issue 13): nothing lost, nothing leaked, no hang. Each test is one defect found by
//! attacking the release binary; each failed before the fix.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Decimal128Array, DictionaryArray, Float16Array, Float32Array, Float64Array, Int32Array, Int64Array,
    Time32SecondArray,
};
use arrow::datatypes::{ArrowNativeType, Int32Type};

use crate::common::*;

/// A 1000-row table with a float column `a` in [0, 1] and an integer column `b` in [0, 50).
fn table(dir: &Path) -> PathBuf {
    let path = dir.join("real.parquet");
    let mut fixture = Fixture::new(13);
    write_parquet(
        &path,
        vec![
            ("a", floats((0..1000).map(|_| fixture.unit()))),
            ("b", Arc::new(Int64Array::from_iter_values((0..1000).map(|i| i % 50))) as ArrayRef),
        ],
        250,
    );
    path
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn synth_args<'a>(input: &'a Path, output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "synth",
        path_str(input),
        "--output",
        path_str(output),
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--quiet",
        "--columns",
        "a",
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn eval_never_writes_over_an_input_or_one_output_over_another() {
    let dir = tempfile::tempdir().unwrap();
    let real = table(dir.path());
    let before = std::fs::read(&real).unwrap();
    let eval = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            "--real",
            path_str(&real),
            "--synth",
            path_str(&real),
            "--bounds",
            "a=0:1",
            "--subsample-repeats",
            "0",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        args.iter().map(|arg| arg.to_string()).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>, fragments: &[&str]| {
        assert_refused(&args.iter().map(String::as_str).collect::<Vec<_>>(), fragments)
    };
    run(eval(&["--json", path_str(&real)]), &["--json", "would overwrite the input"]);
    let hard_link = dir.path().join("linked.parquet");
    std::fs::hard_link(&real, &hard_link).unwrap();
    run(eval(&["--json", path_str(&hard_link)]), &["linked.parquet", "would overwrite"]);
    // The report directory's eval.json and --json are the same file.
    let pages = dir.path().join("pages");
    let json = pages.join("eval.json");
    run(eval(&["--report-dir", path_str(&pages), "--json", path_str(&json)]), &["name the same file"]);
    assert_eq!(std::fs::read(&real).unwrap(), before, "the real table changed");
    assert!(!json.exists());
}

#[test]
fn synth_outputs_are_distinct_files_and_never_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let before = std::fs::read(&input).unwrap();
    let output = dir.path().join("out.parquet");
    let report = dir.path().join("r.json");
    // The publishable report must not become the owner-only diagnostics.
    assert_refused(
        &synth_args(&input, &output, &["--report", path_str(&report), "--diagnostics", path_str(&report)]),
        &["--report and --diagnostics name the same file"],
    );
    assert_refused(
        &synth_args(&input, &output, &["--report", path_str(&output)]),
        &["--output and --report name the same file"],
    );
    let hard_link = dir.path().join("hard.parquet");
    std::fs::hard_link(&input, &hard_link).unwrap();
    assert_refused(&synth_args(&input, &hard_link, &[]), &["would overwrite the input"]);
    let soft_link = dir.path().join("soft.json");
    std::os::unix::fs::symlink(&input, &soft_link).unwrap();
    assert_refused(
        &synth_args(&input, &output, &["--diagnostics", path_str(&soft_link)]),
        &["--diagnostics would overwrite the input"],
    );
    let config = dir.path().join("run.toml");
    std::fs::write(&config, "epsilon = 1\n").unwrap();
    assert_refused(
        &synth_args(&input, &output, &["--config", path_str(&config), "--report", path_str(&config)]),
        &["--config"],
    );
    assert_eq!(std::fs::read(&input).unwrap(), before);
    let mut expected = vec![config, hard_link, input, soft_link];
    expected.sort();
    assert_eq!(files_in(dir.path()), expected);
}

#[test]
fn generate_replaces_an_existing_file_only_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("keep.parquet");
    std::fs::write(&existing, "precious").unwrap();
    let generate = ["generate", path_str(&existing), "--rows", "10", "--dims", "2"];
    assert_refused(&generate, &["keep.parquet", "--force"]);
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "precious");
    let result = dpsynth(&[&generate[..], &["--force"][..]].concat());
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    assert_eq!(read_parquet(&existing).1.len(), 2);
    let fresh = dir.path().join("fresh.parquet");
    assert_refused(
        &["generate", path_str(&fresh), "--rows", "10", "--dims", "2", "--schema", path_str(&fresh)],
        &["name the same file"],
    );
    assert_refused(&["generate", path_str(&fresh), "--rows", "1000000000000000", "--dims", "2"], &["--rows", "10^12"]);
}

#[test]
fn a_directory_as_output_leaves_nothing_and_keeps_the_old_report() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let out_dir = tempfile::tempdir().unwrap();
    let blocked = out_dir.path().join("out");
    std::fs::create_dir(&blocked).unwrap();
    let report = out_dir.path().join("report.json");
    std::fs::write(&report, "the user's old report").unwrap();
    assert_refused(&synth_args(&input, &blocked, &["--report", path_str(&report)]), &["is a directory"]);
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "the user's old report");
    assert_eq!(files_in(out_dir.path()), [blocked.clone(), report]);
    assert!(files_in(&blocked).is_empty());
}

#[test]
fn stale_temporaries_of_killed_runs_are_removed_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    // A run killed with SIGKILL (PID far above any pid_max, so surely gone) left this.
    let stale = dir.path().join(".out.parquet.dpsynth-4000000000.tmp");
    std::fs::write(&stale, vec![0u8; 4096]).unwrap();
    let result = dpsynth(&synth_args(&input, &output, &[]));
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    assert!(!stale.exists(), "the stale temporary survived");
    assert_eq!(files_in(dir.path()), [output, input]);
}

#[test]
fn sigterm_and_sigint_remove_the_temporary_and_exit_128_plus_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let output = dir.path().join(format!("out-{signal}.parquet"));
        // Enough rows that the table is still being written when the signal comes.
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dpsynth"))
            .args(synth_args(&input, &output, &["--rows", "400000000"]))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let temporary = dir.path().join(format!(".out-{signal}.parquet.dpsynth-{}.tmp", child.id()));
        while !temporary.exists() && child.try_wait().unwrap().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(temporary.exists(), "the run ended before writing its table");
        let killed =
            std::process::Command::new("kill").args([format!("-{signal}"), child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        let status = child.wait_with_output().unwrap();
        assert_eq!(status.status.code(), Some(code), "SIG{signal}: {}", stderr(&status));
        assert!(!temporary.exists(), "SIG{signal} left the temporary file");
        assert!(!output.exists());
    }
}

#[test]
fn psmm_on_wide_tables_neither_hangs_nor_allocates_3_to_the_d() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.parquet");
    let mut fixture = Fixture::new(20);
    let names: Vec<String> = (0..45).map(|k| format!("x{k}")).collect();
    let columns: Vec<(&str, ArrayRef)> =
        names.iter().map(|name| (name.as_str(), floats((0..1000).map(|_| fixture.unit())))).collect();
    write_parquet(&path, columns, 1000);
    let output = dir.path().join("out.parquet");
    let bounds: Vec<String> = names.iter().map(|name| format!("{name}=0:1")).collect();
    let mut args = vec![
        "synth",
        path_str(&path),
        "--output",
        path_str(&output),
        "--epsilon",
        "1",
        "--mechanism",
        "psmm",
        "--quiet",
    ];
    for bound in &bounds {
        args.extend(["--bounds", bound.as_str()]);
    }
    // 20 columns hung (3^20 offsets) and 45 wrapped 3^45 around a usize.
    for width in [20, 45] {
        let columns = names[..width].join(",");
        let args: Vec<&str> =
            args[..9].iter().chain(&args[9..9 + 2 * width]).copied().chain(["--columns", columns.as_str()]).collect();
        let result = dpsynth(&args);
        assert_eq!(result.status.code(), Some(0), "d = {width}: {}", stderr(&result));
        assert_eq!(read_parquet(&output).0.len(), width);
    }
}

#[test]
fn bounds_must_fit_the_column_type_and_finite_arithmetic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typed.parquet");
    write_parquet(
        &path,
        vec![
            ("f64", floats((0..200).map(|i| i as f64))),
            ("f32", Arc::new(Float32Array::from_iter_values((0..200).map(|i| i as f32))) as ArrayRef),
            ("i64", Arc::new(Int64Array::from_iter_values(0..200)) as ArrayRef),
        ],
        200,
    );
    let output = dir.path().join("out.parquet");
    let synth = |bounds: &str| {
        vec![
            "synth".to_string(),
            path_str(&path).to_string(),
            "--output".into(),
            path_str(&output).to_string(),
            "--epsilon".into(),
            "1".into(),
            "--bounds".into(),
            bounds.to_string(),
            "--columns".into(),
            bounds.split('=').next().unwrap().to_string(),
            "--quiet".into(),
        ]
    };
    for (bounds, fragments) in [
        ("f64=-1e308:1e308", &["'f64'", "overflows"][..]),
        ("f32=0:1e39", &["'f32'", "range of type Float32"][..]),
        ("i64=0:1e19", &["'i64'", "range of type Int64"][..]),
    ] {
        let args = synth(bounds);
        assert_refused(&args.iter().map(String::as_str).collect::<Vec<_>>(), fragments);
    }
    assert!(!output.exists());
    // At the edge of each type's range the release is finite.
    for bounds in ["f64=-1e307:1e307", "f32=-3e38:3e38"] {
        let args = synth(bounds);
        let result = dpsynth(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(result.status.code(), Some(0), "{bounds}: {}", stderr(&result));
        let (_, columns) = read_parquet(&output);
        assert!(columns.iter().flatten().all(|value| value.is_finite()), "{bounds}");
    }
}

#[test]
fn epsilon_extremes_stay_fast_and_print_compactly() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    let report = dir.path().join("report.json");
    let result = dpsynth(&[
        "synth",
        path_str(&input),
        "--output",
        path_str(&output),
        "--report",
        path_str(&report),
        "--epsilon",
        "1e300",
        "--neighbours",
        "replace",
        "--bounds",
        "a=0:1",
        "--bounds",
        "b=0:50",
        "--quiet",
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    // ⌈log2 1000⌉ + 4 = 14: no deeper tree for 1000 rows whatever ε (depth 28 ran for a minute).
    assert_eq!(report["parameters"]["depth"], 14, "{report}");

    // Under replace the run succeeds (at depth 0), and its summary line printed ε with 300 digits.
    let mut args = synth_args(&input, &output, &["--neighbours", "replace"]);
    args.retain(|arg| *arg != "--quiet");
    args[5] = "1e-300";
    let result = dpsynth(&args);
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(0), "{message}");
    assert!(message.contains("ε = 1e-300") && !message.contains("0.0000000"), "{message}");
}

#[test]
fn threads_and_rows_have_limits_that_the_message_names() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    assert_refused(&synth_args(&input, &output, &["--threads", "4000"]), &["--threads 4000", "limit"]);
    assert_refused(&synth_args(&input, &output, &["--rows", "1000000000000000"]), &["--rows", "limit of 10^12"]);
    assert_refused(
        &["eval", "--real", path_str(&input), "--synth", path_str(&input), "--bounds", "a=0:1", "--threads", "4000"],
        &["--threads 4000", "limit"],
    );
    let state = dir.path().join("stream.state");
    let releases = dir.path().join("releases");
    assert_refused(
        &[
            "stream",
            path_str(&input),
            "--state",
            path_str(&state),
            "--epsilon",
            "1",
            "--bounds",
            "a=0:1",
            "--release-at-end",
            "--output-dir",
            path_str(&releases),
            "--threads",
            "4000",
        ],
        &["--threads 4000", "limit"],
    );
    assert!(!output.exists() && !state.exists() && !releases.exists());
}

#[test]
fn a_memory_limit_that_caps_the_depth_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    let config = dir.path().join("run.toml");
    // The old byte-valued key: 100 bytes is 1 MiB, far below what ε = 10 on 1000 rows asks for.
    std::fs::write(&config, "memory-limit = 100\n").unwrap();
    let mut args =
        synth_args(&input, &output, &["--config", path_str(&config), "--bounds", "b=0:50", "--threads", "64"]);
    args[5] = "10";
    args[10] = "a,b";
    let result = dpsynth(&args);
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(0), "{message}");
    assert!(message.contains("memory limit caps the tree"), "{message}");
    assert!(message.contains("memory-limit-mib = 1"), "{message}");
}

#[test]
fn duplicate_dictionary_and_decimal_columns_are_named_for_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let duplicated = dir.path().join("duplicated.parquet");
    write_parquet(&duplicated, vec![("a", floats([0.1, 0.2])), ("a", floats([0.9, 0.8]))], 10);
    let output = dir.path().join("out.parquet");
    assert_refused(&synth_args(&duplicated, &output, &[]), &["'a'", "2 columns of this name"]);

    let typed = dir.path().join("typed.parquet");
    let values = Arc::new(Float64Array::from(vec![0.25, 0.75]));
    let keys = Int32Array::from_iter_values((0..100).map(|i| i % 2));
    let dictionary = DictionaryArray::<Int32Type>::try_new(keys, values).unwrap();
    let decimal = Decimal128Array::from_iter_values(0..100i128).with_precision_and_scale(10, 2).unwrap();
    write_parquet(&typed, vec![("d", Arc::new(dictionary) as ArrayRef), ("m", Arc::new(decimal) as ArrayRef)], 100);
    let args = |bounds: &'static str| {
        vec!["synth", path_str(&typed), "--output", path_str(&output), "--epsilon", "1", "--bounds", bounds]
    };
    assert_refused(&args("d=0:1"), &["'d'", "dictionary-encoded Float64"]);
    assert_refused(&args("m=0:1"), &["'m'", "is a decimal", "float64"]);
    assert!(!output.exists());
}

#[test]
fn half_floats_and_clock_bounds_past_midnight_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let typed = dir.path().join("typed.parquet");
    let halves = Float16Array::from_iter_values((0..100).map(ArrowNativeType::usize_as));
    let clock = Time32SecondArray::from_iter_values((0..100).map(|i| 3600 * (i % 24)));
    write_parquet(&typed, vec![("h", Arc::new(halves) as ArrayRef), ("t", Arc::new(clock) as ArrayRef)], 100);
    let output = dir.path().join("out.parquet");
    let args = |bounds: &'static str| {
        vec!["synth", path_str(&typed), "--output", path_str(&output), "--epsilon", "1", "--bounds", bounds]
    };
    assert_refused(&args("h=0:100"), &["'h'", "half-precision", "float32"]);
    assert_refused(&args("t=0:90000"), &["'t'", "exceed the range of type Time32(s) (0:86399)"]);
    assert!(!output.exists());
}

#[test]
fn a_file_truncated_while_open_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shrinking.parquet");
    write_parquet(&path, vec![("a", floats((0..200_000).map(|i| i as f64)))], 50_000);
    let source = dpsynth::io::source::Source::open(&path).unwrap();
    let columns = source.numeric_columns(&["a".to_string()]).unwrap();
    // Another process truncates the file after its footer was read (a memory map died with SIGBUS).
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();
    let error = source
        .row_group_reader(3, &columns)
        .and_then(|reader| {
            reader.collect::<Result<Vec<_>, _>>().map_err(|error| dpsynth::error::Error::bad_input(error.to_string()))
        })
        .expect_err("reading a truncated file fails");
    assert!(error.to_string().contains("changed while being read"), "{error}");
}

#[test]
fn pages_with_checksums_are_verified() {
    let dir = tempfile::tempdir().unwrap();
    // Written by pyarrow with write_page_checksum=True: a = 0, 1, …, 999 as float64, one page.
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/parquet/page-checksums.parquet");
    let output = dir.path().join("out.parquet");
    let diagnostics = dir.path().join("diagnostics.json");
    let mut args = synth_args(&good, &output, &["--diagnostics", path_str(&diagnostics)]);
    args[7] = "a=0:1000";
    let result = dpsynth(&args);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    let facts: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&diagnostics).unwrap()).unwrap();
    assert_eq!(facts["input_page_checksums"], true);

    // One byte of the values flipped: the checksum catches what would otherwise be a wrong value.
    let mut bytes = std::fs::read(&good).unwrap();
    let value_500 = 500f64.to_le_bytes();
    let at = bytes.windows(8).position(|window| window == value_500).unwrap();
    bytes[at + 6] ^= 0x01;
    let corrupt = dir.path().join("corrupt.parquet");
    std::fs::write(&corrupt, bytes).unwrap();
    let mut args = synth_args(&corrupt, &output, &[]);
    args[7] = "a=0:1000";
    assert_refused(&args, &["corrupt.parquet", "CRC checksum mismatch"]);

    let result = dpsynth(&["inspect", path_str(&good)]);
    assert!(String::from_utf8_lossy(&result.stdout).contains("page checksums: yes"));
    let plain = table(dir.path());
    let result = dpsynth(&["inspect", path_str(&plain)]);
    assert!(String::from_utf8_lossy(&result.stdout).contains("page checksums: none"));
}
