//! Peak resident memory of PSMM's projection alone, against the model that refuses grids that do not fit
//! (`psmm::projection_bytes`): noisy counts of a clustered table (four rows a cell, ε = 1), the peak reset
//! just before `project_to_probability` and read after it (Linux: /proc/self/clear_refs, VmHWM). The
//! figures behind `PROJECTION_BYTES_PER_CELL_WORD`; rerun it when the solver's arrays change.
//!
//! Run: `cargo bench --bench projection_memory` (the grids measured), or `-- D SIDE` for one grid.

use dpsynth::geometry::grid::RegularGrid;
use dpsynth::mechanism::psmm::{noisy_cell_counts, project_to_probability, projection_bytes, PsmmBudget};
use dpsynth::privacy::{Neighbours, NoiseKey, NoiseStream};

/// The grids the model was fitted on: 10^6 cells in d = 2, 3, 4 and smaller ones in d = 4, 5.
const GRIDS: [(usize, u32); 7] = [(2, 1000), (3, 100), (4, 18), (4, 23), (4, 32), (5, 10), (5, 12)];

/// The largest resident set since the last reset, in bytes.
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Counts of two dense clusters (a fifth of the cube each) and an empty rest, four rows a cell on average.
fn clustered_counts(grid: &RegularGrid) -> Vec<u64> {
    let side = f64::from(grid.cells_per_axis());
    let mut axes = vec![0u32; grid.dims()];
    (0..grid.cell_count())
        .map(|cell| {
            grid.axis_indices(cell, &mut axes);
            let near = |centre: f64| axes.iter().all(|&a| ((f64::from(a) + 0.5) / side - centre).abs() < 0.15);
            if near(0.3) || near(0.7) {
                32
            } else {
                0
            }
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    let grids = match args.as_slice() {
        [dims, side] => vec![(dims.parse().expect("D"), side.parse().expect("SIDE"))],
        _ => GRIDS.to_vec(),
    };
    if peak_resident_bytes().is_none() {
        println!("projection_memory: needs Linux's /proc/self/status");
        return;
    }
    let scale = PsmmBudget::new(Neighbours::AddRemove, 1.0, None).expect("a budget").cell_scale;
    let key = NoiseKey::from_user_seed(1);
    println!("d  side  cells      peak MB  model MB  seconds");
    for (dims, side) in grids {
        let grid = RegularGrid::new(dims, side).expect("a grid");
        let noisy = noisy_cell_counts(&clustered_counts(&grid), scale, &key, NoiseStream::PsmmCells);
        let mass = noisy.iter().sum::<i64>().max(1) as u64;
        // Resets the peak to what is resident now (the counts included, as the model counts them).
        std::fs::write("/proc/self/clear_refs", "5").expect("resetting the peak needs Linux");
        let started = std::time::Instant::now();
        let projection = project_to_probability(&grid, &noisy, mass, u64::MAX).expect("no limit");
        let seconds = started.elapsed().as_secs_f64();
        let peak = peak_resident_bytes().expect("read before");
        let model = projection_bytes(&grid).expect("no overflow");
        println!(
            "{dims}  {side:>4}  {:>9}  {:>7.1}  {:>8.1}  {seconds:>7.2}",
            grid.cell_count(),
            peak as f64 / 1e6,
            model as f64 / 1e6
        );
        drop(projection);
    }
}
