//! lowdim's plan and release (docs/mechanisms/lowdim.md; paper 002, Algorithm 1). The plan splits ε
//! ([`LowdimBudget`]); the release runs pass 1 (exact Gram sums of the quantised rows), releases n̂
//! (add-remove), the covariance and the mean, picks d' from the noisy spectrum, then composes the inner
//! mechanism's own plan — PMM's or PSMM's, built from released values only — and runs it on the
//! projected coordinates (pass 2). Sampled points are lifted back and clamped to [0,1]^d.

use super::basis::{choose_target_dim, RateTerms, Spectrum};
use super::covariance::{release_moments, GramAccumulator, GramSums, GridRelease, VALUE_CELL_BITS};
use super::options::{InnerOptions, LowdimOptions, TargetDim};
use super::projection::{leaf_cells_per_axis, ProjectingWorker, Projection};
use super::report::{GridNoiseInfo, InnerParameters, LowdimParameters, LowdimShares, RateTermsInfo};
use super::LowdimBudget;
use crate::binner::device::ChosenBinner;
use crate::binner::grid::GridBinner;
use crate::binner::pass::DataPass;
use crate::binner::{AxisPlan, Binner};
use crate::error::{Error, Result};
use crate::geometry::grid::RegularGrid;
use crate::mechanism::pmm::plan::{check_depth_fits, root_count_is, TreeSize};
use crate::mechanism::pmm::{PmmOptions, PmmPlan};
use crate::mechanism::psmm::plan::{default_cells, grid_for, BINNING, DEFAULT_MAX_CELLS};
use crate::mechanism::psmm::{Normaliser, PsmmPlan};
use crate::mechanism::{
    AccuracyBound, MechanismParameters, PublicInputs, Release, ReleasedMeasure, NORMALISED_UNITS,
};
use crate::privacy::{Budget, Neighbours, NoisyRowCount, RunSeeds};
use crate::progress::Timings;

const PMM_ACCURACY_FORMULA: &str = "subroutine error only: E W1(projected data, synthetic data before clamping) <= ||box widths||_2 * \
     [(1/n) * sum_j (2*sqrt(2)*sigma_j + f_j) * Delta_{j-1} + 2^-floor(r/d')] (dissertation Thm 3.9 in the \
     subroutine's unit cube, f_j the consistency's pruning floor ceil(k*sigma_j)); the PCA terms of \
     paper 002 Thm 4.2 have unknown constants (see \
     target_dim_criterion); clamping at most doubles the total (Prop 3.2)";

const PSMM_ACCURACY_FORMULA: &str = "subroutine error only: E W1(projected data, synthetic data before clamping) <= ||box widths||_2 * \
     [1/k + 2*(sqrt(Var lambda)*H + E|M - n|)/M] (the psmm bound, dissertation Thm 3.6 with dyadic chaining, in the \
     subroutine's unit cube, M = n or n̂); the PCA terms of paper 002 Thm 4.2 have unknown constants (see \
     target_dim_criterion); clamping at most doubles the total (Prop 3.2)";

/// A lowdim run's plan: the ε split and the options; the inner plan is composed in the release, from
/// released values (n̂, d') only.
#[derive(Clone, Debug)]
pub struct LowdimPlan {
    /// The run's public inputs (lowdim reads no encoding).
    public: PublicInputs<'static>,
    budget: LowdimBudget,
    row_count: Option<NoisyRowCount>,
    options: LowdimOptions,
}

/// The subroutine on the projected coordinates, fixed from released values before pass 2.
enum Inner {
    Pmm(PmmPlan),
    /// PSMM on k^{d'} equal cells of the subroutine box's unit cube: its d_BL projection is in those
    /// normalised coordinates (the box's per-axis widths differ, see `projection`).
    Psmm { plan: PsmmPlan, grid: RegularGrid, cells_rule: String },
}

impl LowdimPlan {
    pub fn new(public: &PublicInputs, options: &LowdimOptions) -> Result<Self> {
        let budget = LowdimBudget::split(public.epsilon, public.neighbours, options.noisy_n_share)?;
        if let TargetDim::Fixed(target) = options.target_dim {
            if target > public.dims {
                return Err(Error::bad_input(format!(
                    "--target-dim {target} exceeds the number of columns ({})",
                    public.dims
                )));
            }
        }
        if let InnerOptions::Pmm(PmmOptions { depth: Some(depth), .. }) = &options.inner {
            // Before reading any data: the inner PMM's memory does not depend on d'.
            check_depth_fits(public, *depth)?;
        }
        let row_count = match budget.noisy_n {
            Some(epsilon_n) => Some(NoisyRowCount::plan(epsilon_n)?),
            None => None,
        };
        Ok(LowdimPlan {
            public: PublicInputs {
                encoding: None,
                ..*public
            },
            budget,
            row_count,
            options: options.clone(),
        })
    }

    pub fn release(
        &self,
        data: &DataPass,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<Release> {
        let (dims, neighbours, epsilon) = (data.dims(), self.public.neighbours, self.public.epsilon);
        let budget = &self.budget;

        // Pass 1: exact sums of the quantised rows.
        let value_axes: Vec<AxisPlan> = data
            .bounds
            .iter()
            .map(|bounds| AxisPlan::new(bounds.clone(), VALUE_CELL_BITS))
            .collect();
        let (sums, scan) = timings.time("covariance pass", || {
            let (workers, scan) = data.fold_quantised_rows("covariance", &value_axes, &|| {
                Ok(GramAccumulator::new(dims))
            })?;
            let sums = GramSums::merge(dims, workers.into_iter().map(|worker| worker.sums));
            Ok::<_, Error>((sums.summed_with(|words| data.sum_over_ranks(words)), scan))
        })?;

        // The row count the releases may use: public n (replace) or a released n̂ (add-remove); then
        // the moments, the basis, d' and the inner plan, all from released values.
        let (rows, moments, spectrum, target_dim, target_dim_rule, criterion, inner, projection) =
            timings.time("covariance release and eigendecomposition", || {
                let rows = match self.row_count {
                    Some(row_count) => row_count.release(sums.rows, &seeds.noise),
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
                let (target_dim, target_dim_rule, criterion) = match self.options.target_dim {
                    TargetDim::Fixed(target) => (
                        target,
                        "given by --target-dim".to_string(),
                        vec![RateTerms::at(&spectrum.eigenvalues, target, epsilon, budget.subroutine, n)],
                    ),
                    TargetDim::Auto => {
                        let (target, scores) =
                            choose_target_dim(&spectrum.eigenvalues, epsilon, budget.subroutine, n);
                        (
                            target,
                            "auto: argmin over 2 <= k <= d of paper 002's (E.1) on the noisy eigenvalues (post-processing)"
                                .to_string(),
                            scores,
                        )
                    }
                };
                let inner = self.inner_plan(target_dim, rows)?;
                let cells_per_axis = match &inner {
                    Inner::Pmm(plan) => {
                        leaf_cells_per_axis(&plan.geometry().expect("the inner depth is known"))
                    }
                    Inner::Psmm { grid, .. } => vec![grid.cells_per_axis(); grid.dims()],
                };
                let projection = Projection::new(
                    moments.mean.clone(),
                    spectrum.top_vectors(target_dim),
                    &cells_per_axis,
                );
                Ok::<_, Error>((
                    rows, moments, spectrum, target_dim, target_dim_rule, criterion, inner, projection,
                ))
            })?;

        // Pass 2: project and bin on the subroutine's partition; then the subroutine's release.
        let (cells, binning) = timings.time("projection pass", || match &inner {
            Inner::Pmm(plan) => {
                let geometry = plan.geometry().expect("the inner depth is known");
                match data.agreed(ChosenBinner::for_run(plan.device(), geometry))? {
                    ChosenBinner::Cpu(binner, line) => {
                        Ok((bin_projected(data, &value_axes, &projection, &binner)?, line))
                    }
                    #[cfg(feature = "gpu")]
                    ChosenBinner::Gpu(binner, line) => {
                        Ok((bin_projected(data, &value_axes, &projection, &binner)?, line))
                    }
                }
            }
            Inner::Psmm { grid, .. } => Ok::<_, Error>((
                bin_projected(data, &value_axes, &projection, &GridBinner::new(*grid))?,
                BINNING.to_string(),
            )),
        })?;
        let (released, inner_bound, inner_formula, inner_parameters, subroutine_epsilon) =
            match &inner {
                Inner::Pmm(plan) => {
                    let released = timings
                        .time_in_parts("noise and consistency", |parts| plan.release_leaves(cells, seeds, parts))?;
                    let schedule = plan.schedule().expect("the inner depth is known");
                    (
                        ReleasedMeasure::Leaves {
                            geometry: plan.geometry().expect("the inner depth is known"),
                            counts: released,
                        },
                        plan.accuracy_bound(schedule, rows as f64),
                        PMM_ACCURACY_FORMULA,
                        InnerParameters::Pmm(plan.parameters(schedule)),
                        // Level 0 of an add-remove schedule is the n̂ already counted above.
                        schedule.spent_epsilon() - schedule.level_epsilon(0),
                    )
                }
                Inner::Psmm { plan, grid, cells_rule } => {
                    let mut phases = Timings::default();
                    // M = n or n̂ ≥ 2 (release_moments refuses fewer rows).
                    let (masses, mass, flow) = timings.time("noise and d_BL projection", || {
                        plan.release_cells(grid, &cells, rows, Some(rows), seeds, &mut phases)
                    })?;
                    (
                        ReleasedMeasure::Grid {
                            grid: *grid,
                            counts: masses,
                        },
                        plan.accuracy_bound(grid, rows),
                        PSMM_ACCURACY_FORMULA,
                        InnerParameters::Psmm(plan.parameters(
                            grid,
                            cells_rule.clone(),
                            mass,
                            flow.as_ref(),
                        )),
                        plan.cell_budget().cell_epsilon(),
                    )
                }
            };
        let root_count = released.total();

        let shares = LowdimShares {
            noisy_n: self.row_count.map(|row_count| row_count.spent_epsilon()),
            covariance: moments.covariance_release.epsilon_spent,
            mean: moments.mean_release.epsilon_spent,
            subroutine: subroutine_epsilon,
        };
        let mut spent = Budget::new(epsilon);
        if let Some(noisy_n) = shares.noisy_n {
            spent.spend("n̂", noisy_n);
        }
        spent.spend("covariance", shares.covariance);
        spent.spend("mean", shares.mean);
        spent.spend("subroutine", shares.subroutine);
        // The inner bound is in the unit cube of the projected coordinates; the lift is
        // ‖widths‖₂-Lipschitz from (u, ℓ∞) to (x, ℓ∞).
        let lift_factor = projection.lift_lipschitz();
        let parameters = LowdimParameters {
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
            inner_mechanism: match inner {
                Inner::Pmm(_) => "pmm",
                Inner::Psmm { .. } => "psmm",
            },
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
        };
        Ok(Release {
            mechanism: "lowdim",
            budget: spent,
            parameters: MechanismParameters::Lowdim(Box::new(parameters)),
            root_count,
            root_count_is: root_count_is(neighbours),
            accuracy: AccuracyBound {
                expected_w1_bound: lift_factor * inner_bound,
                units: NORMALISED_UNITS,
                n: rows,
                formula: inner_formula,
                holds_for_table: true,
            },
            measure: ReleasedMeasure::Lifted {
                inner: Box::new(released),
                projection,
            },
            anonymity: None,
            scan,
            covariance_loss: None,
            binning,
            output_phase: "sample, lift and write",
        })
    }

    /// The subroutine's plan in d' dimensions at ε_s, for the public n or the released n̂: PMM's plan
    /// (its depth rule for that size), or PSMM's on k^{d'} cells of the subroutine box (`--cells`, or
    /// m ≈ ε_s·n capped as PSMM caps it), refused when its flow network does not fit in memory.
    fn inner_plan(&self, target_dim: usize, rows: u64) -> Result<Inner> {
        let public = &self.public;
        let subroutine = self.budget.subroutine;
        let size_is = match self.row_count {
            None => "public n".to_string(),
            Some(_) => format!("released n̂ = {rows}"),
        };
        match &self.options.inner {
            InnerOptions::Pmm(options) => {
                let size = match self.row_count {
                    Some(row_count) => TreeSize::AlreadyReleased {
                        n_hat: rows,
                        row_count,
                    },
                    None => TreeSize::Public(rows),
                };
                let context = format!(" in d' = {target_dim} dimensions");
                Ok(Inner::Pmm(PmmPlan::with_size(
                    public, target_dim, subroutine, size, options, &context,
                )?))
            }
            InnerOptions::Psmm(options) => {
                let grid_for = |cells: f64| {
                    grid_for(target_dim, cells, public.memory_limit).map_err(|error| match error {
                        Error::BadInput(reason) => Error::bad_input(format!(
                            "lowdim's inner psmm on d' = {target_dim} projected coordinates: {reason}"
                        )),
                        other => other,
                    })
                };
                let (grid, cells_rule) = match options.cells {
                    Some(cells) => (
                        grid_for(cells as f64)?,
                        format!(
                            "--cells {cells} rounded to k^d' with k = round(cells^(1/d')), d' = {target_dim}"
                        ),
                    ),
                    None => (
                        grid_for(default_cells(subroutine, rows as f64))?,
                        format!(
                            "k = max(1, round(min(epsilon_s n, {DEFAULT_MAX_CELLS:e})^(1/d'))) in d' = {target_dim} \
                             dimensions for the {size_is}, epsilon_s = {subroutine}"
                        ),
                    ),
                };
                let normaliser = match self.row_count {
                    Some(row_count) => Normaliser::ReleasedCount(row_count.scale),
                    None => Normaliser::PublicN,
                };
                // n̂ was released before with its own share, so the cells get all of ε_s.
                let plan = PsmmPlan::inner(public, grid, cells_rule.clone(), subroutine, normaliser)?;
                Ok(Inner::Psmm {
                    plan,
                    grid,
                    cells_rule,
                })
            }
        }
    }
}

fn grid_noise_info(release: &GridRelease, neighbours: Neighbours, covariance: bool) -> GridNoiseInfo {
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

/// Pass 2: every row projected onto the subspace and binned by `binner` (the inner partition).
fn bin_projected<B: Binner>(
    data: &DataPass,
    value_axes: &[AxisPlan],
    projection: &Projection,
    binner: &B,
) -> Result<Vec<u64>> {
    let (workers, _) = data.fold_quantised_rows("project", value_axes, &|| {
        Ok(ProjectingWorker::new(binner.worker()?, projection))
    })?;
    let mut cells = binner.finish(workers.into_iter().map(|worker| worker.inner).collect())?;
    data.sum_over_ranks(&mut cells);
    Ok(cells)
}
