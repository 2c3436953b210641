//! Seeded runs of every mechanism, byte for byte: the synthetic table's bytes (as a hash), the publishable
//! report and the first line of the terminal summary must equal what is recorded in `tests/snapshots/`.
//! A refactor must leave them alone; a change that is meant to alter outputs (a new sampler, a new
//! default) re-records them with `DPSYNTH_BLESS=1 cargo test --release seeded_runs` and says why in its
//! commit.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The runs: a name and the `synth` arguments after the input (every run adds `--seed`, `--threads` and
/// its output paths, a fixed memory limit (the depth cap would follow the machine) and `--epsilon 1`
/// unless it gives its own or is microagg, which is not DP and refuses ε).
const RUNS: &[(&str, &[&str])] = &[
    // At d = 3 and ε·n̂ ≈ 3000 auto runs plain PMM (its small-table switch); at ε = 4 the calibrated tree.
    ("default_auto", &[]),
    ("default_auto_calibrated", &["--epsilon", "4"]),
    ("pmm_add_remove", &["--mechanism", "pmm"]),
    // Cell order: the table written before rows came in random order, byte for byte.
    ("pmm_add_remove_cells_order", &["--mechanism", "pmm", "--row-order", "cells"]),
    (
        "pmm_replace_proportional_centre",
        &["--mechanism", "pmm", "--neighbours", "replace", "--consistency", "proportional", "--placement", "centre"],
    ),
    ("pmm_depth_rows", &["--mechanism", "pmm", "--depth", "9", "--rows", "1000"]),
    ("pmm_one_column", &["--mechanism", "pmm", "--columns", "x0"]),
    ("psmm_add_remove", &["--mechanism", "psmm"]),
    ("psmm_replace_cells", &["--mechanism", "psmm", "--neighbours", "replace", "--cells", "512"]),
    ("lowdim_replace", &["--mechanism", "lowdim", "--neighbours", "replace", "--epsilon", "4"]),
    (
        "lowdim_add_remove_psmm",
        &["--mechanism", "lowdim", "--root-share", "0.1", "--inner-mechanism", "psmm", "--target-dim", "2"],
    ),
    (
        "covloss_replace_bins",
        &[
            "--mechanism",
            "covloss",
            "--neighbours",
            "replace",
            "--damping",
            "cells",
            "--bins",
            "x0=4",
            "--bins",
            "x1=3",
            "--bins",
            "x2=5",
        ],
    ),
    ("microagg_bins", &["--mechanism", "microagg", "--k", "10", "--bins", "x0=4", "--bins", "x1=3", "--bins", "x2=2"]),
];

fn snapshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// FNV-1a, 64 bits: a stable hash with no dependency (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

fn dpsynth(dir: &Path, args: &[&str]) -> std::process::Output {
    let output =
        Command::new(env!("CARGO_BIN_EXE_dpsynth")).current_dir(dir).args(args).output().expect("the binary runs");
    assert_eq!(output.status.code(), Some(0), "dpsynth {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

/// A report without its `device` line, which names the machine's binner (the CPU's Morton method: pdep where it
/// is fast, lookups elsewhere), not anything the seed decides.
fn without_device(report: &str) -> String {
    report.lines().filter(|line| !line.trim_start().starts_with("\"device\":")).collect::<Vec<_>>().join("\n")
}

#[test]
fn seeded_runs_of_every_mechanism_are_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    dpsynth(
        dir.path(),
        &["generate", "in.parquet", "--rows", "3000", "--dims", "3", "--seed", "11", "--schema", "in.toml"],
    );
    let bless = std::env::var_os("DPSYNTH_BLESS").is_some();
    let mut tables = String::new();
    let mut mismatches = Vec::new();
    for (name, extra) in RUNS {
        let (table, report) = (format!("{name}.parquet"), format!("{name}.json"));
        let mut args = vec![
            "synth",
            "in.parquet",
            "--config",
            "in.toml",
            "--seed",
            "7",
            "--threads",
            "2",
            "--memory-limit-mib",
            "1024",
            "--output",
            &table,
            "--report",
            &report,
        ];
        if !extra.contains(&"--epsilon") && !extra.contains(&"microagg") {
            args.extend(["--epsilon", "1"]);
        }
        args.extend_from_slice(extra);
        let output = dpsynth(dir.path(), &args);
        let summary = String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or_default().to_string();
        let table_hash = fnv1a(&std::fs::read(dir.path().join(&table)).unwrap());
        tables.push_str(&format!("{name} {table_hash:016x} {summary}\n"));
        let report_text = std::fs::read_to_string(dir.path().join(&report)).unwrap();
        let recorded = snapshots().join(format!("{name}.report.json"));
        if bless {
            std::fs::write(&recorded, &report_text).unwrap();
        } else if std::fs::read_to_string(&recorded).ok().map(|text| without_device(&text))
            != Some(without_device(&report_text))
        {
            mismatches.push(format!("{name}: report differs from {}", recorded.display()));
        }
    }
    let recorded = snapshots().join("tables.txt");
    if bless {
        std::fs::write(&recorded, &tables).unwrap();
    } else {
        let expected = std::fs::read_to_string(&recorded).unwrap_or_default();
        for (line, expected) in tables.lines().zip(expected.lines().chain(std::iter::repeat(""))) {
            if line != expected {
                mismatches.push(format!("table or summary differs:\n  now      {line}\n  recorded {expected}"));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// The stream's seeded releases, byte for byte (`tests/snapshots/stream.txt`, re-recorded as above):
/// its counters draw from per-cell noise streams reopened at saved word positions, and a faster reader of
/// those streams must read the same words. d = 1 replays history into new cells; d = 2 runs at ε = 4, a
/// deeper tree.
#[test]
fn seeded_stream_releases_are_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    dpsynth(
        dir.path(),
        &["generate", "in.parquet", "--rows", "20000", "--dims", "2", "--seed", "11", "--schema", "in.toml"],
    );
    let bless = std::env::var_os("DPSYNTH_BLESS").is_some();
    let mut hashes = String::new();
    for (name, extra) in [("d1", &["--columns", "x0", "--epsilon", "1"][..]), ("d2", &["--epsilon", "4"][..])] {
        let (state, out) = (format!("{name}.state"), format!("{name}-out"));
        let mut args = vec!["stream", "in.parquet", "--config", "in.toml", "--seed", "7", "--threads", "2"];
        args.extend(["--state", &state, "--output-dir", &out, "--release-at", "1000,12345", "--release-at-end"]);
        args.extend_from_slice(extra);
        dpsynth(dir.path(), &args);
        // The state is left out: it names the input by its absolute path, a temporary directory's here.
        for file in ["1000", "12345", "20000"].map(|t| format!("{out}/release-{t}.parquet")) {
            let hash = fnv1a(&std::fs::read(dir.path().join(&file)).unwrap());
            hashes.push_str(&format!("{file} {hash:016x}\n"));
        }
    }
    let recorded = snapshots().join("stream.txt");
    if bless {
        std::fs::write(&recorded, &hashes).unwrap();
    } else {
        assert_eq!(hashes, std::fs::read_to_string(&recorded).unwrap_or_default(), "seeded stream outputs changed");
    }
}
