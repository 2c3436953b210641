//! Binning throughput at several depths: the CPU binner's deposit methods and the GPU binner (any
//! adapter, lavapipe included, when the `gpu` feature finds one) side by side in one run. Inputs are
//! pre-quantised indices, so this measures interleaving + histogram (+ upload and readback on the GPU).
//! The CPU cases run on one thread: multiply by the scan's threads for the whole pass.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dpsynth::binner::cpu::{CpuBinner, DepositMethod};
#[cfg(feature = "gpu")]
use dpsynth::binner::gpu::{AdapterPolicy, GpuContext, GpuLeafBinner};
use dpsynth::binner::{Binner, BinnerWorker};
use dpsynth::geometry::partition::CellGeometry;

const ROWS: usize = 10_000_000;
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
    #[cfg(feature = "gpu")]
    let gpu = GpuContext::open(AdapterPolicy::AnyAdapter).unwrap();
    #[cfg(feature = "gpu")]
    match &gpu {
        Some(context) => println!("GPU adapter: {}", context.adapter_description()),
        None => println!("no wgpu adapter: GPU cases skipped"),
    }
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
            group.bench_with_input(BenchmarkId::new(format!("cpu-{method:?}"), depth), &slices, |b, slices| {
                b.iter(|| {
                    let mut worker = binner.worker().unwrap();
                    worker.add_batch(slices).unwrap();
                    binner.finish(vec![worker]).unwrap()
                })
            });
        }
        #[cfg(feature = "gpu")]
        if let Some(context) = &gpu {
            group.bench_with_input(BenchmarkId::new("gpu", depth), &slices, |b, slices| {
                b.iter(|| {
                    let mut binner = GpuLeafBinner::new(context, DIMS, depth).unwrap();
                    binner.add_batch(slices).unwrap();
                    binner.finish().unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, binning);
criterion_main!(benches);
