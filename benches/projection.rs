//! PSMM's projection (`psmm::project_to_probability`, the exact min-cost flow into the holes) on noisy
//! counts of a clustered table, against noising the same cells (`psmm::noisy_cell_counts`) in the same
//! run: both touch every cell; the ratio says what the projection costs beyond a pass over the grid.
//! Two grids: d = 2 with the coarse start (side 500) and d = 3 without it (side 40), at ε = 1.
//!
//! Run: `cargo bench --bench projection`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dpsynth::geometry::grid::RegularGrid;
use dpsynth::mechanism::psmm::{noisy_cell_counts, project_to_probability, PsmmBudget};
use dpsynth::privacy::{Neighbours, NoiseKey, NoiseStream};

/// Rows binned per cell on average: PSMM's grid at its default size holds a few rows per cell.
const ROWS_PER_CELL: u64 = 4;
const EPSILON: f64 = 1.0;

/// Counts of a table with two dense clusters and an empty rest, as PSMM sees the mixture tables.
fn clustered_counts(grid: &RegularGrid) -> Vec<u64> {
    let side = grid.cells_per_axis() as f64;
    let mut axes = vec![0u32; grid.dims()];
    (0..grid.cell_count())
        .map(|cell| {
            grid.axis_indices(cell, &mut axes);
            let near = |centre: f64| axes.iter().all(|&a| ((f64::from(a) + 0.5) / side - centre).abs() < 0.15);
            if near(0.3) || near(0.7) {
                ROWS_PER_CELL * 8
            } else {
                0
            }
        })
        .collect()
}

fn projection(c: &mut Criterion) {
    let scale = PsmmBudget::new(Neighbours::AddRemove, EPSILON, None).expect("a budget").cell_scale;
    let key = NoiseKey::from_user_seed(1);
    let mut group = c.benchmark_group("projection");
    group.sample_size(10);
    for (dims, side) in [(2, 500), (3, 40)] {
        let grid = RegularGrid::new(dims, side).expect("a grid");
        let counts = clustered_counts(&grid);
        let noisy = noisy_cell_counts(&counts, scale, &key, NoiseStream::PsmmCells);
        let mass = noisy.iter().sum::<i64>().max(1) as u64;
        group.throughput(Throughput::Elements(grid.cell_count() as u64));
        group.bench_function(format!("noise d={dims} side={side}"), |b| {
            b.iter(|| noisy_cell_counts(black_box(&counts), scale, &key, NoiseStream::PsmmCells))
        });
        group.bench_function(format!("project d={dims} side={side}"), |b| {
            b.iter(|| project_to_probability(&grid, black_box(&noisy), mass, u64::MAX).expect("fits"))
        });
    }
    group.finish();
}

criterion_group!(benches, projection);
criterion_main!(benches);
