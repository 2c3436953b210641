//! Binning throughput at several depths: the CPU binner's deposit methods side by side (and the GPU
//! binner beside them when the `gpu` feature finds an adapter). Inputs are pre-quantised indices, so
//! this measures interleaving + histogram only.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dpsynth::binner::cpu::{CpuBinner, DepositMethod};
use dpsynth::binner::{Binner, BinnerWorker};
use dpsynth::partition::CellGeometry;

const ROWS: usize = 1 << 22;
const DIMS: usize = 2;

fn quantised_axes(geometry: &CellGeometry) -> Vec<Vec<u32>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..DIMS)
        .map(|axis| {
            let mask = ((1u64 << geometry.axis_bits(axis)) - 1) as u32;
            (0..ROWS)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 20) as u32 & mask
                })
                .collect()
        })
        .collect()
}

fn binning(c: &mut Criterion) {
    let mut group = c.benchmark_group("binning");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(10);
    for depth in [12u32, 18, 24] {
        let geometry = CellGeometry::new(DIMS, depth);
        let axes = quantised_axes(&geometry);
        let slices: Vec<&[u32]> = axes.iter().map(Vec::as_slice).collect();
        let mut methods = vec![DepositMethod::LookupTable];
        if DepositMethod::detect() != DepositMethod::LookupTable {
            methods.push(DepositMethod::detect());
        }
        for method in methods {
            let binner = CpuBinner::with_method(geometry, method);
            group.bench_with_input(
                BenchmarkId::new(format!("cpu-{method:?}"), depth),
                &slices,
                |b, slices| {
                    b.iter(|| {
                        let mut worker = binner.worker().unwrap();
                        worker.add_batch(slices).unwrap();
                        binner.finish(vec![worker]).unwrap()
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, binning);
criterion_main!(benches);
