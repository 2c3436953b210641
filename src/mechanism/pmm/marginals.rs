//! Marginal calibration (`--marginal-share`, docs/mechanisms/pmm.md): a declared share of ε releases
//! each column's marginal on a fine 1-D dyadic tree (PMM in one dimension, with its own noise key per
//! column), and every synthetic value is then mapped onto its column's released marginal by the monotone
//! map x ↦ G⁻¹(F(x)): F is the joint release's own marginal CDF along that axis, G the released 1-D one,
//! both piecewise linear because points are uniform in their cells. The map reads released counts only
//! (post-processing) and keeps each column's ranks, so the joint's dependence is the joint release's,
//! while each column's distribution follows its fine marginal instead of the joint's coarse cells.

use serde::Serialize;

use super::plan::{PmmPlan, TreeSize};
use super::schedule::LevelSchedule;
use crate::binner::pass::DataPass;
use crate::error::{Error, Result};
use crate::geometry::partition::CellGeometry;
use crate::mechanism::PublicInputs;
use crate::options::PmmOptions;
use crate::privacy::{Budget, Neighbours, NoisyRowCount, RunSeeds};
use crate::sampler::RowGenerator;

/// The marginal trees' share of ε, split evenly over the columns.
#[derive(Clone, Debug)]
pub struct MarginalPlan {
    public: PublicInputs<'static>,
    /// The share of the run's ε, and the ε of each column's tree.
    share: f64,
    epsilon_per_column: f64,
    options: PmmOptions,
}

/// What the report says about the calibration.
#[derive(Clone, Debug, Serialize)]
pub struct MarginalParameters {
    pub share: f64,
    pub epsilon_per_column: f64,
    /// Each column's tree: its depth (2^depth cells on the column's bounds) and the rule that chose it.
    pub depths: Vec<u32>,
    pub depth_rule: String,
    pub map: &'static str,
}

/// The released marginals: each column's consistent leaf counts, with their accounting.
pub struct ReleasedMarginals {
    pub counts: Vec<Vec<u64>>,
    pub spends: Vec<f64>,
    pub parameters: MarginalParameters,
}

impl MarginalPlan {
    /// `share` of ε over `public.dims` columns, each a 1-D PMM tree with `options`' consistency.
    pub fn new(public: &PublicInputs, share: f64, options: &PmmOptions) -> Result<Self> {
        if public.neighbours == Neighbours::AddRemove && options.depth.is_some() {
            return Err(Error::bad_input(
                "--marginal-share under add-remove needs the depth rule (no --depth): the marginal trees' depth \
                 follows the released n̂",
            ));
        }
        Ok(MarginalPlan {
            public: PublicInputs {
                encoding: None,
                ..*public
            },
            share,
            epsilon_per_column: public.epsilon * share / public.dims as f64,
            options: PmmOptions {
                depth: None,
                ..options.clone()
            },
        })
    }

    /// The tree every column gets, for the public n (replace) or the joint release's n̂ and its scale
    /// (add-remove: the trees' released root).
    pub fn tree(&self, row_count: Option<(u64, NoisyRowCount)>) -> Result<MarginalTree> {
        let size = match (self.public.neighbours, row_count) {
            (Neighbours::Replace, _) => TreeSize::Public(self.public.file_rows),
            (Neighbours::AddRemove, Some((n_hat, row_count))) => TreeSize::AlreadyReleased { n_hat, row_count },
            (Neighbours::AddRemove, None) => {
                return Err(Error::internal("the marginal trees under add-remove need the joint release's n̂"))
            }
        };
        let plan =
            PmmPlan::with_size(&self.public, 1, self.epsilon_per_column, size, &self.options, " in one dimension")?;
        let schedule = plan
            .schedule()
            .ok_or_else(|| Error::internal("a marginal tree's depth is known from its size"))?
            .clone();
        Ok(MarginalTree { plan, schedule })
    }

    /// Bins each column alone at the tree's depth, then [`MarginalPlan::release_leaves`].
    pub fn release(
        &self,
        data: &DataPass,
        row_count: Option<(u64, NoisyRowCount)>,
        seeds: &RunSeeds,
    ) -> Result<ReleasedMarginals> {
        let tree = self.tree(row_count)?;
        let leaves = (0..data.dims())
            .map(|column| {
                let one = DataPass {
                    source: data.source,
                    columns: &data.columns[column..column + 1],
                    bounds: &data.bounds[column..column + 1],
                    nulls: data.nulls,
                    progress: data.progress,
                };
                Ok(one.leaf_counts(CellGeometry::new(1, tree.schedule.depth), tree.plan.device())?.0)
            })
            .collect::<Result<Vec<_>>>()?;
        self.release_leaves(&tree, leaves, seeds)
    }

    /// Noises each column's leaf counts `leaves[k]` on `tree` (a key of its own per column:
    /// [`RunSeeds::for_marginal`]) and makes them consistent.
    pub fn release_leaves(
        &self,
        tree: &MarginalTree,
        leaves: Vec<Vec<u64>>,
        seeds: &RunSeeds,
    ) -> Result<ReleasedMarginals> {
        let columns = leaves.len();
        let counts = leaves
            .into_iter()
            .enumerate()
            .map(|(column, leaves)| tree.plan.release_leaves(leaves, &seeds.for_marginal(column as u64)))
            .collect::<Result<Vec<_>>>()?;
        Ok(ReleasedMarginals {
            counts,
            spends: vec![tree_epsilon(&tree.schedule); columns],
            parameters: MarginalParameters {
                share: self.share,
                epsilon_per_column: self.epsilon_per_column,
                depths: vec![tree.schedule.depth; columns],
                depth_rule: tree.plan.depth_rule().to_string(),
                map: "x -> G^-1(F(x)) per column: F the joint release's marginal CDF on the axis, G the released \
                    1-D marginal's, both piecewise linear (uniform within cells); post-processing",
            },
        })
    }
}

/// One column's 1-D PMM tree: its plan and its schedule (depth and scales).
pub struct MarginalTree {
    pub plan: PmmPlan,
    pub schedule: LevelSchedule,
}

/// What one tree spends: its levels below the root. The root is the public n (replace) or the joint
/// release's n̂ (add-remove), already in the budget once.
fn tree_epsilon(schedule: &LevelSchedule) -> f64 {
    (1..=schedule.depth).map(|level| schedule.level_epsilon(level)).sum()
}

impl ReleasedMarginals {
    /// Adds each column's tree to `budget`.
    pub fn spend(&self, budget: &mut Budget) {
        for (column, &spent) in self.spends.iter().enumerate() {
            budget.spend(format!("marginal of column {column}"), spent);
        }
    }

    /// The maps x ↦ G⁻¹(F(x)) of each column, F from the joint leaf counts `counts` on `geometry` (the
    /// identity where either side released nothing).
    pub fn maps(&self, geometry: &CellGeometry, counts: &[u64]) -> Vec<Option<MonotoneMap>> {
        let dims = geometry.dims();
        let mut axes: Vec<Vec<u64>> = (0..dims).map(|axis| vec![0; 1 << geometry.axis_bits(axis)]).collect();
        let mut indices = vec![0u32; dims];
        for (code, &count) in counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            geometry.axis_indices(code as u32, &mut indices);
            for (axis, &index) in indices.iter().enumerate() {
                axes[axis][index as usize] += count;
            }
        }
        axes.iter()
            .zip(&self.counts)
            .map(|(joint, released)| {
                Some(MonotoneMap {
                    from: CellCdf::from_counts(joint)?,
                    to: CellCdf::from_counts(released)?,
                })
            })
            .collect()
    }
}

/// The CDF on [0,1] of counts on equal cells, each spread uniformly over its cell: piecewise linear.
#[derive(Clone, Debug, PartialEq)]
pub struct CellCdf {
    /// cumulative[j] = share of the mass in cells 0..j (cumulative[0] = 0, the last = 1).
    cumulative: Vec<f64>,
}

impl CellCdf {
    /// `None` when the counts are all zero.
    pub fn from_counts(counts: &[u64]) -> Option<Self> {
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let mut running = 0u64;
        let mut cumulative = Vec::with_capacity(counts.len() + 1);
        cumulative.push(0.0);
        for &count in counts {
            running += count;
            cumulative.push(running as f64 / total as f64);
        }
        Some(CellCdf { cumulative })
    }

    fn cells(&self) -> usize {
        self.cumulative.len() - 1
    }

    /// F(x) for x in [0,1].
    pub fn value(&self, x: f64) -> f64 {
        let scaled = x.clamp(0.0, 1.0) * self.cells() as f64;
        let cell = (scaled as usize).min(self.cells() - 1);
        let (low, high) = (self.cumulative[cell], self.cumulative[cell + 1]);
        low + (scaled - cell as f64) * (high - low)
    }

    /// F⁻¹(u) for u in [0,1]: inside the cell where F reaches u, linearly (cells with no mass are skipped).
    pub fn inverse(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        // The first cell whose upper cumulative reaches u and that holds mass.
        let cell = self.cumulative[1..].partition_point(|&high| high < u).min(self.cells() - 1);
        let cell = (cell..self.cells())
            .find(|&j| self.cumulative[j + 1] > self.cumulative[j])
            .unwrap_or(cell);
        let (low, high) = (self.cumulative[cell], self.cumulative[cell + 1]);
        let within = if high > low { ((u - low) / (high - low)).clamp(0.0, 1.0) } else { 0.5 };
        (cell as f64 + within) / self.cells() as f64
    }
}

/// x ↦ G⁻¹(F(x)) on [0,1]: monotone; pushes the law F forward onto G.
#[derive(Clone, Debug)]
pub struct MonotoneMap {
    pub from: CellCdf,
    pub to: CellCdf,
}

impl MonotoneMap {
    pub fn apply(&self, x: f64) -> f64 {
        self.to.inverse(self.from.value(x))
    }
}

/// The joint release's rows with each column passed through its map (normalised units).
pub struct CalibratedRows<'a> {
    pub inner: Box<dyn RowGenerator + 'a>,
    pub maps: &'a [Option<MonotoneMap>],
}

impl RowGenerator for CalibratedRows<'_> {
    fn total_rows(&self) -> u64 {
        self.inner.total_rows()
    }

    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        self.inner.sample_rows(start, rows, columns);
        for (values, map) in columns.iter_mut().zip(self.maps) {
            if let Some(map) = map {
                for value in values.iter_mut() {
                    *value = map.apply(*value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cdf_and_its_inverse_agree_where_there_is_mass() {
        let cdf = CellCdf::from_counts(&[2, 0, 1, 1]).unwrap();
        assert_eq!(cdf.value(0.0), 0.0);
        assert_eq!(cdf.value(0.125), 0.25);
        assert_eq!(cdf.value(0.25), 0.5);
        assert_eq!(cdf.value(0.4), 0.5, "no mass in the second cell");
        assert_eq!(cdf.value(1.0), 1.0);
        for x in [0.01, 0.2, 0.55, 0.7, 0.99] {
            assert!((cdf.inverse(cdf.value(x)) - x).abs() < 1e-12, "{x}");
        }
        // u = 1/2 is reached at the end of the first cell; the inverse skips the empty one.
        assert_eq!(cdf.inverse(0.5), 0.25);
        assert_eq!(cdf.inverse(0.5 + 1e-9), 0.5 + 1e-9);
        assert!(CellCdf::from_counts(&[0, 0]).is_none());
    }

    #[test]
    fn the_map_is_monotone_and_pushes_its_law_onto_the_released_one() {
        let map = MonotoneMap {
            from: CellCdf::from_counts(&[4, 0, 0, 4]).unwrap(),
            to: CellCdf::from_counts(&[1, 1, 1, 1, 1, 1, 1, 5]).unwrap(),
        };
        let mut last = 0.0;
        for step in 0..=1000 {
            let mapped = map.apply(step as f64 / 1000.0);
            assert!(mapped >= last, "monotone at {step}");
            last = mapped;
        }
        // The u-quantile of F goes to the u-quantile of G.
        for step in 1..100 {
            let u = step as f64 / 100.0;
            let x = map.from.inverse(u);
            assert!((map.apply(x) - map.to.inverse(u)).abs() < 1e-12, "u = {u}");
        }
    }
}
