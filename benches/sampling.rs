//! Drawing synthetic points in their leaf cells against filling the same columns with raw uniform draws
//! from the same generator (xoshiro256++, blocks in parallel on the same pool), in one run: the ratio is
//! what locating each row's cell and placing it there costs beyond the random numbers themselves.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dpsynth::geometry::partition::CellGeometry;
use dpsynth::sampler::{LeafSampler, Placement, RowOrder, SAMPLE_BLOCK_ROWS};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// Rows per timed iteration: one output batch of `synth`.
const ROWS: usize = 256 * SAMPLE_BLOCK_ROWS;
/// (dims, depth): PMM's depth for about 10^6 rows at ε = 1 in d = 2, and a deeper d = 4 tree.
const SHAPES: [(usize, u32); 2] = [(2, 20), (4, 22)];

/// Released counts with the spread of a real release: a fifth of the leaves empty, two rows per leaf on
/// average (so a batch from the middle of the table exists at every shape).
fn leaf_counts(geometry: &CellGeometry) -> Vec<u64> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..geometry.leaf_count())
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % 5
        })
        .collect()
}

/// The baseline: the same columns, the same block streams, uniform draws only.
fn fill_uniform(columns: &mut [Vec<f64>], seed: u64) {
    for (axis, column) in columns.iter_mut().enumerate() {
        column.resize(ROWS, 0.0);
        column.par_chunks_mut(SAMPLE_BLOCK_ROWS).enumerate().for_each(|(block, chunk)| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ (block as u64) << 8 ^ axis as u64);
            for value in chunk {
                *value = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            }
        });
    }
}

fn sampling_against_raw_draws(c: &mut Criterion) {
    let mut group = c.benchmark_group("sampling");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(20);
    for (dims, depth) in SHAPES {
        let geometry = CellGeometry::new(dims, depth);
        let counts = leaf_counts(&geometry);
        let mut columns = vec![Vec::new(); dims];
        let label = format!("d{dims}_r{depth}");
        group.bench_function(BenchmarkId::new("uniform_draws_baseline", &label), |b| {
            b.iter(|| {
                fill_uniform(&mut columns, 11);
                black_box(&columns);
            })
        });
        for (name, placement, order) in [
            ("uniform", Placement::Uniform, RowOrder::Cells),
            ("centre", Placement::Centre, RowOrder::Cells),
            ("uniform_random_order", Placement::Uniform, RowOrder::Random),
        ] {
            let sampler = LeafSampler::new(geometry, &counts, placement, order, 11);
            // Rows from the middle of the table, so the leaf search starts deep in the offsets.
            let start = (sampler.total_rows() / 4) / SAMPLE_BLOCK_ROWS as u64 * SAMPLE_BLOCK_ROWS as u64;
            assert!(start + ROWS as u64 <= sampler.total_rows());
            group.bench_function(BenchmarkId::new(name, &label), |b| {
                b.iter(|| {
                    sampler.sample_rows(start, ROWS, &mut columns);
                    black_box(&columns);
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, sampling_against_raw_draws);
criterion_main!(benches);
