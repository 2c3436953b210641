//! Fuzzing on stable Rust (issue 13): proptest drives hostile inputs through the library and the binary.
//!
//! Targets: the Parquet reader (arbitrary bytes, and mutations of the valid files in tests/corpus/parquet),
//! config files (random keys and values of every TOML type, seeded by tests/corpus/config), and option
//! combinations of synth / eval / generate / inspect. The oracle: success with a readable, finite output,
//! or bad input (exit 2) with a message; never a panic, another exit code, a non-finite value in a
//! release, or a changed input file. Seeds are fixed, so runs are reproducible; `PROPTEST_CASES` raises
//! the case count of every target (the defaults keep the whole harness to seconds). A failure is shrunk by
//! proptest to a small input: add it to tests/corpus so it stays tested.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int32Array};
use dpsynth::error::Error;
use dpsynth::io::source::Source;
use dpsynth::options::SynthOptions;
use dpsynth::progress::Progress;
use dpsynth::synth::{synthesize, OutputPaths};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use crate::common::*;

fn corpus(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus").join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    files
}

/// A deterministic runner of `default_cases` cases (or `PROPTEST_CASES`), seeded per target.
fn runner(target: u8, default_cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(default_cases);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[target; 32]))
}

/// Runs a target and reports how many inputs it executed (`--nocapture` shows it, for the figures).
fn fuzz<S: Strategy>(
    name: &str,
    mut runner: TestRunner,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let started = Instant::now();
    let executed = std::sync::atomic::AtomicUsize::new(0);
    let result = runner.run(&strategy, |input| {
        executed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        test(input)
    });
    eprintln!("fuzz {name}: {} inputs in {:.1}s", executed.into_inner(), started.elapsed().as_secs_f64());
    if let Err(failure) = result {
        panic!("fuzz {name}: {failure}");
    }
}

/// Library errors must be the user's (bad input, or a request the guarantee refuses), never internal or a panic.
fn check_library<T>(what: &str, run: impl FnOnce() -> dpsynth::error::Result<T>) -> Result<Option<T>, TestCaseError> {
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(value)) => Ok(Some(value)),
        Ok(Err(Error::BadInput(message) | Error::Privacy(message))) if !message.is_empty() => Ok(None),
        Ok(Err(error)) => Err(TestCaseError::fail(format!("{what}: not a bad-input error: {error}"))),
        Err(_) => Err(TestCaseError::fail(format!("{what}: panicked"))),
    }
}

/// Opens and fully decodes every numeric column of `path`, and describes it as `inspect` does.
fn read_everything(path: &Path) -> Result<(), TestCaseError> {
    check_library("inspect", || dpsynth::inspect::describe(path, false))?;
    check_library("read", || {
        let source = Source::open(path)?;
        let names: Vec<String> = source
            .schema()
            .fields()
            .iter()
            .filter(|field| dpsynth::io::source::is_numeric(field.data_type()))
            .map(|field| field.name().clone())
            .collect();
        let columns = source.numeric_columns(&names)?;
        for group in 0..source.row_group_count() {
            for batch in source.row_group_reader(group, &columns)? {
                batch.map_err(|error| Error::in_file(path, error))?;
            }
        }
        source.has_page_checksums();
        Ok(())
    })?;
    Ok(())
}

/// A release's values are finite, and inside their bounds for the columns `bounds` names.
fn check_release(output: &Path, bounds: &[(&str, f64, f64)]) -> Result<(), TestCaseError> {
    let (fields, columns) = read_parquet(output);
    for ((name, _), column) in fields.iter().zip(&columns) {
        let (lo, hi) =
            bounds.iter().find(|(bounded, _, _)| bounded == name).map_or((f64::MIN, f64::MAX), |&(_, lo, hi)| (lo, hi));
        if let Some(bad) = column.iter().find(|value| !(value.is_finite() && lo <= **value && **value <= hi)) {
            return Err(TestCaseError::fail(format!("column '{name}': released value {bad} outside {lo}:{hi}")));
        }
    }
    Ok(())
}

/// One byte-level edit of a file.
#[derive(Clone, Debug)]
enum Mutation {
    Flip { at: usize, mask: u8 },
    Truncate { at: usize },
    Extend { bytes: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 1..=255u8).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        1 => prop::collection::vec(any::<u8>(), 1..64).prop_map(|bytes| Mutation::Extend { bytes }),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        match mutation {
            Mutation::Flip { at, mask } if !bytes.is_empty() => {
                let at = at % bytes.len();
                bytes[at] ^= mask;
            }
            Mutation::Truncate { at } => bytes.truncate(at % (bytes.len() + 1)),
            Mutation::Extend { bytes: more } => bytes.extend_from_slice(more),
            Mutation::Flip { .. } => {}
        }
    }
    bytes
}

#[test]
fn parquet_reader_on_arbitrary_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fuzz.parquet");
    // Most arbitrary bytes fail at the magic number: half the inputs get "PAR1" at both ends.
    let strategy = (prop::collection::vec(any::<u8>(), 0..2048), any::<bool>());
    fuzz("parquet-bytes", runner(1, 512), strategy, |(mut bytes, framed)| {
        if framed {
            bytes.splice(0..0, *b"PAR1");
            bytes.extend_from_slice(b"PAR1");
        }
        std::fs::write(&path, &bytes).unwrap();
        read_everything(&path)
    });
}

#[test]
fn parquet_reader_and_synth_on_mutated_files() {
    let dir = tempfile::tempdir().unwrap();
    let seeds: Vec<Vec<u8>> = corpus("parquet").iter().map(|path| std::fs::read(path).unwrap()).collect();
    let input = dir.path().join("mutated.parquet");
    let output = dir.path().join("out.parquet");
    let strategy = (0..seeds.len(), prop::collection::vec(mutation(), 1..4));
    fuzz("parquet-mutated", runner(2, 384), strategy, |(seed, mutations)| {
        let bytes = mutate(seeds[seed].clone(), &mutations);
        std::fs::write(&input, &bytes).unwrap();
        read_everything(&input)?;
        // The corpus files all have a float64 column `a` in [0, 1000].
        let bounds = vec![dpsynth::geometry::bounds::ColumnBounds::new("a", 0.0, 1000.0).unwrap()];
        let mut options = SynthOptions::new(1.0, bounds);
        options.threads = Some(1);
        options.memory_limit = Some(64 << 20);
        let outputs = OutputPaths { table: output.clone(), report: None, diagnostics: None };
        let _ = std::fs::remove_file(&output);
        let done = check_library("synth", || synthesize(&input, &outputs, &options, &Progress::hidden()))?;
        if std::fs::read(&input).unwrap() != bytes {
            return Err(TestCaseError::fail("synth changed its input"));
        }
        match done {
            Some(_) => check_release(&output, &[("a", 0.0, 1000.0)]),
            None if output.exists() => Err(TestCaseError::fail("a failed run left its output")),
            None => Ok(()),
        }
    });
}

/// The stream's state reader on mutated states: a state of a real stream (made by the binary), with a few
/// bytes flipped, cut or added, either reads back or is refused as bad input; it never panics, and a
/// corrupt length never makes it allocate more than the file could hold (an abort ends the test binary).
#[test]
fn stream_state_reader_on_mutated_states() {
    use dpsynth::mechanism::online::state::OnlineState;
    let dir = tempfile::tempdir().unwrap();
    let table = small_table(dir.path());
    let state = dir.path().join("made.state");
    let releases = dir.path().join("releases");
    let made = dpsynth(&[
        "stream",
        table.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--bounds",
        "b=0:10",
        "--output-dir",
        releases.to_str().unwrap(),
        "--release-at-end",
        "--quiet",
    ]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let valid = std::fs::read(&state).unwrap();
    assert!(check_library("state", || OnlineState::load(&state)).unwrap().is_some());
    let mutated = dir.path().join("mutated.state");
    fuzz("stream-state", runner(6, 384), prop::collection::vec(mutation(), 1..4), |mutations| {
        std::fs::write(&mutated, mutate(valid.clone(), &mutations)).unwrap();
        check_library("state", || OnlineState::load(&mutated)).map(|_| ())
    });
}

/// A small table for the binary targets: float `a` in [0, 1], integer `b` in [0, 10).
fn small_table(dir: &Path) -> PathBuf {
    let path = dir.join("real.parquet");
    let mut fixture = Fixture::new(7);
    write_parquet(
        &path,
        vec![
            ("a", floats((0..200).map(|_| fixture.unit()))),
            ("b", Arc::new(Int32Array::from_iter_values((0..200).map(|i| i % 10))) as ArrayRef),
        ],
        100,
    );
    path
}

/// Runs the binary; exit 0 must come with readable finite outputs, anything else must be exit 2 with a
/// message; no file in `inputs` may change.
fn check_binary(
    args: &[String],
    inputs: &[&Path],
    outputs: &[(&Path, &[(&str, f64, f64)])],
) -> Result<(), TestCaseError> {
    let before: Vec<Vec<u8>> = inputs.iter().map(|path| std::fs::read(path).unwrap()).collect();
    let result = dpsynth(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let message = stderr(&result);
    for (path, old) in inputs.iter().zip(before) {
        if std::fs::read(path).ok() != Some(old) {
            return Err(TestCaseError::fail(format!("{args:?} changed the input {}", path.display())));
        }
    }
    match result.status.code() {
        Some(0) => {
            for (output, bounds) in outputs {
                if output.exists() {
                    check_release(output, bounds)?;
                }
            }
            Ok(())
        }
        Some(2) if message.contains("error") && !message.contains("panicked") => Ok(()),
        code => Err(TestCaseError::fail(format!("{args:?}: exit {code:?}: {message}"))),
    }
}

/// A TOML value of any type, biased towards ones an option could take.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "1",
            "-1",
            "2",
            "64",
            "1e-300",
            "1e300",
            "0.5",
            "nan",
            "inf",
            "18446744073709551615",
            "9223372036854775807",
            "100",
            "true",
            "false",
            "\"\"",
            "\"pmm\"",
            "\"psmm\"",
            "\"lowdim\"",
            "\"replace\"",
            "\"add-remove\"",
            "\"drop\"",
            "\"auto\"",
            "[\"a\"]",
            "[\"a\", \"b\"]",
            "[1, 2]",
            "{ a = [0, 1] }",
            "{ a = [1, 0] }",
            "{ a = [\"x\", 1] }",
            "{ b = [0, 1e308] }",
            "1979-05-27",
        ])
        .prop_map(str::to_string),
        any::<i64>().prop_map(|number| number.to_string()),
        "[a-z\\-]{0,8}".prop_map(|text| format!("\"{text}\"")),
    ]
}

#[test]
fn config_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_table(dir.path());
    let output = dir.path().join("out.parquet");
    let config = dir.path().join("run.toml");
    let seeds: Vec<String> = corpus("config").iter().map(|path| std::fs::read_to_string(path).unwrap()).collect();
    let keys = prop::sample::select(vec![
        "epsilon",
        "bounds",
        "columns",
        "mechanism",
        "neighbours",
        "rows",
        "threads",
        "memory-limit",
        "memory-limit-mib",
        "depth",
        "cells",
        "seed",
        "quiet",
        "nulls",
        "root-share",
        "target-dim",
        "placement",
        "consistency",
        "marginal-share",
        "partition",
        "config",
        "no-such-key",
        "",
    ]);
    let strategy = (0..seeds.len(), prop::collection::vec((keys, toml_value()), 0..5), any::<bool>());
    fuzz("config", runner(3, 48), strategy, |(seed, pairs, as_eval)| {
        let mut text = seeds[seed].clone();
        for (key, value) in &pairs {
            // A [bounds] table in the seed must stay last for top-level keys to stay top-level.
            text.insert_str(0, &format!("{key} = {value}\n"));
        }
        std::fs::write(&config, &text).unwrap();
        let _ = std::fs::remove_file(&output);
        let config_text = config.to_str().unwrap().to_string();
        let args: Vec<String> = if as_eval {
            [
                "eval",
                "--real",
                input.to_str().unwrap(),
                "--synth",
                input.to_str().unwrap(),
                "--config",
                config_text.as_str(),
                "--subsample-repeats",
                "0",
            ]
            .map(str::to_string)
            .to_vec()
        } else {
            [
                "synth",
                input.to_str().unwrap(),
                "--output",
                output.to_str().unwrap(),
                "--config",
                config_text.as_str(),
                "--seed",
                "1",
            ]
            .map(str::to_string)
            .to_vec()
        };
        check_binary(&args, &[&input, &config], &[(&output, &[])])
    });
}

#[test]
fn option_combinations() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_table(dir.path());
    let output = dir.path().join("out.parquet");
    let report = dir.path().join("report.json");
    let generated = dir.path().join("generated.parquet");
    let synth_options = prop::sample::subsequence(
        vec![
            vec!["--epsilon", "1"],
            vec!["--epsilon", "1e-300"],
            vec!["--epsilon", "1e300"],
            vec!["--bounds", "a=0:1"],
            vec!["--bounds", "b=0:10"],
            vec!["--bounds", "b=-1e308:1e308"],
            vec!["--bounds", "a=1:0"],
            vec!["--columns", "b"],
            vec!["--mechanism", "psmm"],
            vec!["--mechanism", "lowdim"],
            vec!["--neighbours", "replace"],
            vec!["--noisy-n-share", "0.1"],
            vec!["--depth", "3"],
            vec!["--depth", "31"],
            vec!["--cells", "64"],
            vec!["--rows", "0"],
            vec!["--rows", "1000000000000000"],
            vec!["--threads", "2"],
            vec!["--threads", "100000"],
            vec!["--memory-limit-mib", "1"],
            vec!["--memory-limit-mib", "18446744073709551615"],
            vec!["--nulls", "drop"],
            vec!["--placement", "centre"],
            vec!["--consistency", "proportional"],
            vec!["--report", "REPORT"],
            vec!["--diagnostics", "REPORT"],
            vec!["--seed", "3"],
            vec!["--output", "INPUT"],
        ],
        0..8,
    );
    let command = prop_oneof![
        synth_options.prop_map(|options| {
            let mut args = vec!["synth", "INPUT", "--output", "OUTPUT", "--quiet"];
            args.extend(options.into_iter().flatten());
            args
        }),
        prop::sample::subsequence(
            vec![
                vec!["--bounds", "a=0:1"],
                vec!["--bounds", "b=0:10"],
                vec!["--json", "REPORT"],
                vec!["--json", "INPUT"],
                vec!["--grid-side", "1"],
                vec!["--grid-side", "0"],
                vec!["--subsample-rows", "100000"],
                vec!["--subsample-repeats", "0"],
                vec!["--threads", "0"],
                vec!["--run-report", "INPUT"],
            ],
            0..5,
        )
        .prop_map(|options| {
            let mut args = vec!["eval", "--real", "INPUT", "--synth", "INPUT", "--quiet"];
            args.extend(options.into_iter().flatten());
            args
        }),
        (
            prop::sample::select(vec!["0", "1", "100", "1000000000000000"]),
            prop::sample::select(vec!["0", "1", "3"]),
            prop::sample::select(vec!["uniform", "mixture", "subspace:1", "subspace:9", "nope"]),
            any::<bool>(),
        )
            .prop_map(|(rows, dims, law, force)| {
                let mut args = vec!["generate", "GENERATED", "--rows", rows, "--dims", dims, "--law", law];
                if force {
                    args.push("--force");
                }
                args
            }),
        prop::sample::select(vec!["INPUT", "REPORT", "GENERATED"]).prop_map(|path| vec!["inspect", path]),
    ];
    fuzz("options", runner(4, 96), command, |args| {
        let _ = std::fs::remove_file(&output);
        let args: Vec<String> = args
            .iter()
            .map(|arg| match *arg {
                "INPUT" => input.to_str().unwrap().to_string(),
                "OUTPUT" => output.to_str().unwrap().to_string(),
                "REPORT" => report.to_str().unwrap().to_string(),
                "GENERATED" => generated.to_str().unwrap().to_string(),
                other => other.to_string(),
            })
            .collect();
        // Bounds of the released columns in file order (a, then b), as the options give them.
        check_binary(&args, &[&input], &[(&output, &[("a", 0.0, 1.0), ("b", 0.0, 10.0)])])
    });
}

/// The inputs fuzzing found, minimised, kept as regression cases: each is bad input, never a crash.
/// `nulls-zstd-v2-flipped-byte.parquet` (one byte of a definition-level run flipped) made arrow assert
/// "offset + len out of bounds" inside the page decoder.
#[test]
fn minimised_failures_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.parquet");
    for input in corpus("failures") {
        read_everything(&input).unwrap();
        let args: Vec<String> = [
            "synth",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--epsilon",
            "1",
            "--bounds",
            "a=0:1000",
            "--nulls",
            "drop",
            "--quiet",
        ]
        .map(str::to_string)
        .to_vec();
        check_binary(&args, &[&input], &[(&output, &[("a", 0.0, 1000.0)])]).unwrap();
        let result = dpsynth(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(stderr(&result).contains("cannot be decoded"), "{}: {}", input.display(), stderr(&result));
    }
}
