//! The PSMM run (SPEC §5, dissertation Algorithm 1): a regular grid of m ≈ εN equal cubes chosen from
//! public inputs (or a released n̂), one binning pass, Lap_Z noise on every cell, the d_BL-closest
//! probability measure by min-cost flow, points placed in the cells.

use std::time::Instant;

use super::{commit_outputs, write_table, RunInput, SynthOutcome};
use crate::binner::grid::GridBinner;
use crate::binner::{scan_leaf_counts, AxisPlan, ScanStats};
use crate::error::{Error, Result};
use crate::geometry::grid::RegularGrid;
use crate::mechanism::pmm::release_root_count;
use crate::mechanism::psmm::{
    accuracy_bound, check_projection_fits, noisy_cell_counts, project_to_probability, Normaliser,
    Projection, PsmmBudget, ACCURACY_FORMULA, CELL_NOISE_STREAM,
};
use crate::options::{value_name, DeviceChoice};
use crate::privacy::Neighbours;
use crate::synth::report::*;
use crate::sampler::{allocate_rows, LeafSampler, Placement};

/// The binner line of the report and diagnostics (PSMM bins on the CPU only).
pub(super) const BINNING: &str = "cpu (regular grid)";

/// The default m ≈ εN is capped here: the exact projection of 10^6 cells takes minutes on two cores
/// (d = 2: 3–6 min, d = 3: 3 min, measured), and it grows faster than linearly. `--cells` may ask
/// for more, up to what memory allows.
pub const DEFAULT_MAX_CELLS: f64 = 1e6;

pub(super) fn run(run: &RunInput) -> Result<SynthOutcome> {
    let (options, seeds) = (run.options, &run.seeds);
    if options.depth.is_some() {
        return Err(Error::bad_input(
            "--depth applies to --mechanism pmm; psmm's partition is set by --cells (default about εn cells)",
        ));
    }
    if options.device == DeviceChoice::Gpu {
        return Err(Error::bad_input(
            "--device gpu applies to --mechanism pmm; psmm bins its regular grid on the CPU (its cost is the projection)",
        ));
    }
    let dims = run.dims();
    let epsilon = options.epsilon;
    let memory_limit = run.memory_limit();
    let releases_n_hat = options.neighbours == Neighbours::AddRemove && options.cells.is_none();
    let budget = PsmmBudget::new(
        options.neighbours,
        epsilon,
        releases_n_hat.then_some(options.root_share),
    )?;
    let mut timings = Vec::new();

    // The grid, from public inputs only: --cells, the public n, or (after binning) the released n̂.
    let started = Instant::now();
    let (grid, true_counts, stats, normaliser, cells_rule, n_hat) = match (
        options.cells,
        budget.root_scale,
    ) {
        (Some(cells), _) => {
            let grid = grid_for(dims, cells as f64, memory_limit)?;
            let (counts, stats) = bin_cells(run, &grid)?;
            let normaliser = match options.neighbours {
                Neighbours::Replace => Normaliser::PublicN,
                Neighbours::AddRemove => Normaliser::NoisyTotal,
            };
            let rule = format!("--cells {cells} rounded to k^d with k = round(cells^(1/d))");
            (grid, counts, stats, normaliser, rule, None)
        }
        (None, None) => {
            let n = run.source.row_count() as f64;
            let grid = grid_for(dims, default_cells(epsilon, n), memory_limit)?;
            let (counts, stats) = bin_cells(run, &grid)?;
            let rule = format!(
                "k = max(1, round(min(epsilon n, {DEFAULT_MAX_CELLS:e})^(1/d))) for the public n"
            );
            (grid, counts, stats, Normaliser::PublicN, rule, None)
        }
        (None, Some(root_scale)) => {
            // Plan with the file's row count, bin, release n̂, and bin again only if n̂ asks for another grid.
            let planned = grid_for(
                dims,
                default_cells(epsilon, run.source.row_count() as f64),
                memory_limit,
            )?;
            let (mut counts, stats) = bin_cells(run, &planned)?;
            let n_hat = release_root_count(stats.rows_binned, root_scale, &seeds.noise);
            let grid = grid_for(dims, default_cells(epsilon, n_hat as f64), memory_limit)?;
            if grid != planned {
                counts = bin_cells(run, &grid)?.0;
            }
            let rule = format!(
                "k = max(1, round(min(epsilon n̂, {DEFAULT_MAX_CELLS:e})^(1/d))) for the released n̂ = {n_hat}"
            );
            (
                grid,
                counts,
                stats,
                Normaliser::ReleasedCount(root_scale),
                rule,
                Some(n_hat),
            )
        }
    };
    timings.push(PhaseTiming {
        phase: "bin",
        seconds: started.elapsed().as_secs_f64(),
    });

    let started = Instant::now();
    let noisy = noisy_cell_counts(
        &true_counts,
        budget.cell_scale,
        &seeds.noise,
        CELL_NOISE_STREAM,
    );
    drop(true_counts);
    let mass = match normaliser {
        Normaliser::PublicN => run.source.row_count(),
        Normaliser::ReleasedCount(_) => n_hat.expect("released with the grid"),
        Normaliser::NoisyTotal => noisy.iter().map(|&c| i128::from(c)).sum::<i128>().max(1) as u64,
    };
    timings.push(PhaseTiming {
        phase: "noise",
        seconds: started.elapsed().as_secs_f64(),
    });

    let started = Instant::now();
    let bar = run.progress.phase("project", 1, "flow");
    let projection = match mass {
        0 => None,
        _ => Some(project_to_probability(&grid, &noisy, mass, memory_limit)?),
    };
    bar.advance(1);
    bar.finish();
    drop(noisy);
    timings.push(PhaseTiming {
        phase: "projection",
        seconds: started.elapsed().as_secs_f64(),
    });

    let started = Instant::now();
    let masses = projection
        .as_ref()
        .map_or_else(|| vec![0; grid.cell_count()], |p| p.masses.clone());
    let counts = match options.rows {
        Some(rows) if rows != mass => allocate_rows(&masses, rows),
        _ => masses,
    };
    let sampler = LeafSampler::on_grid(
        grid,
        &counts,
        options.placement,
        seeds.post_processing.rotate_left(17),
    );
    drop(counts);
    let (sink, total_rows) = write_table(run, &sampler, "sample and write", started, &mut timings)?;

    let report = RunReport {
        tool: ToolInfo::current(),
        mechanism: "psmm",
        guarantee: run.guarantee(budget.spent_epsilon()),
        input: run.input_info(),
        parameters: MechanismParameters::Psmm(psmm_parameters(
            &grid,
            &budget,
            cells_rule,
            normaliser,
            mass,
            projection.as_ref(),
            options.placement,
        )),
        release: ReleaseInfo {
            root_count: mass,
            root_count_is: normaliser.describe(),
            synthetic_rows: total_rows,
        },
        accuracy: AccuracyBound {
            expected_w1_bound: accuracy_bound(&grid, budget.cell_scale, normaliser, mass),
            units: "normalised l-infinity units on [0,1]^d (multiply axis k by hi_k - lo_k for column units)",
            n: mass,
            formula: ACCURACY_FORMULA,
        },
        device: BINNING.to_string(),
    };
    let mut diagnostics = Diagnostics::new(
        &stats,
        &run.column_names(),
        run.threads,
        BINNING.to_string(),
    );
    diagnostics.timings_seconds = timings;
    commit_outputs(run.outputs, report, diagnostics, sink)
}

/// The report's PSMM parameters (also lowdim's inner run): the grid, the cell noise and the projection.
pub(super) fn psmm_parameters(
    grid: &RegularGrid,
    budget: &PsmmBudget,
    cells_rule: String,
    normaliser: Normaliser,
    mass: u64,
    projection: Option<&Projection>,
    placement: Placement,
) -> PsmmParameters {
    PsmmParameters {
        cells_per_axis: grid.cells_per_axis(),
        cells: grid.cell_count() as u64,
        cells_rule,
        cell_diameter: grid.cell_diameter(),
        noise_scale: budget.cell_scale.to_f64(),
        noise_scale_num: budget.cell_scale.num(),
        noise_scale_den: budget.cell_scale.den(),
        epsilon_cells: budget.cell_epsilon(),
        epsilon_n_hat: budget.root_epsilon(),
        normaliser: mass,
        normaliser_is: normaliser.describe(),
        d_bl_to_noisy_measure: projection.map(|p| p.d_bl),
        solver: projection.map_or("none (M = 0)", |p| p.solver),
        placement: value_name(&placement),
    }
}

/// The paper's m ≈ εN (Corollary 3.7), capped at [`DEFAULT_MAX_CELLS`].
pub(super) fn default_cells(epsilon: f64, size: f64) -> f64 {
    (epsilon * size).min(DEFAULT_MAX_CELLS)
}

/// The grid of k = max(1, round(target^{1/d})) cells per axis, refused before any allocation when its
/// projection network would not fit in memory.
pub(super) fn grid_for(dims: usize, target_cells: f64, memory_limit: u64) -> Result<RegularGrid> {
    let side = target_cells
        .max(1.0)
        .powf(1.0 / dims as f64)
        .round()
        .max(1.0);
    let grid = (side <= f64::from(u32::MAX))
        .then(|| RegularGrid::new(dims, side as u32))
        .flatten()
        .ok_or_else(|| {
            Error::bad_input(format!(
                "psmm: {side} cells per axis in d = {dims} is too many cells; choose fewer with --cells"
            ))
        })?;
    check_projection_fits(&grid, memory_limit)?;
    Ok(grid)
}

/// One binning pass onto `grid`'s cells (the regular quantisation of SPEC §1 bounds, clamped).
fn bin_cells(run: &RunInput, grid: &RegularGrid) -> Result<(Vec<u64>, ScanStats)> {
    let axes: Vec<AxisPlan> = run
        .bounds
        .iter()
        .map(|bounds| AxisPlan::with_cells(bounds.clone(), grid.cells_per_axis()))
        .collect();
    let bar = run.progress.phase("bin", run.source.row_count(), "rows");
    let outcome = scan_leaf_counts(
        run.source,
        run.columns,
        &axes,
        run.options.nulls,
        &GridBinner::new(*grid),
        &bar,
    )?;
    bar.finish();
    Ok(outcome)
}
