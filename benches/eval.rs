//! `dpsynth eval` hot paths on 10^6 vs 10^6 rows in d = 2, each beside a baseline measured in the same run:
//! - load: the eval loader (decode, normalise, clamp, row-major) vs plain Parquet decode of the same columns;
//! - w1-1d: exact 1-D W1 of one column vs sorting the same two columns (the floor of any exact method);
//! - moments: means and covariances (two passes) vs one pass summing every value;
//! - sandwich + grid: the whole W1 step (per-column W1, dyadic sandwich, grid transport) vs the 1-D W1s alone;
//! - ranking: the subsample estimate (5 repeats of 1000 rows, each a real-vs-synthetic and a real-vs-real
//!   exact solve) vs one exact solve of 1000 rows, and the pairwise 2-D W1 (here the one pair).
//!
//! Run: `cargo bench --bench eval`. Tables go to target/bench-data (kept between runs).

use std::path::{Path, PathBuf};

use arrow::array::AsArray;
use arrow::datatypes::Float64Type;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dpsynth::binner::NullPolicy;
use dpsynth::eval::distance::distances;
use dpsynth::eval::pairwise::{pairwise_w1, PairSelection};
use dpsynth::eval::subsample::{subsample_transport, SubsampleOptions};
use dpsynth::eval::summary::Moments;
use dpsynth::eval::w1::{w1_exact_small, w1_marginal, Sample};
use dpsynth::eval::{load_table, Table};
use dpsynth::generate::{write_table, Compression, GenerateSpec, Law, DEFAULT_ROW_GROUP_ROWS};
use dpsynth::geometry::bounds::ColumnBounds;
use dpsynth::io::source::Source;
use rayon::prelude::*;
use std::hint::black_box;

const ROWS: u64 = 1_000_000;
const DIMS: usize = 2;

fn table(name: &str, law: Law, seed: u64) -> PathBuf {
    let dir = PathBuf::from("target/bench-data");
    std::fs::create_dir_all(&dir).expect("bench directory");
    let path = dir.join(format!("eval-{name}-{ROWS}-{DIMS}.parquet"));
    if !path.exists() {
        let spec = GenerateSpec {
            rows: ROWS,
            dims: DIMS,
            law,
            seed,
            compression: Compression::None,
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
        };
        write_table(&path, &spec).expect("bench table is written");
    }
    path
}

fn bounds() -> Vec<ColumnBounds> {
    (0..DIMS).map(|axis| ColumnBounds::new(format!("x{axis}"), 0.0, 1.0).expect("valid bounds")).collect()
}

/// The baseline of loading: the same reader, projection and row-group parallelism, summing every
/// decoded value so the decode cannot be optimised away.
fn plain_decode(path: &Path, names: &[String]) -> f64 {
    let source = Source::open(path).expect("bench input opens");
    let columns = source.numeric_columns(names).expect("bench columns exist");
    (0..source.row_group_count())
        .into_par_iter()
        .map(|row_group| {
            let mut sum = 0.0;
            for batch in source.row_group_reader(row_group, &columns).expect("reader") {
                for column in batch.expect("batch decodes").columns() {
                    sum += column.as_primitive::<Float64Type>().values().iter().sum::<f64>();
                }
            }
            sum
        })
        .sum()
}

fn column(table: &Table, axis: usize) -> Vec<f64> {
    table.points.iter().skip(axis).step_by(table.dims()).copied().collect()
}

fn eval(c: &mut Criterion) {
    let (real_path, synth_path) = (table("real", Law::Mixture, 1), table("synth", Law::Mixture, 2));
    let names: Vec<String> = bounds().into_iter().map(|b| b.column).collect();
    let load = |path: &Path| load_table(path, false, &bounds(), NullPolicy::Error).expect("bench table loads");
    let (real, synth) = (load(&real_path), load(&synth_path));

    let mut group = c.benchmark_group("eval-load");
    group.throughput(Throughput::Elements(ROWS));
    group.sample_size(20);
    group.bench_function("plain-decode", |b| b.iter(|| black_box(plain_decode(&real_path, &names))));
    group.bench_function("load-table", |b| b.iter(|| black_box(load(&real_path))));
    group.finish();

    let mut group = c.benchmark_group("eval-w1-1d");
    group.throughput(Throughput::Elements(2 * ROWS));
    group.sample_size(20);
    let (column_real, column_synth) = (column(&real, 0), column(&synth, 0));
    group.bench_function("sort-both", |b| {
        b.iter(|| {
            let (mut x, mut y) = (column_real.clone(), column_synth.clone());
            x.sort_unstable_by(f64::total_cmp);
            y.sort_unstable_by(f64::total_cmp);
            black_box((x, y))
        })
    });
    group.bench_function("exact-w1", |b| {
        let (a, s) = (Sample::new(&column_real, 1).expect("valid"), Sample::new(&column_synth, 1).expect("valid"));
        b.iter(|| black_box(w1_marginal(&a, &s, 0).expect("valid")))
    });
    group.finish();

    let mut group = c.benchmark_group("eval-moments");
    group.throughput(Throughput::Elements(ROWS));
    group.sample_size(20);
    group.bench_function("sum-pass", |b| b.iter(|| black_box(real.points.par_iter().sum::<f64>())));
    group.bench_function("means-and-covariance", |b| b.iter(|| black_box(Moments::of(&real.points, DIMS))));
    group.finish();

    let mut group = c.benchmark_group("eval-w1-all");
    group.throughput(Throughput::Elements(2 * ROWS));
    group.sample_size(10);
    let (a, s) = (Sample::new(&real.points, DIMS).expect("valid"), Sample::new(&synth.points, DIMS).expect("valid"));
    group.bench_function("1d-w1s-only", |b| {
        b.iter(|| black_box((0..DIMS).map(|k| w1_marginal(&a, &s, k).expect("valid")).sum::<f64>()))
    });
    group.bench_function("sandwich-and-grid-side-128", |b| {
        b.iter(|| black_box(distances(&real.points, &synth.points, DIMS, Some(128)).expect("valid")))
    });
    group.finish();

    let mut group = c.benchmark_group("eval-ranking");
    group.sample_size(10);
    let options = SubsampleOptions::default();
    let rows = options.rows;
    group.bench_function("one-exact-solve", |b| {
        let (a, s) = (
            Sample::new(&real.points[..rows * DIMS], DIMS).expect("valid"),
            Sample::new(&synth.points[..rows * DIMS], DIMS).expect("valid"),
        );
        b.iter(|| black_box(w1_exact_small(&a, &s).expect("valid")))
    });
    group.bench_function("subsample-transport", |b| {
        b.iter(|| black_box(subsample_transport(&real.points, &[&synth.points], DIMS, rows, &options).expect("valid")))
    });
    let identity = [1.0, 0.0, 0.0, 1.0];
    group.bench_function("pairwise-2d-w1", |b| {
        b.iter(|| {
            black_box(
                pairwise_w1(&real.points, &synth.points, DIMS, &names, &identity, &identity, PairSelection::All, 0)
                    .expect("valid"),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, eval);
criterion_main!(benches);
