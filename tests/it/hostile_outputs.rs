//! Hostile input, second audit: special files at output paths, outputs that land on inputs, the stream's
//! state beside its releases, two runs on one state, resource limits, and limits on what a command may be
//! asked to do. Each test failed before its fix.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};

use crate::common::*;

/// A 1000-row table with a float column `a` in [0, 1] and an integer column `b` in [0, 50).
fn table(path: &Path) -> PathBuf {
    let mut fixture = Fixture::new(73);
    write_parquet(
        path,
        vec![
            ("a", floats((0..1000).map(|_| fixture.unit()))),
            ("b", Arc::new(Int64Array::from_iter_values((0..1000).map(|i| i % 50))) as ArrayRef),
        ],
        250,
    );
    path.to_path_buf()
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The words of a command line, from its parts.
fn words<'a>(parts: &[&[&'a str]]) -> Vec<&'a str> {
    parts.concat()
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(made.success());
}

#[cfg(unix)]
fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).unwrap().file_type().is_fifo()
}

/// No temporary file (`.NAME.dpsynth-PID.tmp`) is left in `dir`.
fn assert_no_temporaries(dir: &Path) {
    let left: Vec<_> = files_in(dir).into_iter().filter(|path| path.to_string_lossy().ends_with(".tmp")).collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_device_at_an_output_path_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(&dir.path().join("in.parquet"));
    let fifo = dir.path().join("out.parquet");
    mkfifo(&fifo);
    let bounds = ["--epsilon", "1", "--bounds", "a=0:1", "--columns", "a", "--quiet"];
    let synth = ["synth", text(&input)];
    assert_refused(&words(&[&synth, &bounds, &["--output", text(&fifo)]]), &["out.parquet", "not a regular file"]);
    assert!(is_fifo(&fifo), "the FIFO is still a FIFO");
    // A link to a device: were it followed by the rename's replacement, the link (never the device) would
    // go, so this test cannot harm the machine even if the check breaks.
    let device = dir.path().join("report.json");
    std::os::unix::fs::symlink("/dev/null", &device).unwrap();
    let table_out = dir.path().join("synth.parquet");
    let outputs = ["--output", text(&table_out), "--report", text(&device)];
    assert_refused(&words(&[&synth, &bounds, &outputs]), &["not a regular file"]);
    assert!(std::fs::symlink_metadata(&device).unwrap().file_type().is_symlink());
    assert!(!table_out.exists(), "nothing is written when an output is refused");
    let eval_json = dir.path().join("eval.json");
    mkfifo(&eval_json);
    let eval = ["eval", "--real", text(&input), "--synth", text(&input), "--bounds", "a=0:1", "--quiet"];
    let json = ["--subsample-repeats", "0", "--json", text(&eval_json)];
    assert_refused(&words(&[&eval, &json]), &["not a regular file"]);
    assert!(is_fifo(&eval_json));
}

#[test]
fn eval_marginals_checks_its_outputs_threads_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let real = table(&dir.path().join("real.parquet"));
    let synth = table(&dir.path().join("synth.parquet"));
    let before = std::fs::read(&real).unwrap();
    let base = ["eval", "--marginals", "--columns", "a", "--bins", "a=4", "--bounds", "a=0:1", "--quiet"];
    let tables = ["--real", text(&real), "--synth", text(&synth)];
    let marginals = |extra: &[&'static str]| words(&[&base, &tables, extra]);
    assert_refused(&words(&[&base, &tables, &["--json", text(&real)]]), &["--json would overwrite the input --real"]);
    assert_refused(&words(&[&base, &tables, &["--json", text(&synth)]]), &["--json would overwrite the input --synth"]);
    assert_eq!(std::fs::read(&real).unwrap(), before, "the input is intact");
    assert_refused(&marginals(&["--threads", "0"]), &["--threads must be at least 1"]);
    assert_refused(&marginals(&["--threads", "100000"]), &["--threads 100000 is above the limit"]);
    let pages = dir.path().join("pages");
    assert_refused(&words(&[&base, &tables, &["--report-dir", text(&pages)]]), &["--report-dir", "--marginals"]);
    assert_refused(&words(&[&base, &tables, &["--pairs", "all"]]), &["--pairs", "--marginals"]);
    assert!(!pages.exists());
    let json = dir.path().join("errors.json");
    let result = dpsynth(&words(&[&base, &tables, &["--json", text(&json)]]));
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    assert!(std::fs::read_to_string(&json).unwrap().contains("marginals"));
}

#[test]
fn eval_refuses_subsample_repeats_it_could_never_finish() {
    let dir = tempfile::tempdir().unwrap();
    let real = table(&dir.path().join("real.parquet"));
    let args = ["eval", "--real", text(&real), "--synth", text(&real), "--bounds", "a=0:1", "--quiet"];
    assert_refused(&words(&[&args, &["--subsample-repeats", "1000000000"]]), &["--subsample-repeats must be at most"]);
}

#[test]
fn an_output_that_a_glob_input_would_match_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let parts = dir.path().join("ds");
    std::fs::create_dir(&parts).unwrap();
    table(&parts.join("a.parquet"));
    let pattern = format!("{}/*.parquet", parts.display());
    let output = parts.join("b.parquet");
    let args = [
        "synth",
        &pattern,
        "--output",
        text(&output),
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--columns",
        "a",
        "--quiet",
    ];
    assert_refused(&args, &["b.parquet", "would overwrite the input"]);
    assert!(!output.exists());
    // Elsewhere the same glob runs.
    let elsewhere = dir.path().join("b.parquet");
    let result = dpsynth(&[
        "synth",
        &pattern,
        "--output",
        text(&elsewhere),
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--columns",
        "a",
        "--quiet",
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
}

#[cfg(unix)]
#[test]
fn a_fifo_named_as_the_input_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("in.parquet");
    mkfifo(&fifo);
    assert_refused(&["inspect", text(&fifo)], &["in.parquet", "not a regular file"]);
}

#[test]
fn generate_refuses_what_it_could_not_hold_and_replaces_nothing_when_an_output_fails() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("g.parquet");
    let base = ["generate", text(&output), "--rows", "10"];
    let generate = |extra: &[&'static str]| words(&[&base, extra]);
    assert_refused(
        &generate(&["--dims", "2", "--law", "latent-class:1000000000000"]),
        &["latent-class", "fewer classes"],
    );
    assert_refused(&generate(&["--dims", "100000000"]), &["dims must be at most"]);
    assert_refused(&generate(&["--dims", "1000"]), &["lower --row-group-rows"]);
    assert!(!output.exists());
    std::fs::write(&output, b"the old table").unwrap();
    let schema = dir.path().join("no-such-folder").join("g.toml");
    let result = dpsynth(&words(&[&base, &["--dims", "2", "--schema", text(&schema), "--force"]]));
    assert_eq!(result.status.code(), Some(2), "{}", stderr(&result));
    assert_eq!(std::fs::read(&output).unwrap(), b"the old table", "the table is kept when the schema fails");
    assert_no_temporaries(dir.path());
}

/// `ulimit -f`: a write past the limit fails with EFBIG instead of killing the process, which then exits 2
/// and removes its temporary files.
#[cfg(unix)]
#[test]
fn a_file_size_limit_is_an_error_with_nothing_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(&dir.path().join("in.parquet"));
    let output = dir.path().join("big.parquet");
    let binary = env!("CARGO_BIN_EXE_dpsynth");
    let limited = |args: &[&str]| {
        Command::new("bash")
            .arg("-c")
            .arg("ulimit -f 64 && exec \"$0\" \"$@\"")
            .arg(binary)
            .args(args)
            .output()
            .expect("bash runs")
    };
    let synth = [
        "synth",
        text(&input),
        "--output",
        text(&output),
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--columns",
        "a",
        "--quiet",
    ];
    let result = limited(&words(&[&synth, &["--rows", "2000000", "--seed", "1"]]));
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{message}");
    assert!(message.contains("big.parquet"), "{message}");
    assert!(!output.exists());
    let generated = dir.path().join("generated.parquet");
    let result = limited(&["generate", text(&generated), "--rows", "1000000", "--dims", "2"]);
    assert_eq!(result.status.code(), Some(2), "{}", stderr(&result));
    assert!(!generated.exists());
    assert_no_temporaries(dir.path());
}

/// Runs dpsynth with `args` under an address-space limit of `kib` KiB (`ulimit -v`), asking for
/// backtraces: an abort would print one.
#[cfg(unix)]
fn with_address_space_limit(kib: u32, args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_dpsynth"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("bash runs")
}

/// An allocation the system refuses is the environment's limit: exit 2 with what can help, and the run's
/// temporary files removed; before, Rust aborted (exit 134) with a backtrace and left them.
#[cfg(target_os = "linux")]
#[test]
fn an_allocation_failure_is_a_clear_error_with_nothing_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let assert_out_of_memory = |result: &std::process::Output| {
        let message = stderr(result);
        assert_eq!(result.status.code(), Some(2), "{message}");
        assert!(message.contains("dpsynth: out of memory: an allocation of ") && message.contains(" bytes failed"));
        assert!(message.contains("temporary files were removed") && message.contains("--threads"), "{message}");
        assert!(message.contains("ulimit -v"), "{message}");
        for abort in ["panicked", "backtrace", "memory allocation of", "internal error"] {
            assert!(!message.contains(abort), "'{abort}' in: {message}");
        }
    };
    // generate creates its temporary file, then draws a row group of 2^24 rows × 4 columns (512 MiB) that
    // 200 MB cannot hold: the failure comes at once, with the temporary on disk.
    let generated = dir.path().join("generated.parquet");
    let generate = ["generate", text(&generated), "--rows", "20000000", "--dims", "4", "--row-group-rows", "16777216"];
    assert_out_of_memory(&with_address_space_limit(200_000, &generate));
    assert!(!generated.exists());
    assert_no_temporaries(dir.path());
    // synth of 4 columns on one worker: its start needs about 35 MB, and writing 4·10^6 rows about 120 MB,
    // so the failure comes while the table's temporary file is being written.
    let (input, schema) = (dir.path().join("in.parquet"), dir.path().join("in.toml"));
    let made = dpsynth(&["generate", text(&input), "--rows", "1000", "--dims", "4", "--schema", text(&schema)]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let output = dir.path().join("out.parquet");
    let synth = ["synth", text(&input), "--config", text(&schema), "--output", text(&output), "--epsilon", "1"];
    let limited = ["--rows", "4000000", "--threads", "1", "--device", "cpu", "--seed", "1", "--quiet"];
    assert_out_of_memory(&with_address_space_limit(60_000, &words(&[&synth, &limited])));
    assert!(!output.exists());
    assert_no_temporaries(dir.path());
}

#[test]
fn a_depth_past_the_deepest_tree_is_refused_in_its_own_words() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(&dir.path().join("in.parquet"));
    let output = dir.path().join("out.parquet");
    let args = [
        "synth",
        text(&input),
        "--output",
        text(&output),
        "--epsilon",
        "1",
        "--bounds",
        "a=0:1",
        "--columns",
        "a",
        "--quiet",
    ];
    let refused = dpsynth(&words(&[&args, &["--mechanism", "pmm", "--depth", "4000000000"]]));
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(message.contains("at most 30 levels"), "{message}");
    assert!(!message.contains("bytes"), "no overflowed memory figure: {message}");
}

/// Worker threads the OS will not start (here: too little address space for their stacks) are the
/// environment's limit: exit 2 with what to change, not an internal error.
#[cfg(unix)]
#[test]
fn threads_the_system_refuses_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(&dir.path().join("in.parquet"));
    let output = dir.path().join("out.parquet");
    let result = Command::new("bash")
        .arg("-c")
        .arg("ulimit -v 100000 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_dpsynth"))
        .args([
            "synth",
            text(&input),
            "--output",
            text(&output),
            "--epsilon",
            "1",
            "--bounds",
            "a=0:1",
            "--columns",
            "a",
        ])
        .args(["--threads", "64", "--quiet"])
        .output()
        .expect("bash runs");
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{message}");
    assert!(message.contains("worker threads") && message.contains("--threads"), "{message}");
    assert!(!output.exists());
}

fn stream_args<'a>(input: &'a str, state: &'a str, output_dir: &'a str) -> Vec<&'a str> {
    let release = ["--epsilon", "1", "--bounds", "a=0:1", "--bounds", "b=0:50", "--release-at-end", "--quiet"];
    words(&[&["stream", input, "--state", state, "--output-dir", output_dir], &release])
}

#[test]
fn the_stream_keeps_its_inputs_and_state_apart_from_its_releases() {
    let dir = tempfile::tempdir().unwrap();
    let releases = dir.path().join("rel");
    std::fs::create_dir(&releases).unwrap();
    // An input inside the release folder, named as the release this run would write.
    let inside = table(&releases.join("release-1000.parquet"));
    let before = std::fs::read(&inside).unwrap();
    let state = dir.path().join("s.state");
    assert_refused(&stream_args(text(&inside), text(&state), text(&releases)), &["an input is inside --output-dir"]);
    assert_eq!(std::fs::read(&inside).unwrap(), before, "the input is intact");
    let input = table(&dir.path().join("day.parquet"));
    // A state inside the published folder, named like the release's report or not.
    for name in ["release-1000.json", "s.state"] {
        let state = releases.join(name);
        assert_refused(&stream_args(text(&input), text(&state), text(&releases)), &["--state is inside --output-dir"]);
        assert!(!state.exists());
    }
    // Named as a kind that is published, anywhere.
    let json_state = dir.path().join("state.json");
    assert_refused(
        &stream_args(text(&input), text(&json_state), text(&releases)),
        &["--state names a .parquet or .json"],
    );
    let result = dpsynth(&stream_args(text(&input), text(&state), text(&releases)));
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    assert!(releases.join("release-1000.parquet").exists() && releases.join("release-1000.json").exists());
}

#[test]
fn a_second_run_on_a_state_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(&dir.path().join("day.parquet"));
    let state = dir.path().join("s.state");
    let releases = dir.path().join("rel");
    // This test holds the lock as a running stream would.
    let lock = std::fs::File::create(dir.path().join(".s.state.lock")).unwrap();
    lock.lock().unwrap();
    assert_refused(
        &stream_args(text(&input), text(&state), text(&releases)),
        &["another dpsynth stream run is using this state"],
    );
    assert!(!state.exists() && !releases.exists(), "nothing is written");
    drop(lock);
    let result = dpsynth(&stream_args(text(&input), text(&state), text(&releases)));
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
}
