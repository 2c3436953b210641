//! The mechanisms, each in its own folder, each in one shape (docs/design.md):
//!
//! - a **plan**, built from public inputs only ([`PublicInputs`] and the mechanism's own options): its
//!   budget shares, noise scales (rounded up by [`crate::privacy::noise_scale`]), noise streams
//!   ([`crate::privacy::NoiseStream`]), partition rule and the report's description of all of these;
//! - a **release** from the plan, which reads the private data only through a
//!   [`DataPass`] and returns a [`Release`]: the released measure, the budget it spent, and its report
//!   parameters.
//!
//! The synth driver then checks the budget (one place for every mechanism), samples the released
//! measure, writes the table and the reports.
//!
//! Each mechanism's folder also holds its typed options (`options.rs`, gathered in [`MechanismOptions`]) and
//! its flags (`args.rs`, on the common ones of [`args`]). The files a new mechanism touches outside its folder
//! are listed in docs/design.md, "How to add a mechanism".

pub mod args;
pub mod covloss;
pub mod lowdim;
pub mod options;
pub mod pe;
pub mod online;
pub mod pmm;
pub mod psmm;

pub use options::MechanismOptions;

use serde::Serialize;

use crate::binner::pass::DataPass;
use crate::binner::ScanStats;
use crate::encoding::Encoding;
use crate::error::{Error, Result};
use crate::geometry::grid::RegularGrid;
use crate::geometry::partition::CellGeometry;
use crate::privacy::{Budget, Neighbours, RunSeeds};
use crate::progress::Timings;
use crate::sampler::{allocate_rows, LeafSampler, Placement, RowGenerator, RowOrder};
use covloss::points::WeightedPoints;
use lowdim::projection::{LiftedRows, Projection};
use lowdim::report::{InnerParameters, LowdimParameters};
use pe::report::PeParameters;
use pmm::marginals::{CalibratedRows, MonotoneMap};
use pmm::pairs::{PairMap, PairMappedRows};
use pmm::refine::SparseLeaves;
use pmm::report::PmmParameters;
use psmm::report::PsmmParameters;

/// What a plan may depend on: the user's public choices, and the data's size only where it is public.
#[derive(Clone, Copy, Debug)]
pub struct PublicInputs<'a> {
    pub dims: usize,
    pub epsilon: f64,
    pub neighbours: Neighbours,
    /// The row count in the input's metadata. Public under replace; under add-remove a plan may use it
    /// only to guess how much work to prepare, never in anything released.
    pub file_rows: u64,
    /// Bytes the cell arrays may use.
    pub memory_limit: u64,
    pub threads: usize,
    /// Where synthetic points go in their cells (named in the report).
    pub placement: Placement,
    /// covloss and microagg: the public encoding of the used columns as bits (from the schema and the
    /// options, never from values).
    pub encoding: Option<&'a Encoding>,
}

/// One mechanism's plan.
pub enum Plan {
    Pmm(pmm::PmmPlan),
    Psmm(psmm::PsmmPlan),
    Lowdim(lowdim::LowdimPlan),
    Pe(pe::PePlan),
    /// covloss or microagg, on a public Boolean encoding of the columns.
    Encoded(covloss::EncodedPlan),
}

impl Plan {
    /// The plan of the mechanism `options` names, from public inputs only.
    pub fn new(public: &PublicInputs, options: &MechanismOptions) -> Result<Plan> {
        Ok(match options {
            MechanismOptions::Pmm(pmm) => Plan::Pmm(pmm::PmmPlan::new(public, pmm)?),
            MechanismOptions::Psmm(psmm) => Plan::Psmm(psmm::PsmmPlan::new(public, psmm)?),
            MechanismOptions::Lowdim(lowdim) => {
                Plan::Lowdim(lowdim::LowdimPlan::new(public, lowdim)?)
            }
            MechanismOptions::Pe(pe) => Plan::Pe(pe::PePlan::new(public, pe)?),
            MechanismOptions::Microagg(_) | MechanismOptions::Covloss(_) => {
                Plan::Encoded(covloss::EncodedPlan::new(public, options)?)
            }
        })
    }

    /// The release: the only step that reads the data.
    pub fn release(
        &self,
        data: &DataPass,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<Release> {
        match self {
            Plan::Pmm(plan) => plan.release(data, seeds, timings),
            Plan::Psmm(plan) => plan.release(data, seeds, timings),
            Plan::Lowdim(plan) => plan.release(data, seeds, timings),
            Plan::Pe(plan) => plan.release(data, seeds, timings),
            Plan::Encoded(plan) => plan.release(data, seeds, timings),
        }
    }
}

/// What a mechanism released, with its accounting and its description for the report.
pub struct Release {
    pub mechanism: &'static str,
    pub measure: ReleasedMeasure,
    /// What each release spent, with the rounded scales.
    pub budget: Budget,
    pub parameters: MechanismParameters,
    /// The released total (n̂ under add-remove, the public n under replace) and what it is.
    pub root_count: u64,
    pub root_count_is: &'static str,
    pub accuracy: AccuracyBound,
    /// Set only for a release whose guarantee is anonymity, NOT differential privacy (microagg): the
    /// guarantee's statement.
    pub anonymity: Option<String>,
    /// What the data pass saw (owner-only diagnostics).
    pub scan: ScanStats,
    /// covloss and microagg: the covariance loss of the released points against the data's exact second
    /// moment (owner-only diagnostics).
    pub covariance_loss: Option<f64>,
    /// The binner that ran, for the report and the diagnostics.
    pub binning: String,
    /// The name of the sampling-and-writing phase in the diagnostics.
    pub output_phase: &'static str,
}

/// A released measure: cell counts on a partition of [0,1]^d (or of a projected cube, lifted back), a
/// set of synthetic points, or weighted points on the bits of an encoding.
/// Drawing points from it is post-processing: any number of rows, any number of times.
pub enum ReleasedMeasure {
    /// Counts on the leaves of the dyadic partition.
    Leaves {
        geometry: CellGeometry,
        counts: Vec<u64>,
    },
    /// Counts on the leaves of the dyadic partition, listed where they are not 0: the joint tree's leaves cut
    /// finer (`--refine-share`), too many to list all.
    SparseLeaves { geometry: CellGeometry, leaves: SparseLeaves },
    /// Counts on the cubes of a regular grid.
    Grid { grid: RegularGrid, counts: Vec<u64> },
    /// A measure on lowdim's projected unit cube, lifted to data space and clamped.
    Lifted {
        inner: Box<ReleasedMeasure>,
        projection: Projection,
    },
    /// Private Evolution's synthetic points (flat, `dims` per point, normalised units), equally
    /// weighted; `rows` (the public n) is the default output size.
    Points {
        dims: usize,
        points: Vec<f64>,
        rows: u64,
    },
    /// A measure whose rows have each column mapped onto a released marginal (`--marginal-share`):
    /// `maps[k]` for column k, none where nothing was released; `value_cells[k]`: the cells of the
    /// marginal column k is mapped onto ([`pmm::marginals::ReleasedMarginals::value_cells`]).
    Calibrated {
        inner: Box<ReleasedMeasure>,
        maps: Vec<Option<MonotoneMap>>,
        value_cells: Vec<Option<u64>>,
    },
    /// A measure whose rows have the child of each mapped column pair moved onto a released 2-way
    /// marginal (`--pair-share`), in tree order.
    PairMapped {
        inner: Box<ReleasedMeasure>,
        maps: Vec<PairMap>,
    },
    /// covloss's and microagg's weighted points in [0,1]^p, p the bits of the run's encoding; `rows` (the
    /// public n) is the default output size. Rows are drawn from them and decoded by
    /// [`covloss::points::WeightedPoints::batch`], not as normalised numbers.
    Encoded { points: WeightedPoints, rows: u64 },
}

impl ReleasedMeasure {
    /// The released total mass.
    pub fn total(&self) -> u64 {
        match self {
            ReleasedMeasure::Leaves { counts, .. } | ReleasedMeasure::Grid { counts, .. } => {
                counts.iter().sum()
            }
            ReleasedMeasure::SparseLeaves { leaves, .. } => leaves.total(),
            ReleasedMeasure::Lifted { inner, .. }
            | ReleasedMeasure::Calibrated { inner, .. }
            | ReleasedMeasure::PairMapped { inner, .. } => inner.total(),
            ReleasedMeasure::Points { rows, .. } | ReleasedMeasure::Encoded { rows, .. } => *rows,
        }
    }

    /// Per column (of `dims`), how many equal cells of its bounds the drawn values are spread over as the
    /// release says: the leaf cells, the grid's cubes, or the released marginal a column is mapped onto.
    /// `None` where values are not tied to cells (lifted from a projection, points). From the plan's
    /// partition and released counts only. Integer columns are written inside these cells
    /// ([`crate::io::integer_cells`]).
    pub fn value_cells(&self, dims: usize) -> Vec<Option<u64>> {
        match self {
            ReleasedMeasure::Leaves { geometry, .. } | ReleasedMeasure::SparseLeaves { geometry, .. } => {
                leaf_value_cells(geometry)
            }
            ReleasedMeasure::Grid { grid, .. } => vec![Some(u64::from(grid.cells_per_axis())); dims],
            ReleasedMeasure::Calibrated { value_cells, .. } => value_cells.clone(),
            // A mapped child is put back onto its own released marginal.
            ReleasedMeasure::PairMapped { inner, .. } => inner.value_cells(dims),
            ReleasedMeasure::Lifted { .. } | ReleasedMeasure::Points { .. } | ReleasedMeasure::Encoded { .. } => {
                vec![None; dims]
            }
        }
    }

    /// A generator of synthetic rows in normalised units: the released total, or exactly `rows` spread
    /// over the cells in proportion ([`allocate_rows`]), in `order`. Every measure but
    /// [`ReleasedMeasure::Encoded`] (whose rows are categories and bits, not numbers, and i.i.d. draws in any
    /// order).
    pub fn rows(
        &self,
        rows: Option<u64>,
        placement: Placement,
        order: RowOrder,
        seed: u64,
    ) -> Result<Box<dyn RowGenerator + '_>> {
        Ok(match self {
            ReleasedMeasure::Leaves { geometry, counts: released } => Box::new(LeafSampler::new(
                *geometry,
                &rows_per_cell(released, rows),
                placement,
                order,
                seed,
            )),
            // An empty release spreads `--rows` over every leaf (allocate_rows), as many as the memory cap let the
            // refinement cut.
            ReleasedMeasure::SparseLeaves { geometry, leaves } if leaves.total() == 0 => {
                let every_leaf = vec![0; geometry.leaf_count()];
                Box::new(LeafSampler::new(*geometry, &rows_per_cell(&every_leaf, rows), placement, order, seed))
            }
            ReleasedMeasure::SparseLeaves { geometry, leaves } => Box::new(LeafSampler::sparse(
                *geometry,
                &leaves.codes,
                &rows_per_cell(&leaves.counts, rows),
                0,
                placement,
                order,
                seed,
            )),
            ReleasedMeasure::Grid { grid, counts: released } => Box::new(LeafSampler::on_grid(
                *grid,
                &rows_per_cell(released, rows),
                placement,
                order,
                seed,
            )),
            // The maps below act on each row alone: permuting the inner rows permutes theirs.
            ReleasedMeasure::Lifted { inner, projection } => Box::new(LiftedRows {
                inner: inner.rows(rows, placement, order, seed)?,
                projection,
            }),
            ReleasedMeasure::Points {
                dims,
                points,
                rows: released,
            } => Box::new(pe::PointRows::new(*dims, points, rows.unwrap_or(*released), order, seed)),
            ReleasedMeasure::Calibrated { inner, maps, .. } => Box::new(CalibratedRows {
                inner: inner.rows(rows, placement, order, seed)?,
                maps,
            }),
            ReleasedMeasure::PairMapped { inner, maps } => Box::new(PairMappedRows {
                inner: inner.rows(rows, placement, order, seed)?,
                maps,
            }),
            ReleasedMeasure::Encoded { .. } => {
                return Err(Error::internal("encoded points are drawn as encoded rows, not normalised numbers"))
            }
        })
    }
}

/// [`ReleasedMeasure::value_cells`] of the leaves of `geometry`: 2^{h_k(r)} cells on axis k.
pub fn leaf_value_cells(geometry: &CellGeometry) -> Vec<Option<u64>> {
    (0..geometry.dims()).map(|axis| Some(1u64 << geometry.axis_bits(axis))).collect()
}

/// What each cell is sampled with: the released counts themselves, unless `--rows` asks for another total
/// (then spread by [`allocate_rows`]). Borrowed, not copied: at 2^26 leaves a copy is 512 MB.
fn rows_per_cell(released: &[u64], rows: Option<u64>) -> std::borrow::Cow<'_, [u64]> {
    match rows {
        Some(rows) if rows != released.iter().sum::<u64>() => allocate_rows(released, rows).into(),
        _ => released.into(),
    }
}

/// What the mechanism chose; each mechanism has its own fields.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum MechanismParameters {
    Pmm(PmmParameters),
    Lowdim(Box<LowdimParameters>),
    Psmm(PsmmParameters),
    Pe(Box<PeParameters>),
    Covloss(Box<covloss::CovlossParameters>),
    Microagg(covloss::MicroaggParameters),
}

impl MechanismParameters {
    /// One line for the terminal summary.
    pub fn summary(&self) -> String {
        match self {
            MechanismParameters::Pmm(pmm) => {
                let mut summary = match &pmm.marginal_calibration {
                    None => format!("depth {}", pmm.depth),
                    Some(marginals) => format!(
                        "depth {}, columns calibrated to 1-D marginals of depth {} (share {})",
                        pmm.depth,
                        marginals.depths.first().copied().unwrap_or(0),
                        marginals.share
                    ),
                };
                if let Some(pairs) = &pmm.pair_marginals {
                    let mapped = pairs.pairs.iter().filter(|pair| pair.mapped).count();
                    summary += &format!(
                        ", {mapped} of {} column pairs mapped onto released 2-way marginals (share {})",
                        pairs.pairs.len(),
                        pairs.share
                    );
                }
                summary
            }
            MechanismParameters::Lowdim(lowdim) => {
                let inner = match &lowdim.inner {
                    InnerParameters::Pmm(pmm) => format!("inner PMM depth {}", pmm.depth),
                    InnerParameters::Psmm(psmm) => {
                        format!(
                            "inner PSMM {} cells ({} per axis)",
                            psmm.cells, psmm.cells_per_axis
                        )
                    }
                };
                format!(
                    "d' = {} ({}), {inner}",
                    lowdim.target_dim, lowdim.target_dim_rule
                )
            }
            MechanismParameters::Psmm(psmm) => {
                format!("{} cells ({} per axis)", psmm.cells, psmm.cells_per_axis)
            }
            MechanismParameters::Covloss(covloss) => format!(
                "p = {} bits, t = {}, {} cells, damping b = {}",
                covloss.bits, covloss.t, covloss.cells, covloss.damping
            ),
            MechanismParameters::Microagg(microagg) => format!(
                "k = {} groups of at least {} rows, t = {}, {} cells",
                microagg.k, microagg.anonymity, microagg.t, microagg.cells
            ),
            MechanismParameters::Pe(pe) => format!(
                "{} T = {}, n_s = {}, {} candidates per step",
                pe.variant, pe.steps, pe.samples, pe.candidates_per_step
            ),
        }
    }

    /// The noise the release added, for the report's guarantee.
    pub fn noise(&self) -> &'static str {
        match self {
            MechanismParameters::Pe(pe) if pe.variant != "laplace-threshold" => {
                "exact discrete Gaussian (Canonne-Kamath-Steinke) on integer counts, ChaCha12 keyed from the OS"
            }
            MechanismParameters::Covloss(_) => {
                "exact discrete Laplace (Canonne-Kamath-Steinke) on integer counts and on centroids on a public \
                 grid, ChaCha12 keyed from the OS"
            }
            MechanismParameters::Microagg(_) => "none: microaggregation adds no noise",
            _ => "exact discrete Laplace (Canonne-Kamath-Steinke) on integer counts, ChaCha12 keyed from the OS",
        }
    }
}

/// A mechanism's proven bound on the expected W1 between the data and the release.
#[derive(Clone, Debug, Serialize)]
pub struct AccuracyBound {
    /// The mechanism's bound on E W1 (see `formula`), with `n` below.
    pub expected_w1_bound: f64,
    pub units: &'static str,
    pub n: u64,
    pub formula: &'static str,
    /// Whether the bound holds for the table written, not only for a release before its post-processing
    /// maps (PMM's marginal and pair maps: then no bound is proven for the table).
    pub holds_for_table: bool,
}

/// The units every accuracy bound is stated in.
pub const NORMALISED_UNITS: &str =
    "normalised l-infinity units on [0,1]^d (multiply axis k by hi_k - lo_k for column units)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::cdf::CellCdf;

    #[test]
    fn values_are_spread_over_the_cells_of_what_was_released_last() {
        // Depth 5 in d = 2: axis 0 is halved 3 times, axis 1 twice.
        let geometry = CellGeometry::new(2, 5);
        let leaves = || ReleasedMeasure::Leaves { geometry, counts: vec![1; 32] };
        assert_eq!(leaves().value_cells(2), [Some(8), Some(4)]);
        let grid = ReleasedMeasure::Grid { grid: RegularGrid::new(2, 10).unwrap(), counts: vec![1; 100] };
        assert_eq!(grid.value_cells(2), [Some(10), Some(10)]);
        // A column mapped onto a released marginal takes the cells it gives.
        let (from, to) = (CellCdf::from_counts(&[1; 8]).unwrap(), CellCdf::from_counts(&[1; 64]).unwrap());
        let map = MonotoneMap { from, to };
        let maps = vec![Some(map), None];
        let calibrated = ReleasedMeasure::Calibrated { inner: Box::new(leaves()), maps, value_cells: vec![Some(4), None] };
        assert_eq!(calibrated.value_cells(2), [Some(4), None]);
        let points = ReleasedMeasure::Points { dims: 2, points: vec![0.5; 4], rows: 2 };
        assert_eq!(points.value_cells(2), [None, None]);
    }
}
