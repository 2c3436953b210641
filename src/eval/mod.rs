//! `dpsynth eval`: how close a synthetic table is to the real one (SPEC §7), for the data owner.
//!
//! Both tables are read with the same public bounds and compared in normalised units on [0,1]^d: W1 in ℓ∞
//! (exact where it can be, otherwise a grid estimate with a stated error, always inside the one-pass
//! sandwich), per-column W1, mean and covariance errors and k-way marginal errors on a grid. The report is
//! plain numbers ([`EvalReport`], serialised to JSON) and optionally a page with plots ([`report_dir`]).
//!
//! Eval reads the real data and its output is not private: it is an owner tool, like the diagnostics.

pub mod distance;
pub mod report_dir;
pub mod summary;
pub mod svg;
pub mod table;

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::binner::NullPolicy;
use crate::geometry::bounds::ColumnBounds;
use crate::error::Result;

pub use distance::{Distances, GridEstimate, Sandwich, W1Estimate, W1Method};
pub use summary::MarginalErrors;
pub use table::{load_table, Table};

/// The `units` string of the report.
pub const UNITS: &str = "normalised l-infinity on [0,1]^d";

/// What an evaluation compares and how.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Public bounds of the compared columns, applied to both tables (their order is the report's).
    pub bounds: Vec<ColumnBounds>,
    pub nulls: NullPolicy,
    /// Side of the grid estimate; `None` picks [`distance::default_grid_side`] when no exact method fits.
    pub grid_side: Option<usize>,
}

impl EvalOptions {
    pub fn new(bounds: Vec<ColumnBounds>) -> Self {
        EvalOptions {
            bounds,
            nulls: NullPolicy::DEFAULT,
            grid_side: None,
        }
    }
}

/// One table as the report describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableReport {
    pub file: String,
    /// Rows compared (after dropped ones).
    pub rows: u64,
    /// Values clamped to the bounds, per column.
    pub clamped_values: Vec<u64>,
    /// Rows left out for a null/NaN/infinite value (`--nulls drop`).
    pub dropped_rows: u64,
}

/// Per-column numbers; W1 normalised, the rest in the column's units.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColumnReport {
    pub name: String,
    pub lo: f64,
    pub hi: f64,
    /// Exact W1 between the column's marginals, normalised by hi − lo.
    pub w1: f64,
    pub w1_column_units: f64,
    pub mean_real: f64,
    pub mean_synth: f64,
    /// |mean_real − mean_synth|.
    pub mean_error: f64,
    pub std_real: f64,
    pub std_synth: f64,
    /// |std_real − std_synth| (population standard deviations).
    pub std_error: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeanError {
    pub max_abs: f64,
    pub l2: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CovarianceError {
    pub frobenius: f64,
    pub max_abs: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseTiming {
    pub phase: &'static str,
    pub seconds: f64,
}

/// Everything `dpsynth eval` reports. The JSON keys are a stable interface (scripts read them).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    pub real: TableReport,
    pub synth: TableReport,
    pub units: &'static str,
    pub columns: Vec<ColumnReport>,
    /// The headline W1, with bounds that hold for the true value.
    pub w1: W1Estimate,
    pub sandwich: Sandwich,
    /// The grid estimate, when it was computed (no exact method fitted, or `--grid-side`).
    pub grid: Option<GridEstimate>,
    /// Of the column means, normalised units.
    pub mean_error: MeanError,
    /// Of the covariance matrices (population), normalised units.
    pub covariance_error: CovarianceError,
    /// Total-variation errors of the k-way marginals on a grid, k = 1..=min(d, 3).
    pub marginals: Vec<MarginalErrors>,
    pub timings_seconds: Vec<PhaseTiming>,
}

/// Loads both tables with the same bounds and compares them, on the current rayon pool.
pub fn evaluate(real: &Path, synth: &Path, options: &EvalOptions) -> Result<EvalReport> {
    let (real, synth, _) = load_pair(real, synth, options)?;
    evaluate_tables(&real, &synth, options.grid_side)
}

/// Loads the real and synthetic tables (in parallel) and the seconds it took.
pub fn load_pair(real: &Path, synth: &Path, options: &EvalOptions) -> Result<(Table, Table, f64)> {
    let started = Instant::now();
    let (real, synth) = rayon::join(
        || load_table(real, &options.bounds, options.nulls),
        || load_table(synth, &options.bounds, options.nulls),
    );
    Ok((real?, synth?, started.elapsed().as_secs_f64()))
}

/// Compares two loaded tables with the same columns (see [`EvalOptions::grid_side`] for `grid_side`).
pub fn evaluate_tables(
    real: &Table,
    synth: &Table,
    grid_side: Option<usize>,
) -> Result<EvalReport> {
    debug_assert_eq!(real.bounds, synth.bounds);
    let dims = real.dims();
    let mut timings = Vec::new();
    let started = Instant::now();
    let distances = distance::distances(&real.points, &synth.points, dims, grid_side)?;
    timings.push(PhaseTiming {
        phase: "w1",
        seconds: started.elapsed().as_secs_f64(),
    });

    let started = Instant::now();
    let (moments_real, moments_synth) = rayon::join(
        || summary::Moments::of(&real.points, dims),
        || summary::Moments::of(&synth.points, dims),
    );
    let names: Vec<String> = real.bounds.iter().map(|b| b.column.clone()).collect();
    let marginals = summary::marginal_errors(&real.points, &synth.points, dims, &names);
    timings.push(PhaseTiming {
        phase: "moments_and_marginals",
        seconds: started.elapsed().as_secs_f64(),
    });

    let (std_real, std_synth) = (moments_real.std(), moments_synth.std());
    let columns = real
        .bounds
        .iter()
        .enumerate()
        .map(|(k, bounds)| {
            let width = bounds.hi - bounds.lo;
            let (mean_real, mean_synth) = (
                bounds.denormalise(moments_real.mean[k]),
                bounds.denormalise(moments_synth.mean[k]),
            );
            ColumnReport {
                name: bounds.column.clone(),
                lo: bounds.lo,
                hi: bounds.hi,
                w1: distances.columns[k],
                w1_column_units: distances.columns[k] * width,
                mean_real,
                mean_synth,
                mean_error: (moments_real.mean[k] - moments_synth.mean[k]).abs() * width,
                std_real: std_real[k] * width,
                std_synth: std_synth[k] * width,
                std_error: (std_real[k] - std_synth[k]).abs() * width,
            }
        })
        .collect();
    let (mean_max, mean_l2) = summary::difference_norms(&moments_real.mean, &moments_synth.mean);
    let (covariance_max, covariance_frobenius) =
        summary::difference_norms(&moments_real.covariance, &moments_synth.covariance);
    Ok(EvalReport {
        real: table_report(real),
        synth: table_report(synth),
        units: UNITS,
        columns,
        w1: distances.w1,
        sandwich: distances.sandwich,
        grid: distances.grid,
        mean_error: MeanError {
            max_abs: mean_max,
            l2: mean_l2,
        },
        covariance_error: CovarianceError {
            frobenius: covariance_frobenius,
            max_abs: covariance_max,
        },
        marginals,
        timings_seconds: timings,
    })
}

fn table_report(table: &Table) -> TableReport {
    TableReport {
        file: table.file.display().to_string(),
        rows: table.rows() as u64,
        clamped_values: table.clamped_values.clone(),
        dropped_rows: table.dropped_rows,
    }
}

impl EvalReport {
    /// A short human summary (what `dpsynth eval` prints without `--json`).
    pub fn summary(&self) -> String {
        let mut text = format!(
            "real {} ({} rows) vs synthetic {} ({} rows), d = {}, W1 in {}\n",
            self.real.file,
            self.real.rows,
            self.synth.file,
            self.synth.rows,
            self.columns.len(),
            self.units
        );
        text += &format!(
            "W1 = {:.6} (guaranteed within [{:.6}, {:.6}]): {}\n",
            self.w1.value, self.w1.lower, self.w1.upper, self.w1.detail
        );
        text += &format!(
            "sandwich: {:.6} <= W1 <= {:.6} (max 1-D W1; dyadic tree bound at depth {})\n",
            self.sandwich.lower, self.sandwich.upper, self.sandwich.depth
        );
        if let Some(grid) = &self.grid {
            text += &format!(
                "grid W1 (side {}): {:.6} +- {:.3e}\n",
                grid.side, grid.w1, grid.error_bound
            );
        }
        text += &format!(
            "mean error: max {:.3e}, l2 {:.3e}; covariance error: max {:.3e}, Frobenius {:.3e} (normalised)\n",
            self.mean_error.max_abs,
            self.mean_error.l2,
            self.covariance_error.max_abs,
            self.covariance_error.frobenius
        );
        for marginal in &self.marginals {
            text += &format!(
                "{}-way marginals (grid side {}): TV max {:.4} ({}), mean {:.4} over {}\n",
                marginal.k,
                marginal.side,
                marginal.max_tv,
                marginal.worst_columns.join(", "),
                marginal.mean_tv,
                marginal.count
            );
        }
        text +=
            "column: W1 (normalised, column units), mean error, std error, clamped real/synth\n";
        for (k, column) in self.columns.iter().enumerate() {
            text += &format!(
                "  {}: {:.6} ({:.6}), {:.6}, {:.6}, {}/{}\n",
                column.name,
                column.w1,
                column.w1_column_units,
                column.mean_error,
                column.std_error,
                self.real.clamped_values[k],
                self.synth.clamped_values[k]
            );
        }
        text
    }
}
