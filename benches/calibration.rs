//! The calibration maps x ↦ G⁻¹(F(x)) that every calibrated run (the default at d ≥ 3) passes each
//! synthetic value through, against a plain affine pass over the same values in one run: the ratio is
//! what locating the cells of F and G costs beyond reading and writing the column; and the same maps
//! applied to the whole column in blocks ([`MonotoneMap::apply_all`], what sampling runs).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dpsynth::geometry::cdf::CellCdf;
use dpsynth::mechanism::pmm::marginals::MonotoneMap;

/// Values per timed iteration: one output batch of `synth` for one column.
const VALUES: usize = 1 << 20;
/// Cells of the released marginal G: the depth `synth` chooses for 10^7 rows at ε = 1, d = 4 (13).
const MARGINAL_CELLS: usize = 1 << 13;
/// Cells of the joint release's marginal F along one axis at that size (depth 21 over four axes).
const JOINT_AXIS_CELLS: usize = 1 << 5;

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Released marginal counts: a noisy flat column, or a skewed one whose tail thins out into cells of a
/// few rows and empty ones (where the inverse must search).
fn marginal_counts(shape: &str, state: &mut u64) -> Vec<u64> {
    (0..MARGINAL_CELLS)
        .map(|cell| {
            let noise = (xorshift(state) % 600) as i64 - 300;
            let mean = match shape {
                "flat" => 1220.0,
                _ => 3.0e5 * (-30.0 * cell as f64 / MARGINAL_CELLS as f64).exp(),
            };
            (mean as i64 + noise).max(0) as u64
        })
        .collect()
}

fn calibration_maps(c: &mut Criterion) {
    let mut group = c.benchmark_group("calibration");
    group.throughput(Throughput::Elements(VALUES as u64));
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let values: Vec<f64> = (0..VALUES).map(|_| (xorshift(&mut state) >> 11) as f64 / (1u64 << 53) as f64).collect();
    let mut column = values.clone();
    group.bench_function("affine_baseline", |b| {
        b.iter(|| {
            for (out, &x) in column.iter_mut().zip(&values) {
                *out = 0.5 * x + 0.25;
            }
            black_box(&column);
        })
    });
    for shape in ["flat", "skewed"] {
        let joint: Vec<u64> = (0..JOINT_AXIS_CELLS).map(|_| 300_000 + xorshift(&mut state) % 1000).collect();
        let map = MonotoneMap {
            from: CellCdf::from_counts(&joint).unwrap(),
            to: CellCdf::from_counts(&marginal_counts(shape, &mut state)).unwrap(),
        };
        group.bench_function(BenchmarkId::new("monotone_map", shape), |b| {
            b.iter(|| {
                for (out, &x) in column.iter_mut().zip(&values) {
                    *out = map.apply(x);
                }
                black_box(&column);
            })
        });
        group.bench_function(BenchmarkId::new("monotone_map_in_blocks", shape), |b| {
            b.iter(|| {
                column.copy_from_slice(&values);
                map.apply_all(&mut column);
                black_box(&column);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, calibration_maps);
criterion_main!(benches);
