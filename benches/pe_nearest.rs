//! Private Evolution's nearest-neighbour histogram: the k-d tree against the brute-force scan, on the
//! same rows and candidates in one run (throughput in rows; multiply by the candidates for
//! rows × candidates per second). Candidates as at n = 10^4 and 10^5, ε = 1, d = 2 (|V| = n_s·v ≈ 1.7·10^3
//! and 1.8·10^4), and d = 3, spread uniformly over the cube or clustered as on the flights table (19 in
//! 20 points, rows and candidates, in a corner box of side 10^-3). Where a wgpu adapter exists, the GPU
//! kernel's brute-force scan runs on the same points too (a software adapter's figures say nothing of a GPU).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
#[cfg(feature = "gpu")]
use dpsynth::binner::gpu::{AdapterPolicy, GpuContext};
use dpsynth::mechanism::pe::nearest::{
    nearest_neighbour_counts, nearest_neighbour_counts_by_scan, snap_to_lattice, Metric,
};
#[cfg(feature = "gpu")]
use dpsynth::mechanism::pe::nearest_gpu::GpuNearest;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const ROWS: usize = 20_000;
/// (dims, candidates, clustered).
const SHAPES: [(usize, usize, bool); 5] =
    [(2, 1_738, false), (2, 17_940, false), (3, 8_000, false), (2, 17_940, true), (3, 8_000, true)];

/// `count` points on the search's lattice in [0,1]^dims: uniform, or 19 in 20 in the corner box of side
/// 10^-3.
fn random_points(rng: &mut Xoshiro256PlusPlus, count: usize, dims: usize, clustered: bool) -> Vec<f64> {
    (0..count)
        .flat_map(|i| {
            let side = if clustered && i % 20 != 0 { 1e-3 } else { 1.0 };
            (0..dims).map(|_| snap_to_lattice(side * rng.random::<f64>())).collect::<Vec<_>>()
        })
        .collect()
}

fn index_against_scan(c: &mut Criterion) {
    #[cfg(feature = "gpu")]
    let gpu = GpuContext::open(AdapterPolicy::AnyAdapter).ok().flatten();
    let mut group = c.benchmark_group("pe_nearest_neighbour_counts");
    group.sample_size(10);
    for (dims, candidates, clustered) in SHAPES {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let points = random_points(&mut rng, candidates, dims, clustered);
        let rows = random_points(&mut rng, ROWS, dims, clustered);
        group.throughput(Throughput::Elements(ROWS as u64));
        let layout = if clustered { "clustered" } else { "uniform" };
        let shape = format!("d{dims}_m{candidates}_{layout}");
        group.bench_with_input(BenchmarkId::new("kd_tree", &shape), &(), |b, _| {
            b.iter(|| nearest_neighbour_counts(Metric::Chebyshev, black_box(&points), dims, &rows))
        });
        group.bench_with_input(BenchmarkId::new("brute_force", &shape), &(), |b, _| {
            b.iter(|| nearest_neighbour_counts_by_scan(Metric::Chebyshev, black_box(&points), dims, &rows))
        });
        #[cfg(feature = "gpu")]
        if let Some(context) = &gpu {
            let kernel = GpuNearest::new(context, Metric::Chebyshev, dims, &rows).unwrap();
            let name = format!("gpu_scan ({})", context.adapter_description());
            group.bench_with_input(BenchmarkId::new(name, &shape), &(), |b, _| {
                b.iter(|| kernel.counts(black_box(&points)).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, index_against_scan);
criterion_main!(benches);
