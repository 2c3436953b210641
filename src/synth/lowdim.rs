//! The `lowdim` run (paper 002, Algorithm 1; SPEC §5): pass 1 folds the quantised rows into exact Gram
//! sums; the covariance and the mean are released (with a noisy n̂ first under add-remove); the top-d'
//! eigenvectors span the subspace; pass 2 projects every row and bins it on the inner mechanism's
//! partition of the subroutine box (PMM's dyadic leaves or PSMM's regular grid); the inner mechanism
//! releases cell counts (PSMM: noisy counts then the d_BL-closest probability measure, normalised by n or
//! n̂); sampled points are lifted back and clamped to [0,1]^d.

use std::time::Instant;

use super::pmm::pmm_parameters;
use super::psmm::{psmm_parameters, DEFAULT_MAX_CELLS};
use super::{commit_outputs, write_table, RowGenerator, RunInput, SynthOutcome};
use crate::binner::device::ChosenBinner;
use crate::binner::grid::GridBinner;
use crate::binner::{scan_quantised_rows, AxisPlan, Binner, ScanStats};
use crate::error::{Error, Result};
use crate::geometry::grid::RegularGrid;
use crate::mechanism::lowdim::basis::{choose_target_dim, RateTerms, Spectrum};
use crate::mechanism::lowdim::covariance::{
    release_moments, GramAccumulator, GramSums, GridRelease, VALUE_CELL_BITS,
};
use crate::mechanism::lowdim::projection::{leaf_cells_per_axis, ProjectingWorker, Projection};
use crate::mechanism::lowdim::{LowdimBudget, INNER_PSMM_NOISE_STREAM};
use crate::mechanism::pmm::{release_leaf_counts, release_root_count};
use crate::mechanism::psmm::{
    accuracy_bound as psmm_accuracy_bound, noisy_cell_counts, project_to_probability, Normaliser,
    PsmmBudget,
};
use crate::noise::discrete_laplace::RationalScale;
use crate::options::{DeviceChoice, InnerMechanism, TargetDim};
use crate::geometry::partition::{CellGeometry, MAX_DEPTH};
use crate::privacy::{choose_depth, max_depth_for_memory, LevelSchedule, Neighbours, RootNoise};
use crate::synth::report::*;
use crate::sampler::{allocate_rows, LeafSampler};

pub(super) fn run(run: &RunInput) -> Result<SynthOutcome> {
    let (options, seeds) = (run.options, &run.seeds);
    let dims = run.dims();
    let neighbours = options.neighbours;
    let budget = LowdimBudget::split(options.epsilon, neighbours, options.noisy_n_share)?;
    if let Some(TargetDim::Fixed(target)) = options.target_dim {
        if target > dims {
            return Err(Error::bad_input(format!(
                "--target-dim {target} exceeds the number of columns ({dims})"
            )));
        }
    }
    let memory_depth = max_depth_for_memory(run.memory_limit(), run.threads);
    match (options.inner_mechanism, options.depth) {
        (InnerMechanism::Psmm, Some(_)) => {
            return Err(Error::bad_input(
                "--depth applies to the inner PMM; the inner psmm's grid is set by --cells (default about ε_s n cells)",
            ))
        }
        (InnerMechanism::Pmm, Some(depth)) if depth > MAX_DEPTH || depth > memory_depth => {
            return Err(Error::bad_input(format!(
                "--depth {depth} is too large: this machine's memory allows at most {}",
                memory_depth.min(MAX_DEPTH)
            )));
        }
        _ => {}
    }
    if options.inner_mechanism == InnerMechanism::Psmm && options.device == DeviceChoice::Gpu {
        return Err(Error::bad_input(
            "--device gpu applies to the inner PMM; the inner psmm bins its regular grid on the CPU",
        ));
    }
    let mut timings = Vec::new();

    // Pass 1: exact sums of the quantised rows.
    let started = Instant::now();
    let value_axes: Vec<AxisPlan> = run
        .bounds
        .iter()
        .map(|bounds| AxisPlan::new(bounds.clone(), VALUE_CELL_BITS))
        .collect();
    let bar = run
        .progress
        .phase("covariance", run.source.row_count(), "rows");
    let (workers, stats) = scan_quantised_rows(
        run.source,
        run.columns,
        &value_axes,
        options.nulls,
        &|| Ok(GramAccumulator::new(dims)),
        &bar,
    )?;
    bar.finish();
    let sums = GramSums::merge(dims, workers.into_iter().map(|worker| worker.sums));
    timings.push(PhaseTiming {
        phase: "covariance pass",
        seconds: started.elapsed().as_secs_f64(),
    });

    // The row count the releases may use: public n (replace) or a released n̂ (add-remove).
    let started = Instant::now();
    let root_scale = match budget.noisy_n {
        Some(epsilon_n) => Some(RationalScale::round_up(1.0 / epsilon_n).ok_or_else(|| {
            Error::bad_input(format!(
                "--noisy-n-share gives epsilon {epsilon_n}, too small"
            ))
        })?),
        None => None,
    };
    let rows = match root_scale {
        Some(scale) => release_root_count(sums.rows, scale, &seeds.noise),
        None => sums.rows,
    };
    let moments = release_moments(
        &sums,
        neighbours,
        rows,
        budget.covariance,
        budget.mean,
        &seeds.noise,
    )?;
    let spectrum = Spectrum::of_symmetric(&moments.covariance, dims)?;
    let n = rows as f64;
    let rate_terms = |k| {
        RateTerms::at(
            &spectrum.eigenvalues,
            k,
            options.epsilon,
            budget.subroutine,
            n,
        )
    };
    let (target_dim, target_dim_rule, criterion) = match options
        .target_dim
        .unwrap_or(TargetDim::Auto)
    {
        TargetDim::Fixed(target) => (
            target,
            "given by --target-dim".to_string(),
            vec![rate_terms(target)],
        ),
        TargetDim::Auto => {
            let (target, scores) =
                choose_target_dim(&spectrum.eigenvalues, options.epsilon, budget.subroutine, n);
            (
                target,
                "auto: argmin over 2 <= k <= d of paper 002's (E.1) on the noisy eigenvalues (post-processing)"
                    .to_string(),
                scores,
            )
        }
    };
    let size_is = match neighbours {
        Neighbours::Replace => "public n".to_string(),
        Neighbours::AddRemove => format!("released n̂ = {rows}"),
    };
    let inner = match options.inner_mechanism {
        InnerMechanism::Pmm => {
            let (depth, depth_rule) = match options.depth {
                Some(depth) => (depth, "given by --depth".to_string()),
                None => (
                    choose_depth(
                        neighbours,
                        budget.subroutine,
                        target_dim,
                        n,
                        root_scale.map(|scale| scale.to_f64()),
                        memory_depth,
                    ),
                    format!(
                        "{} in d' = {target_dim} dimensions for the {size_is} (capped at {memory_depth} by memory)",
                        super::pmm::depth_rule_name(target_dim),
                    ),
                ),
            };
            let schedule = match root_scale {
                Some(scale) => LevelSchedule::new(
                    Neighbours::AddRemove,
                    budget.subroutine,
                    target_dim,
                    depth,
                    RootNoise::Released(scale),
                )?,
                None => LevelSchedule::new(
                    Neighbours::Replace,
                    budget.subroutine,
                    target_dim,
                    depth,
                    RootNoise::InSchedule,
                )?,
            };
            Inner::Pmm {
                schedule,
                geometry: CellGeometry::new(target_dim, depth),
                depth_rule,
            }
        }
        InnerMechanism::Psmm => plan_psmm(run, &budget, target_dim, n, root_scale, &size_is)?,
    };
    let projection = Projection::new(
        moments.mean.clone(),
        spectrum.top_vectors(target_dim),
        &inner.cells_per_axis(),
    );
    timings.push(PhaseTiming {
        phase: "covariance release and eigendecomposition",
        seconds: started.elapsed().as_secs_f64(),
    });

    // Pass 2: project and bin on the subroutine's partition; then the subroutine's release.
    let started = Instant::now();
    let (cells, binning) = match &inner {
        Inner::Pmm { geometry, .. } => bin_projected(run, &value_axes, &projection, *geometry)?,
        Inner::Psmm { grid, .. } => {
            let bar = run
                .progress
                .phase("project", run.source.row_count(), "rows");
            let counts = bin_with(run, &value_axes, &projection, &GridBinner::new(*grid), &bar)?;
            bar.finish();
            (counts, super::psmm::BINNING.to_string())
        }
    };
    timings.push(PhaseTiming {
        phase: "projection pass",
        seconds: started.elapsed().as_secs_f64(),
    });
    let started = Instant::now();
    let (released, flow) = match &inner {
        Inner::Pmm { schedule, .. } => (
            release_leaf_counts(
                cells,
                schedule,
                root_scale.map(|_| rows),
                &seeds.noise,
                options.consistency,
                seeds.post_processing,
            ),
            None,
        ),
        Inner::Psmm { grid, budget, .. } => {
            let noisy = noisy_cell_counts(
                &cells,
                budget.cell_scale,
                &seeds.noise,
                INNER_PSMM_NOISE_STREAM,
            );
            drop(cells);
            // M = n or n̂ ≥ 2 (release_moments refuses fewer rows).
            let flow = project_to_probability(grid, &noisy, rows, run.memory_limit())?;
            (flow.masses.clone(), Some(flow))
        }
    };
    let root_count: u64 = released.iter().sum();
    timings.push(PhaseTiming {
        phase: match inner {
            Inner::Pmm { .. } => "noise and consistency",
            Inner::Psmm { .. } => "noise and d_BL projection",
        },
        seconds: started.elapsed().as_secs_f64(),
    });

    let started = Instant::now();
    let counts = match options.rows {
        Some(rows) => allocate_rows(&released, rows),
        None => released,
    };
    let seed = seeds.post_processing.rotate_left(17);
    let sampler = match &inner {
        Inner::Pmm { geometry, .. } => {
            LeafSampler::new(*geometry, &counts, options.placement, seed)
        }
        Inner::Psmm { grid, .. } => LeafSampler::on_grid(*grid, &counts, options.placement, seed),
    };
    let generator = LiftedRows {
        sampler,
        projection: &projection,
    };
    drop(counts);
    let (sink, total_rows) = write_table(
        run,
        &generator,
        "sample, lift and write",
        started,
        &mut timings,
    )?;

    let shares = LowdimShares {
        noisy_n: root_scale.map(|scale| 1.0 / scale.to_f64()),
        covariance: moments.covariance_release.epsilon_spent,
        mean: moments.mean_release.epsilon_spent,
        subroutine: match &inner {
            // Level 0 of an add-remove schedule is the n̂ already counted above.
            Inner::Pmm { schedule, .. } => schedule.spent_epsilon() - schedule.level_epsilon(0),
            Inner::Psmm { budget, .. } => budget.cell_epsilon(),
        },
    };
    let epsilon_spent =
        shares.noisy_n.unwrap_or(0.0) + shares.covariance + shares.mean + shares.subroutine;
    // The inner bound is in the unit cube of the projected coordinates; the lift is
    // ‖widths‖₂-Lipschitz from (u, ℓ∞) to (x, ℓ∞).
    let lift_factor = projection.lift_lipschitz();
    let (inner_bound, inner_formula, inner_parameters) = match inner {
        Inner::Pmm {
            schedule,
            geometry,
            depth_rule,
        } => (
            schedule.accuracy_bound(n),
            PMM_ACCURACY_FORMULA,
            InnerParameters::Pmm(pmm_parameters(&schedule, geometry, depth_rule, options)),
        ),
        Inner::Psmm {
            grid,
            budget,
            normaliser,
            cells_rule,
        } => (
            psmm_accuracy_bound(&grid, budget.cell_scale, normaliser, rows),
            PSMM_ACCURACY_FORMULA,
            InnerParameters::Psmm(psmm_parameters(
                &grid,
                &budget,
                cells_rule,
                normaliser,
                rows,
                flow.as_ref(),
                options.placement,
            )),
        ),
    };
    let report = RunReport {
        tool: ToolInfo::current(),
        mechanism: "lowdim",
        guarantee: run.guarantee(epsilon_spent),
        input: run.input_info(),
        parameters: MechanismParameters::Lowdim(Box::new(LowdimParameters {
            target_dim,
            target_dim_rule,
            target_dim_criterion: criterion
                .iter()
                .map(|terms| RateTermsInfo {
                    target_dim: terms.target_dim,
                    tail: terms.tail,
                    private_pca: terms.private_pca,
                    synthetic: terms.synthetic,
                    total: terms.total(),
                })
                .collect(),
            inner_mechanism: inner_name(options.inner_mechanism),
            epsilon_shares: shares,
            quantisation: format!(
                "each normalised value is replaced by the midpoint of its cell among 2^{VALUE_CELL_BITS} per column \
                 (error <= 2^-{}), in both passes; Gram sums are exact integers",
                VALUE_CELL_BITS + 1
            ),
            covariance_noise: grid_noise_info(&moments.covariance_release, neighbours, true),
            mean_noise: grid_noise_info(&moments.mean_release, neighbours, false),
            private_mean: moments.mean.clone(),
            radius: projection.radius,
            subroutine_box: projection
                .lower
                .iter()
                .zip(&projection.widths)
                .map(|(&low, &width)| [low, low + width])
                .collect(),
            noisy_eigenvalues: spectrum.eigenvalues.clone(),
            inner: inner_parameters,
        })),
        release: ReleaseInfo {
            root_count,
            root_count_is: match neighbours {
                Neighbours::AddRemove => "released noisy count n̂",
                Neighbours::Replace => "public n",
            },
            synthetic_rows: total_rows,
        },
        accuracy: AccuracyBound {
            expected_w1_bound: lift_factor * inner_bound,
            units: "normalised l-infinity units on [0,1]^d (multiply axis k by hi_k - lo_k for column units)",
            n: rows,
            formula: inner_formula,
        },
        device: binning.clone(),
    };
    let mut diagnostics = Diagnostics::new(&stats, &run.column_names(), run.threads, binning);
    diagnostics.timings_seconds = timings;
    commit_outputs(run.outputs, report, diagnostics, sink)
}

/// The report's name of the subroutine.
fn inner_name(inner: InnerMechanism) -> &'static str {
    match inner {
        InnerMechanism::Pmm => "pmm",
        InnerMechanism::Psmm => "psmm",
    }
}

const PMM_ACCURACY_FORMULA: &str = "subroutine error only: E W1(projected data, synthetic data before clamping) <= ||box widths||_2 * \
     [(2*sqrt(2)/n) * sum_j sigma_j * Delta_{j-1} + 2^-floor(r/d')] (dissertation Thm 3.9 in the \
     subroutine's unit cube); the PCA terms of paper 002 Thm 4.2 have unknown constants (see \
     target_dim_criterion); clamping at most doubles the total (Prop 3.2)";

const PSMM_ACCURACY_FORMULA: &str = "subroutine error only: E W1(projected data, synthetic data before clamping) <= ||box widths||_2 * \
     [1/k + 2*(sqrt(Var lambda)*H + E|M - n|)/M] (the psmm bound, dissertation Thm 3.6 with dyadic chaining, in the \
     subroutine's unit cube, M = n or n̂); the PCA terms of paper 002 Thm 4.2 have unknown constants (see \
     target_dim_criterion); clamping at most doubles the total (Prop 3.2)";

/// The subroutine on the projected coordinates, fixed from released values before pass 2.
enum Inner {
    /// PMM on the dyadic partition of depth r in d' dimensions.
    Pmm {
        schedule: LevelSchedule,
        geometry: CellGeometry,
        depth_rule: String,
    },
    /// PSMM on k^{d'} equal cells of the subroutine box's unit cube: its d_BL projection is in those
    /// normalised coordinates (the box's per-axis widths differ, see `projection`).
    Psmm {
        grid: RegularGrid,
        budget: PsmmBudget,
        normaliser: Normaliser,
        cells_rule: String,
    },
}

impl Inner {
    /// Cells on each principal axis, for the projection's quantiser.
    fn cells_per_axis(&self) -> Vec<u32> {
        match self {
            Inner::Pmm { geometry, .. } => leaf_cells_per_axis(geometry),
            Inner::Psmm { grid, .. } => vec![grid.cells_per_axis(); grid.dims()],
        }
    }
}

/// The inner PSMM's grid and noise, from released values only: k^{d'} cells over the subroutine box
/// (`--cells`, or m ≈ ε_s·n for the public n or the released n̂, capped as PSMM caps it), refused when
/// its flow network does not fit in memory.
fn plan_psmm(
    run: &RunInput,
    budget: &LowdimBudget,
    target_dim: usize,
    n: f64,
    root_scale: Option<RationalScale>,
    size_is: &str,
) -> Result<Inner> {
    // n̂ is released before with its own share, so the cells get all of ε_s.
    let psmm_budget = PsmmBudget::new(run.options.neighbours, budget.subroutine, None)?;
    let grid_for = |cells: f64| {
        super::psmm::grid_for(target_dim, cells, run.memory_limit()).map_err(|error| match error {
            Error::BadInput(reason) => Error::bad_input(format!(
                "lowdim's inner psmm on d' = {target_dim} projected coordinates: {reason}"
            )),
            other => other,
        })
    };
    let (grid, cells_rule) = match run.options.cells {
        Some(cells) => (
            grid_for(cells as f64)?,
            format!("--cells {cells} rounded to k^d' with k = round(cells^(1/d')), d' = {target_dim}"),
        ),
        None => (
            grid_for(super::psmm::default_cells(budget.subroutine, n))?,
            format!(
                "k = max(1, round(min(epsilon_s n, {DEFAULT_MAX_CELLS:e})^(1/d'))) in d' = {target_dim} \
                 dimensions for the {size_is}, epsilon_s = {}",
                budget.subroutine
            ),
        ),
    };
    Ok(Inner::Psmm {
        grid,
        budget: psmm_budget,
        normaliser: match root_scale {
            Some(scale) => Normaliser::ReleasedCount(scale),
            None => Normaliser::PublicN,
        },
        cells_rule,
    })
}

fn grid_noise_info(
    release: &GridRelease,
    neighbours: Neighbours,
    covariance: bool,
) -> GridNoiseInfo {
    let unit = (release.grid_bits as f64).exp2();
    GridNoiseInfo {
        released: match (neighbours, covariance) {
            (Neighbours::Replace, true) => "centred covariance entries M_ij, i <= j",
            (Neighbours::Replace, false) => "mean per coordinate",
            (Neighbours::AddRemove, true) => {
                "Gram sums G_ij = sum_rows x_i x_j, i <= j (M = (G - S S^T/n̂)/(n̂ - 1))"
            }
            (Neighbours::AddRemove, false) => "column sums S_i (mean = S/n̂)",
        },
        grid_bits: release.grid_bits,
        entry_sensitivity_grid_units: release.entry_sensitivity,
        scale_grid_units: release.scale.to_f64(),
        scale_num: release.scale.num(),
        scale_den: release.scale.den(),
        scale: release.scale_in_units(),
        diagonal_scale: release.diagonal_scale.map(|scale| scale.to_f64() / unit),
    }
}

/// Pass 2 on the chosen device: the inner partition's leaf histogram and the binner's report line.
fn bin_projected(
    run: &RunInput,
    value_axes: &[AxisPlan],
    projection: &Projection,
    geometry: CellGeometry,
) -> Result<(Vec<u64>, String)> {
    let bar = run
        .progress
        .phase("project", run.source.row_count(), "rows");
    let outcome = match ChosenBinner::for_run(run.options.device, geometry)? {
        ChosenBinner::Cpu(binner, line) => {
            (bin_with(run, value_axes, projection, &binner, &bar)?, line)
        }
        #[cfg(feature = "gpu")]
        ChosenBinner::Gpu(binner, line) => {
            (bin_with(run, value_axes, projection, &binner, &bar)?, line)
        }
    };
    bar.finish();
    Ok(outcome)
}

fn bin_with<B: Binner>(
    run: &RunInput,
    value_axes: &[AxisPlan],
    projection: &Projection,
    binner: &B,
    bar: &crate::progress::PhaseBar,
) -> Result<Vec<u64>> {
    let (workers, _): (_, ScanStats) = scan_quantised_rows(
        run.source,
        run.columns,
        value_axes,
        run.options.nulls,
        &|| Ok(ProjectingWorker::new(binner.worker()?, projection)),
        bar,
    )?;
    binner.finish(workers.into_iter().map(|worker| worker.inner).collect())
}

/// Synthetic rows: the subroutine's points in the projected unit cube, lifted to data space and clamped.
struct LiftedRows<'a> {
    sampler: LeafSampler,
    projection: &'a Projection,
}

impl RowGenerator for LiftedRows<'_> {
    fn total_rows(&self) -> u64 {
        self.sampler.total_rows()
    }

    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        let mut unit = vec![Vec::new(); self.projection.target_dims()];
        self.sampler.sample_rows(start, rows, &mut unit);
        self.projection.lift(&unit, columns);
    }
}
