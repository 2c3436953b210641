//! End-to-end `synth` time against plain Parquet decode of the same columns, side by side in one run
//! (SPEC §8). Not a criterion bench: one synth of 10^8 rows takes seconds, so each configuration runs
//! a few alternating repetitions and reports medians and their ratios: the tree's binning pass (decode,
//! quantise, histogram; auto's passes for n̂ and the marginals are in the phase split after each row) and the
//! whole run (which also samples and writes the synthetic table).
//!
//! Environment: DPSYNTH_BENCH_ROWS (default 10^7), DPSYNTH_BENCH_DIMS (default "2,3,4"),
//! DPSYNTH_BENCH_COMPRESSION (default "none,zstd"), DPSYNTH_BENCH_MECHANISMS (default "pmm,auto": the
//! textbook tree and the default's settings, each as `synth --mechanism` runs it), DPSYNTH_BENCH_REPS
//! (default 5), DPSYNTH_BENCH_DIR (default target/bench-data), DPSYNTH_BENCH_THREADS (default all cores).
//! Run: `cargo bench --bench end_to_end`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Float64Type;
use dpsynth::generate::{write_table, Compression, GenerateSpec, Law, DEFAULT_ROW_GROUP_ROWS};
use dpsynth::io::source::Source;
use dpsynth::mechanism::MechanismParameters;
use dpsynth::progress::{PhaseTiming, Progress};
use dpsynth::{synthesize, OutputPaths, SynthOptions};
use rayon::prelude::*;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// The baseline: the same reader, projection and row-group parallelism as `synth`, decoding
/// every value and summing it so the decode cannot be optimised away; nothing else.
fn plain_decode(path: &Path, names: &[String]) -> f64 {
    let source = Source::open(path).expect("bench input opens");
    let columns = source.numeric_columns(names).expect("bench columns exist");
    (0..source.row_group_count())
        .into_par_iter()
        .map(|row_group| {
            let mut sum = 0.0;
            for batch in source.row_group_reader(row_group, &columns).expect("reader builds") {
                let batch = batch.expect("batch decodes");
                for column in batch.columns() {
                    sum += column.as_primitive::<Float64Type>().values().iter().sum::<f64>();
                    debug_assert_eq!(column.null_count(), 0);
                }
            }
            sum
        })
        .sum()
}

/// `synth --mechanism MECHANISM` at ε = 1 on the bench's columns (bounds 0:1), seed 7, binning on the CPU, as the
/// command line resolves it: `auto` gets the default's settings for the number of columns.
fn synth_options(mechanism: &str, names: &[String], threads: Option<usize>) -> SynthOptions {
    let flags = ["input", "--mechanism", mechanism, "--epsilon", "1", "--seed", "7", "--device", "cpu"];
    let mut words: Vec<OsString> = flags.map(OsString::from).into();
    for name in names {
        words.extend(["--bounds".into(), format!("{name}=0:1").into()]);
    }
    let mut options = dpsynth::cli::parse_synth(words)
        .and_then(|args| args.resolve_options())
        .unwrap_or_else(|error| panic!("--mechanism {mechanism}: {error}"));
    options.threads = threads;
    options
}

/// Adds one run's `phases` to `split`: each phase's seconds, or each of its parts' as "phase/part".
fn record_phases(split: &mut Vec<(String, Vec<f64>)>, phases: &[PhaseTiming]) {
    for timing in phases {
        let leaves: Vec<(String, f64)> = if timing.parts.is_empty() {
            vec![(timing.phase.to_string(), timing.seconds)]
        } else {
            timing.parts.iter().map(|part| (format!("{}/{}", timing.phase, part.phase), part.seconds)).collect()
        };
        for (name, seconds) in leaves {
            match split.iter_mut().find(|(known, _)| *known == name) {
                Some((_, values)) => values.push(seconds),
                None => split.push((name, vec![seconds])),
            }
        }
    }
}

fn median(mut seconds: Vec<f64>) -> f64 {
    seconds.sort_by(f64::total_cmp);
    seconds[seconds.len() / 2]
}

fn main() {
    let rows: u64 = env_or("DPSYNTH_BENCH_ROWS", "10000000").parse().expect("DPSYNTH_BENCH_ROWS is a number");
    let reps: usize = env_or("DPSYNTH_BENCH_REPS", "5").parse().expect("DPSYNTH_BENCH_REPS is a number");
    let threads: Option<usize> =
        std::env::var("DPSYNTH_BENCH_THREADS").ok().map(|t| t.parse().expect("threads is a number"));
    let dir = PathBuf::from(env_or("DPSYNTH_BENCH_DIR", "target/bench-data"));
    std::fs::create_dir_all(&dir).expect("bench directory");
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads.unwrap_or(0)).build().expect("pool");
    println!(
        "mechanism,rows,dims,compression,decode_s,bin_pass_s,synth_s,bin_pass_over_decode,synth_over_decode,\
         synth_rows_per_s,depth"
    );
    println!("# after each row: the diagnostics' phases and parts (sampling and writing overlap: busy times)");
    for dims in env_or("DPSYNTH_BENCH_DIMS", "2,3,4").split(',') {
        let dims: usize = dims.parse().expect("dims are numbers");
        for compression in env_or("DPSYNTH_BENCH_COMPRESSION", "none,zstd").split(',') {
            let compression: Compression = compression.parse().expect("compression is none, snappy or zstd");
            let input = dir.join(format!("mixture-{rows}-{dims}-{compression:?}.parquet"));
            if !input.exists() {
                let spec = GenerateSpec {
                    rows,
                    dims,
                    law: Law::Mixture,
                    seed: 1,
                    compression,
                    row_group_rows: DEFAULT_ROW_GROUP_ROWS,
                };
                write_table(&input, &spec).expect("bench table is written");
            }
            let names: Vec<String> = (0..dims).map(|axis| format!("x{axis}")).collect();
            for mechanism in env_or("DPSYNTH_BENCH_MECHANISMS", "pmm,auto").split(',') {
                let options = synth_options(mechanism, &names, threads);
                let outputs = OutputPaths { table: dir.join("synth-out.parquet"), report: None, diagnostics: None };
                let (mut decode, mut bin_pass, mut synth, mut depth) = (Vec::new(), Vec::new(), Vec::new(), 0);
                // The diagnostics' phases with their parts, as "phase/part", seconds per repetition.
                let mut split: Vec<(String, Vec<f64>)> = Vec::new();
                for _ in 0..reps {
                    let started = Instant::now();
                    std::hint::black_box(pool.install(|| plain_decode(&input, &names)));
                    decode.push(started.elapsed().as_secs_f64());
                    let started = Instant::now();
                    let outcome = synthesize(&input, &outputs, &options, &Progress::hidden()).expect("synth runs");
                    synth.push(started.elapsed().as_secs_f64());
                    depth = match &outcome.report.parameters {
                        MechanismParameters::Pmm(pmm) => pmm.depth,
                        other => panic!("a PMM run reported {other:?}"),
                    };
                    let phases = &outcome.diagnostics.timings_seconds;
                    record_phases(&mut split, phases);
                    let bin = phases.iter().find(|timing| timing.phase == "bin");
                    bin_pass.push(bin.map_or(f64::NAN, |timing| timing.seconds));
                }
                let (decode, bin_pass, synth) = (median(decode), median(bin_pass), median(synth));
                let table = format!("{mechanism},{rows},{dims},{compression:?}");
                println!(
                    "{table},{decode:.4},{bin_pass:.4},{synth:.4},{:.3},{:.3},{:.3e},{depth}",
                    bin_pass / decode,
                    synth / decode,
                    rows as f64 / synth
                );
                let split: Vec<String> =
                    split.into_iter().map(|(name, seconds)| format!("{name} {:.3}", median(seconds))).collect();
                println!("#   phase split (s, median): {}", split.join(", "));
            }
        }
    }
}
