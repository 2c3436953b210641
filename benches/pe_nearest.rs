//! Private Evolution's nearest-neighbour histogram: the grid index against the brute-force scan, on the
//! same rows and candidates in one run (throughput in rows; multiply by the candidates for
//! rows × candidates per second). Candidates as at n = 10^4 and 10^5, ε = 1, d = 2 (|V| = n_s·v ≈ 1.7·10^3
//! and 1.8·10^4), and d = 3.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dpsynth::mechanism::pe::nearest::{
    nearest_neighbour_counts, nearest_neighbour_counts_by_scan, Metric,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const ROWS: usize = 20_000;
/// (dims, candidates).
const SHAPES: [(usize, usize); 3] = [(2, 1_738), (2, 17_940), (3, 8_000)];

fn index_against_scan(c: &mut Criterion) {
    let mut group = c.benchmark_group("pe_nearest_neighbour_counts");
    group.sample_size(10);
    for (dims, candidates) in SHAPES {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let points: Vec<f64> = (0..candidates * dims).map(|_| rng.random::<f64>()).collect();
        let rows: Vec<f64> = (0..ROWS * dims).map(|_| rng.random::<f64>()).collect();
        group.throughput(Throughput::Elements(ROWS as u64));
        let shape = format!("d{dims}_m{candidates}");
        group.bench_with_input(BenchmarkId::new("grid_index", &shape), &(), |b, _| {
            b.iter(|| nearest_neighbour_counts(Metric::Chebyshev, black_box(&points), dims, &rows))
        });
        group.bench_with_input(BenchmarkId::new("brute_force", &shape), &(), |b, _| {
            b.iter(|| {
                nearest_neighbour_counts_by_scan(Metric::Chebyshev, black_box(&points), dims, &rows)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, index_against_scan);
criterion_main!(benches);
