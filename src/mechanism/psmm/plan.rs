//! PSMM's plan and release (docs/mechanisms/psmm.md; dissertation Algorithm 1). The plan fixes, from
//! public inputs only, the budget (Lap_Z on every cell, and n̂ first when the grid is chosen under
//! add-remove), the grid or the rule that picks it from n̂, and the normaliser M; the release bins the
//! data on the grid, noises every cell and projects the noisy counts onto the probability measures.

use super::options::PsmmOptions;
use super::report::PsmmParameters;
use super::{
    accuracy_bound, check_projection_fits, noisy_cell_counts, project_to_probability, Normaliser,
    Projection, PsmmBudget, ACCURACY_FORMULA,
};
use crate::binner::pass::DataPass;
use crate::error::{Error, Result};
use crate::geometry::grid::RegularGrid;
use crate::mechanism::options::value_name;
use crate::mechanism::{
    AccuracyBound, MechanismParameters, PublicInputs, Release, ReleasedMeasure, NORMALISED_UNITS,
};
use crate::privacy::{Budget, Neighbours, NoiseStream, RunSeeds};
use crate::progress::Timings;
use crate::sampler::Placement;

/// The binner line of the report and diagnostics (PSMM bins on the CPU only).
pub const BINNING: &str = "cpu (regular grid)";

/// The default m ≈ εN is capped here: the exact projection of 10^6 cells takes minutes on two cores
/// (d = 2: 3–6 min, d = 3: 3 min, measured), and it grows faster than linearly. `--cells` may ask
/// for more, up to what memory allows.
pub const DEFAULT_MAX_CELLS: f64 = 1e6;

/// The grid, or how it will be chosen.
#[derive(Clone, Debug)]
enum GridChoice {
    Known { grid: RegularGrid, rule: String },
    /// Chosen from the n̂ this plan releases; the data are binned first on `planned`.
    FromReleasedNHat { planned: RegularGrid },
}

/// A PSMM run's plan.
#[derive(Clone, Debug)]
pub struct PsmmPlan {
    epsilon: f64,
    dims: usize,
    budget: PsmmBudget,
    grid: GridChoice,
    normaliser: Normaliser,
    /// The stream of the cells' noise: PSMM's own, or lowdim's inner PSMM's.
    stream: NoiseStream,
    memory_limit: u64,
    placement: Placement,
    /// The input's row count: n under replace, where it is public (and, across ranks, the whole table's
    /// where each rank's pass reads its share).
    file_rows: u64,
}

impl PsmmPlan {
    /// PSMM on the input's columns.
    pub fn new(public: &PublicInputs, options: &PsmmOptions) -> Result<Self> {
        let (dims, epsilon, neighbours) = (public.dims, public.epsilon, public.neighbours);
        let releases_n_hat = neighbours == Neighbours::AddRemove && options.cells.is_none();
        let budget = PsmmBudget::new(
            neighbours,
            epsilon,
            releases_n_hat.then_some(options.noisy_n_share),
        )?;
        let (grid, normaliser) = match (options.cells, budget.row_count) {
            (Some(cells), _) => (
                GridChoice::Known {
                    grid: grid_for(dims, cells as f64, public.memory_limit)?,
                    rule: format!("--cells {cells} rounded to k^d with k = round(cells^(1/d))"),
                },
                match neighbours {
                    Neighbours::Replace => Normaliser::PublicN,
                    Neighbours::AddRemove => Normaliser::NoisyTotal,
                },
            ),
            (None, None) => (
                GridChoice::Known {
                    grid: grid_for(
                        dims,
                        default_cells(epsilon, public.file_rows as f64),
                        public.memory_limit,
                    )?,
                    rule: format!(
                        "k = max(1, round(min(epsilon n, {DEFAULT_MAX_CELLS:e})^(1/d))) for the public n"
                    ),
                },
                Normaliser::PublicN,
            ),
            // Plan with the file's row count, bin, release n̂, and bin again only if n̂ asks for
            // another grid.
            (None, Some(row_count)) => (
                GridChoice::FromReleasedNHat {
                    planned: grid_for(
                        dims,
                        default_cells(epsilon, public.file_rows as f64),
                        public.memory_limit,
                    )?,
                },
                Normaliser::ReleasedCount(row_count.scale),
            ),
        };
        Ok(PsmmPlan {
            epsilon,
            dims,
            budget,
            grid,
            normaliser,
            stream: NoiseStream::PsmmCells,
            memory_limit: public.memory_limit,
            placement: public.placement,
            file_rows: public.file_rows,
        })
    }

    /// lowdim's subroutine: PSMM on `grid` (the projected unit cube) with all of `epsilon` on the cells,
    /// normalised by the public n or by the n̂ lowdim released (at `n_hat_scale`).
    pub fn inner(
        public: &PublicInputs,
        grid: RegularGrid,
        rule: String,
        epsilon: f64,
        normaliser: Normaliser,
    ) -> Result<Self> {
        Ok(PsmmPlan {
            epsilon,
            dims: grid.dims(),
            budget: PsmmBudget::new(public.neighbours, epsilon, None)?,
            grid: GridChoice::Known { grid, rule },
            normaliser,
            stream: NoiseStream::LowdimInnerPsmmCells,
            memory_limit: public.memory_limit,
            placement: public.placement,
            file_rows: public.file_rows,
        })
    }

    /// The grid, when it is already known.
    #[cfg(any(test, feature = "internals"))]
    pub fn grid(&self) -> Option<RegularGrid> {
        match &self.grid {
            GridChoice::Known { grid, .. } => Some(*grid),
            GridChoice::FromReleasedNHat { .. } => None,
        }
    }

    pub fn cell_budget(&self) -> &PsmmBudget {
        &self.budget
    }

    /// Bins the data on the grid (releasing n̂ first when the plan says so), noises every cell and
    /// projects.
    pub fn release(
        &self,
        data: &DataPass,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<Release> {
        let (grid, true_counts, scan, rule, n_hat) = timings.time("bin", || match &self.grid {
            GridChoice::Known { grid, rule } => {
                let (counts, scan) = data.grid_counts(grid)?;
                Ok((*grid, counts, scan, rule.clone(), None))
            }
            GridChoice::FromReleasedNHat { planned } => {
                let row_count = self.budget.row_count.expect("planned with n̂");
                let (mut counts, scan) = data.grid_counts(planned)?;
                let n_hat = row_count.release(scan.rows_binned, &seeds.noise);
                let grid = grid_for(
                    self.dims,
                    default_cells(self.epsilon, n_hat as f64),
                    self.memory_limit,
                )?;
                if grid != *planned {
                    counts = data.grid_counts(&grid)?.0;
                }
                let rule = format!(
                    "k = max(1, round(min(epsilon n̂, {DEFAULT_MAX_CELLS:e})^(1/d))) for the released n̂ = {n_hat}"
                );
                Ok((grid, counts, scan, rule, Some(n_hat)))
            }
        })?;
        let (masses, mass, projection) =
            self.release_cells(&grid, &true_counts, self.file_rows, n_hat, seeds, timings)?;
        drop(true_counts);
        Ok(Release {
            mechanism: "psmm",
            budget: self.budget(),
            parameters: MechanismParameters::Psmm(self.parameters(
                &grid,
                rule,
                mass,
                projection.as_ref(),
            )),
            root_count: mass,
            root_count_is: self.normaliser.describe(),
            accuracy: AccuracyBound {
                expected_w1_bound: accuracy_bound(
                    &grid,
                    self.budget.cell_scale,
                    self.normaliser,
                    mass,
                ),
                units: NORMALISED_UNITS,
                n: mass,
                formula: ACCURACY_FORMULA,
                holds_for_table: true,
            },
            measure: ReleasedMeasure::Grid {
                grid,
                counts: masses,
            },
            anonymity: None,
            scan,
            covariance_loss: None,
            binning: BINNING.to_string(),
            output_phase: "sample and write",
        })
    }

    /// Noise on every cell, then the projection onto the measures of mass M (the public n, the released
    /// n̂, or the noisy total, as the plan's normaliser says). Returns the projected masses, M and the
    /// projection (none when M = 0).
    pub fn release_cells(
        &self,
        grid: &RegularGrid,
        true_counts: &[u64],
        public_n: u64,
        n_hat: Option<u64>,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<(Vec<u64>, u64, Option<Projection>)> {
        let (noisy, mass) = timings.time("noise", || {
            let noisy =
                noisy_cell_counts(true_counts, self.budget.cell_scale, &seeds.noise, self.stream);
            let mass = match self.normaliser {
                Normaliser::PublicN => public_n,
                Normaliser::ReleasedCount(_) => n_hat.expect("released with the grid"),
                Normaliser::NoisyTotal => {
                    noisy.iter().map(|&c| i128::from(c)).sum::<i128>().max(1) as u64
                }
            };
            (noisy, mass)
        });
        let projection = timings.time("projection", || match mass {
            0 => Ok(None),
            _ => project_to_probability(grid, &noisy, mass, self.memory_limit).map(Some),
        })?;
        let masses = projection
            .as_ref()
            .map_or_else(|| vec![0; grid.cell_count()], |p| p.masses.clone());
        Ok((masses, mass, projection))
    }

    /// Cells first, then n̂ when this plan released it.
    pub fn budget(&self) -> Budget {
        let mut budget = Budget::new(self.epsilon);
        budget.spend("cells", self.budget.cell_epsilon());
        if let Some(row_count) = self.budget.row_count {
            budget.spend("n̂", row_count.spent_epsilon());
        }
        budget
    }

    /// The report's PSMM parameters (also lowdim's inner run): the grid, the cell noise and the projection.
    pub fn parameters(
        &self,
        grid: &RegularGrid,
        cells_rule: String,
        mass: u64,
        projection: Option<&Projection>,
    ) -> PsmmParameters {
        let budget = &self.budget;
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
            normaliser_is: self.normaliser.describe(),
            d_bl_to_noisy_measure: projection.map(|p| p.d_bl),
            solver: projection.map_or("none (M = 0)", |p| p.solver),
            placement: value_name(&self.placement),
        }
    }

    /// The accuracy bound of a release of mass `mass` on `grid`.
    pub fn accuracy_bound(&self, grid: &RegularGrid, mass: u64) -> f64 {
        accuracy_bound(grid, self.budget.cell_scale, self.normaliser, mass)
    }
}

/// The paper's m ≈ εN (Corollary 3.7), capped at [`DEFAULT_MAX_CELLS`].
pub fn default_cells(epsilon: f64, size: f64) -> f64 {
    (epsilon * size).min(DEFAULT_MAX_CELLS)
}

/// The grid of k = max(1, round(target^{1/d})) cells per axis, refused before any allocation when its
/// projection network would not fit in memory.
pub fn grid_for(dims: usize, target_cells: f64, memory_limit: u64) -> Result<RegularGrid> {
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
