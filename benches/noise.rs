//! Exact discrete Laplace draws, by rejection (CKS) and by table, against raw ChaCha12 u64 draws from
//! the same generator, in one run, so the report reads as a ratio: how many raw words one noise sample
//! costs in time. The table's build is timed too: PMM builds one per level.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dpsynth::noise::discrete_laplace::{sample_discrete_laplace, RationalScale};
use dpsynth::noise::laplace_table::LaplaceTable;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;

/// Noise scales timed: small, typical for a deep tree level, large.
const SCALES: [f64; 3] = [1.0, 30.0, 1000.0];
/// Draws per timed iteration, so loop overhead is negligible for both baseline and sampler.
const DRAWS_PER_ITERATION: u64 = 1024;

fn discrete_laplace_against_raw_words(c: &mut Criterion) {
    let mut group = c.benchmark_group("noise");
    group.throughput(Throughput::Elements(DRAWS_PER_ITERATION));
    let mut rng = ChaCha12Rng::seed_from_u64(1);
    group.bench_function("chacha12_raw_u64", |b| {
        b.iter(|| {
            for _ in 0..DRAWS_PER_ITERATION {
                black_box(rng.next_u64());
            }
        })
    });
    for sigma in SCALES {
        let scale = RationalScale::round_up(sigma).expect("a valid bench scale");
        group.bench_with_input(BenchmarkId::new("discrete_laplace", sigma), &scale, |b, &scale| {
            b.iter(|| {
                for _ in 0..DRAWS_PER_ITERATION {
                    black_box(sample_discrete_laplace(&mut rng, black_box(scale)));
                }
            })
        });
        let table = LaplaceTable::new(scale);
        group.bench_with_input(BenchmarkId::new("laplace_table", sigma), &table, |b, table| {
            b.iter(|| {
                for _ in 0..DRAWS_PER_ITERATION {
                    black_box(table.sample(&mut rng));
                }
            })
        });
    }
    group.finish();
    let mut build = c.benchmark_group("noise_table_build");
    for sigma in SCALES {
        let scale = RationalScale::round_up(sigma).expect("a valid bench scale");
        build.bench_with_input(BenchmarkId::new("laplace_table", sigma), &scale, |b, &scale| {
            b.iter(|| black_box(LaplaceTable::new(scale)))
        });
    }
    build.finish();
}

criterion_group!(benches, discrete_laplace_against_raw_words);
criterion_main!(benches);
