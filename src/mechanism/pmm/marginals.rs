//! Marginal calibration (`--marginal-share`, docs/mechanisms/pmm.md): a declared share of ε releases
//! each column's marginal on a fine 1-D dyadic tree (PMM in one dimension, with its own noise key per
//! column), or, where that tree would be shallow, as an adaptive tree whose cells follow the column's rows
//! ([`ADAPTIVE_MARGINAL_MAX_DEPTH`], PrivTree); and every synthetic value is then mapped onto its column's released
//! marginal by the monotone map x ↦ G⁻¹(F(x)): F is the joint release's own marginal CDF along that
//! axis, G the released 1-D one, both piecewise linear because points are uniform in their cells. The map
//! reads released counts only (post-processing) and keeps each column's ranks, so the joint's dependence
//! is the joint release's, while each column's distribution follows its fine marginal instead of the
//! joint's coarse cells.

use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use super::coarsen_leaves;
use super::options::PmmOptions;
use super::pair_axis::{PAIR_BITS, PAIR_CELLS};
use super::plan::{PmmPlan, TreeSize};
use super::schedule::LevelSchedule;
use crate::binner::pass::DataPass;
use crate::binner::AxisPlan;
use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::geometry::cdf::CellCdf;
use crate::geometry::partition::{CellGeometry, LeafDecoder};
use crate::mechanism::PublicInputs;
use crate::noise::discrete_laplace::RationalScale;
use crate::noise::laplace_table::ScaleSampler;
use crate::privacy::{noise_scale, Budget, Neighbours, NoiseKey, NoiseStream, NoisyRowCount, RunSeeds};
use crate::progress::Timings;
use crate::sampler::RowGenerator;

/// Where the joint tree cuts each axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Partition {
    /// Halves the public bounds at every level (the dissertation's partition).
    Midpoint,
    /// Cuts each axis at the quantiles of its released 1-D marginal mixed with equal widths
    /// ([`QUANTILE_WARP_WEIGHT`]): the tree's cells follow the data instead of the public box.
    Quantile,
}

/// `--marginal-share` when `--partition quantile` is given without it: the share that did best with the
/// calibration at d ≥ 3 on flights (docs/accuracy.md, "Marginal calibration").
pub const DEFAULT_QUANTILE_MARGINAL_SHARE: f64 = 0.3;

/// The weight of the released marginal in each quantile axis's warp, the rest uniform: the axis's cells
/// then hold equal shares of ½·(released marginal) + ½·(equal widths). Pure quantile cells (weight 1)
/// spread a tight cluster over many cells, where noise leaks its mass into empty combinations of the
/// other columns' clusters: on generated clusters (d = 3, 4) they doubled the joint W1 of the midpoint
/// partition, while weight ½ beat it on clusters and on skewed tables and did as well or better than
/// weight 1 on flights (docs/mechanisms/pmm.md).
pub const QUANTILE_WARP_WEIGHT: f64 = 0.5;

/// Where an axis has at least twice as many cells, the quantile partition cuts it at the edges of this
/// many equal cells of the public bounds, each moved by half an axis cell at most from where the warp put
/// it: the pair histograms' cells ([`PAIR_CELLS`]), so that the joint tree's cells nest in them where the
/// data are, as the midpoint partition's do everywhere. Unaligned, the cells around a heavy pair cell's
/// edge straddled it, and their rows were spread across it as the release could not say: on a heavy-tailed
/// table of 10^7 rows (d = 4, ε = 10) the 2-way TV was 6.8 times PMM's, aligned 3.8 times
/// (docs/mechanisms/pmm.md, "The quantile cells nest in the pair cells").
pub const QUANTILE_ALIGNED_CELLS: usize = PAIR_CELLS;

/// Only the edges next to a pair cell holding at least this many of the axis's cells are aligned. Where a
/// pair cell holds one or two, rounding alternates them between one and two along a tail, and the joint
/// release's error, which grows with the cells a region has, alternated with them: a skewed table's 2-way
/// TV was 1.3 times worse with this threshold at 2, and 2.1 times with every edge aligned. Aligned to a
/// coarser grid on shallower axes (16 cells per axis, flights at d = 4, ε = 1), the pairwise 2-D W1 was 12%
/// worse.
pub const QUANTILE_ALIGN_MIN_CELLS: f64 = 4.0;

/// Where the d = 1 depth rule gives a column this many levels or fewer, its marginal is released as an
/// adaptive tree ([`AdaptiveTree`]) instead of a tree of that fixed depth. The rule's depth follows ε·n
/// alone, so at these depths a column is cut into at most 64 equal cells of its public bounds wherever its
/// rows are: at ε = 0.1 on 5·10^4 rows (d = 4, 16 cells) a column whose rows fill 7–14% of its bounds was
/// smeared over two or three cells (1-D TV on 32 bins 0.23–0.49, MST's 0.015–0.027). Adaptive cells against
/// the flat histograms with refined heavy cells that these depths had before (`auto`, d = 4, ε = 0.1 and 1,
/// n = 10^4 and 5·10^4, three seeds): the largest 1-D W1 0.03–0.71× on flights and on tables filling 7–10% of
/// their bounds, transport 0.04–1.07×; at depth 6 on the whole flights table (ε = 0.1), whose columns fill
/// their bounds, transport 1.12× and the 2-way TV 1.45× (docs/mechanisms/pmm.md, "Adaptive marginals").
pub const ADAPTIVE_MARGINAL_MAX_DEPTH: u32 = 6;

/// A marginal's noisy counts below this many noise scales are taken as empty: the tree drops an empty
/// region a subtree at a time, a histogram cell by cell, and at 2 scales the survivors in empty cells
/// moved the mean and the correlations (4 did best of 2.5, 3 and 4 on flights, with flat histograms).
pub const MARGINAL_PRUNE_SCALES: f64 = 4.0;

/// An adaptive marginal's finest cells are 2^this equal cells of the column's bounds. Its splits stop
/// where the counts turn to noise wherever the cap is, so the cap bounds the memory and the pass that
/// counts each column's rows at this depth (2^12 counts a column): a column whose rows fill 5% of its
/// bounds still gets 200 cells there, more than the 64 bins the peers and the scores use.
pub const ADAPTIVE_CELL_DEPTH: u32 = 12;

/// The share of an adaptive marginal's ε (the column's) spent on its split decisions, the rest on its
/// cells' counts. Against Zhang, Xiao and Xie's (2016) even split, 0.3 gave the cells' counts 1.4 times the
/// budget, and fewer noise-only cells survived the floor: with `auto` at ε = 0.1 and 1 (three seeds, d = 4)
/// the largest 1-D W1 fell from 0.0165 to 0.0096 on flights at n = 5·10^4, ε = 0.1 (0.0041 to 0.0017 at
/// ε = 1), 0.0020 to 0.0015 on a heavy-tailed table and 0.0089 to 0.0081 on a narrow mixture at n = 10^4;
/// transport 0.94–1.0× (docs/mechanisms/pmm.md, "Adaptive marginals").
pub const ADAPTIVE_SPLIT_SHARE: f64 = 0.3;

/// PrivTree's threshold θ on a node's biased count: a node is split while its biased noisy count exceeds
/// it. 0 as in Zhang, Xiao and Xie (2016): the bias δ per level already stops the splits where a node's
/// rows are fewer than its depth times δ.
pub const ADAPTIVE_SPLIT_THRESHOLD: i64 = 0;

/// The privacy loss of a binary PrivTree's split decisions in units of 1/λ for a row added or removed:
/// (2β − 1)/(β − 1) with fanout β = 2 (Zhang, Xiao and Xie 2016, Theorem 3.1). With discrete Laplace
/// noise and whole counts the same bound holds: along the row's path the biased counts fall by δ ≥ λ·ln 2
/// a level, so the decisions within δ of θ cost 1/λ each (two at most) and the others a geometric series
/// of ratio e^(−δ/λ) ≤ ½ (one more 1/λ at most).
pub const PRIVTREE_LOSS_SCALES: f64 = 3.0;

/// The most rows [`MarginalPlan::rows_for_depth`] looks at: 2^62, beyond any table.
const DEEPEST_SEARCHED_ROWS: u64 = 1 << 62;

/// The marginal trees' share of ε, split evenly over the columns.
#[derive(Clone, Debug)]
pub struct MarginalPlan {
    public: PublicInputs<'static>,
    /// The share of the run's ε, and the ε of each column's tree.
    share: f64,
    epsilon_per_column: f64,
    options: PmmOptions,
    partition: Partition,
}

/// What the report says about the calibration.
#[derive(Clone, Debug, Serialize)]
pub struct MarginalParameters {
    pub share: f64,
    pub epsilon_per_column: f64,
    /// Each column's tree: its depth (2^depth cells on the column's bounds) and the rule that chose it.
    pub depths: Vec<u32>,
    pub depth_rule: String,
    /// `tree` (PMM in one dimension) or `adaptive` (PrivTree: [`ADAPTIVE_MARGINAL_MAX_DEPTH`]).
    pub release: &'static str,
    /// An adaptive tree's noise, thresholds and cells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveParameters>,
    /// The categorical and Boolean columns' marginals ([`CodedMarginal`]); absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codes: Option<CodedParameters>,
    /// `midpoint`: the joint tree halves the public bounds; `quantile`: it cuts each axis at the
    /// released marginal's quantiles.
    pub partition: Partition,
    pub map: &'static str,
}

/// What the report says about the coded columns' marginals.
#[derive(Clone, Debug, Serialize)]
pub struct CodedParameters {
    /// The coded columns (numbered in the run's column order).
    pub columns: Vec<usize>,
    /// The Laplace scale of every code's cell and the floor below which its count was taken as empty.
    pub sigma: f64,
    pub prune_floor: i64,
    pub release: &'static str,
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
            partition: options.partition,
        })
    }

    /// Where the joint tree cuts its axes.
    pub fn partition(&self) -> Partition {
        self.partition
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
        let context = " in one dimension";
        let plan = PmmPlan::with_size(&self.public, 1, self.epsilon_per_column, size, &self.options, context)?;
        let depth_rule = plan.depth_rule().to_string();
        let schedule = plan
            .schedule()
            .ok_or_else(|| Error::internal("a marginal tree's depth is known from its size"))?
            .clone();
        let shape = if schedule.depth <= ADAPTIVE_MARGINAL_MAX_DEPTH {
            let sensitivity = self.public.neighbours.histogram_sensitivity();
            MarginalShape::Adaptive(AdaptiveTree::new(sensitivity, self.epsilon_per_column)?)
        } else {
            MarginalShape::Tree
        };
        let coded = self.coded_marginals()?;
        Ok(MarginalTree { plan, schedule, shape, depth_rule, coded })
    }

    /// Each coded column's histogram with a cell per code (`None` for a number): the whole column's ε on one
    /// level, where a tree would split it over ⌈log2 codes⌉ of them.
    fn coded_marginals(&self) -> Result<Vec<Option<CodedMarginal>>> {
        let sensitivity = self.public.neighbours.histogram_sensitivity();
        let scale = noise_scale(sensitivity / self.epsilon_per_column, "a categorical column's marginal (--marginal-share)")?;
        Ok((0..self.public.dims)
            .map(|column| match self.options.marginal_codes.get(column).copied().unwrap_or(0) {
                0 => None,
                slots => Some(CodedMarginal::new(slots, scale)),
            })
            .collect())
    }

    /// The fewest rows for which every column's tree is at least `depth` deep: n̂ released with
    /// `row_count`'s noise under add-remove, the public n under replace (`row_count` `None`). `None` when
    /// no row count reaches `depth` (memory caps the trees).
    pub fn rows_for_depth(&self, depth: u32, row_count: Option<NoisyRowCount>) -> Result<Option<u64>> {
        let depth_for = |rows: u64| -> Result<u32> {
            let size = match row_count {
                Some(row_count) => TreeSize::AlreadyReleased { n_hat: rows, row_count },
                None => TreeSize::Public(rows),
            };
            let plan = PmmPlan::with_size(&self.public, 1, self.epsilon_per_column, size, &self.options, "")?;
            let schedule = plan.schedule().ok_or_else(|| Error::internal("a marginal tree's depth follows its size"))?;
            Ok(schedule.depth)
        };
        // The depth rule deepens with the rows: double up to a row count deep enough, then bisect.
        let mut high = 1u64;
        while depth_for(high)? < depth {
            if high >= DEEPEST_SEARCHED_ROWS {
                return Ok(None);
            }
            high *= 2;
        }
        let mut low = high / 2;
        if depth_for(low)? >= depth {
            return Ok(Some(low));
        }
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if depth_for(middle)? >= depth {
                high = middle;
            } else {
                low = middle;
            }
        }
        Ok(Some(high))
    }

    /// The trees' depth planned before n̂ is released (add-remove), as the joint tree's is: the depth
    /// for the file's row count plus the headroom left for n̂'s noise, so that leaves binned at it can
    /// almost always be coarsened to the depth n̂ gives. Only the work depends on the file's row count:
    /// leaves coarsened from deeper ones are the leaves binned at their own depth.
    pub fn planned_depth(&self, row_count: NoisyRowCount) -> Result<u32> {
        let size = TreeSize::ReleasedFirst(row_count);
        let planned =
            PmmPlan::with_size(&self.public, 1, self.epsilon_per_column, size, &self.options, "")?.planned_depth();
        // Deep enough for an adaptive marginal's finest cells too, wherever n̂ turns out to give one, and for
        // a cell per code of every coded column.
        let code_depth = self.options.marginal_codes.iter().map(|&slots| code_depth(slots)).max().unwrap_or(0);
        Ok(planned.max(ADAPTIVE_CELL_DEPTH).max(code_depth))
    }

    /// Each column's true leaf counts at its depth in `tree` ([`MarginalTree::column_depth`]): `binned`
    /// coarsened where that pass went as deep, else from a pass of their own (every column in one pass).
    pub fn leaves(tree: &MarginalTree, data: &DataPass, binned: Option<BinnedMarginals>) -> Result<Vec<Vec<u64>>> {
        let depth = tree.pass_depth();
        let binned = match binned {
            Some(binned) if depth <= binned.depth => binned,
            _ => BinnedMarginals { depth, leaves: data.marginal_leaf_counts(depth)?.0 },
        };
        let column_leaves = binned.leaves.into_iter().enumerate();
        Ok(column_leaves.map(|(column, leaves)| coarsen_leaves(leaves, binned.depth, tree.column_depth(column))).collect())
    }

    /// Noises each column's leaf counts `leaves[k]` (at `tree`'s leaf depth) as `tree`'s shape says (a key
    /// of its own per column: [`RunSeeds::for_marginal`]): the tree made consistent, or the adaptive tree's
    /// cells ([`release_adaptive`]).
    pub fn release_leaves(
        &self,
        tree: &MarginalTree,
        leaves: Vec<Vec<u64>>,
        seeds: &RunSeeds,
    ) -> Result<ReleasedMarginals> {
        let columns = leaves.len();
        let mut adaptive_cells = Vec::new();
        let counts = leaves
            .into_iter()
            .enumerate()
            .map(|(column, leaves)| {
                let seeds = seeds.for_marginal(column as u64);
                if let Some(coded) = &tree.coded[column] {
                    return Ok(coded.release(&leaves, &seeds.noise));
                }
                match tree.shape {
                    MarginalShape::Tree => tree.plan.release_leaves(leaves, &seeds, &mut Timings::default()),
                    MarginalShape::Adaptive(adaptive) => {
                        let (counts, cells) = release_adaptive(&leaves, &adaptive, &seeds.noise);
                        adaptive_cells.push(cells);
                        Ok(counts)
                    }
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let sensitivity = self.public.neighbours.histogram_sensitivity();
        let (spent, release, adaptive) = match tree.shape {
            MarginalShape::Tree => (tree_epsilon(&tree.schedule), "tree", None),
            MarginalShape::Adaptive(adaptive) => {
                let parameters = AdaptiveParameters {
                    split_epsilon: adaptive.split_epsilon(sensitivity),
                    split_sigma: adaptive.split_scale.to_f64(),
                    split_bias: adaptive.bias,
                    split_threshold: ADAPTIVE_SPLIT_THRESHOLD,
                    count_epsilon: adaptive.count_epsilon(sensitivity),
                    count_sigma: adaptive.count_scale.to_f64(),
                    prune_floor: adaptive.floor,
                    cell_depth: ADAPTIVE_CELL_DEPTH,
                    cells: adaptive_cells,
                };
                (parameters.split_epsilon + parameters.count_epsilon, "adaptive", Some(parameters))
            }
        };
        let coded_spent = |coded: &CodedMarginal| sensitivity / coded.scale.to_f64();
        let spends = tree.coded.iter().map(|coded| coded.as_ref().map_or(spent, coded_spent)).collect();
        let depths = (0..columns).map(|column| tree.column_depth(column));
        let coded_columns: Vec<usize> = (0..columns).filter(|&column| tree.coded[column].is_some()).collect();
        let codes = tree.coded.iter().flatten().next().map(|coded| CodedParameters {
            columns: coded_columns,
            sigma: coded.scale.to_f64(),
            prune_floor: coded.floor,
            release: "a histogram with a cell per code (null and other included), Laplace noise on every code's \
                      cell, counts below prune_floor taken as empty",
        });
        Ok(ReleasedMarginals {
            counts,
            spends,
            parameters: MarginalParameters {
                share: self.share,
                epsilon_per_column: self.epsilon_per_column,
                depths: depths.collect(),
                codes,
                depth_rule: tree.depth_rule.clone(),
                release,
                adaptive,
                partition: self.partition,
                map: match self.partition {
                    Partition::Midpoint => {
                        "x -> G^-1(F(x)) per column: F the joint release's marginal CDF on the axis, G the \
                         released 1-D marginal's, both piecewise linear (uniform within cells); post-processing"
                    }
                    Partition::Quantile => {
                        "u -> G^-1(F(u)) per column: u the joint tree's coordinate on the axis cut at the \
                         quantiles of (G + uniform)/2 (on axes of 64 cells or more moved to cut at the edges of \
                         the 32 pair cells beside the heavy ones), F the joint release's marginal CDF there, G the \
                         released 1-D marginal's, all piecewise linear (uniform within cells); post-processing"
                    }
                },
            },
        })
    }
}

/// What the report says about the adaptive marginals ([`AdaptiveTree`]).
#[derive(Clone, Debug, Serialize)]
pub struct AdaptiveParameters {
    /// What the split decisions spend (part of `epsilon_per_column`), their Laplace scale λ, the bias δ
    /// per level and the threshold θ.
    pub split_epsilon: f64,
    pub split_sigma: f64,
    pub split_bias: i64,
    pub split_threshold: i64,
    /// What the cells' counts spend (the rest of `epsilon_per_column`), their Laplace scale and the floor
    /// below which a count was taken as empty.
    pub count_epsilon: f64,
    pub count_sigma: f64,
    pub prune_floor: i64,
    /// The finest cells: 2^cell_depth on the column's bounds.
    pub cell_depth: u32,
    /// How many cells each number column's tree stopped at.
    pub cells: Vec<usize>,
}

/// Every column's 1-D leaf counts from a pass made before the trees' depth was known.
pub struct BinnedMarginals {
    pub depth: u32,
    pub leaves: Vec<Vec<u64>>,
}

/// One column's 1-D PMM tree: its plan and its schedule (depth and scales), and how its leaves are
/// released.
pub struct MarginalTree {
    pub plan: PmmPlan,
    pub schedule: LevelSchedule,
    pub shape: MarginalShape,
    /// How its depth was chosen, for the report.
    pub depth_rule: String,
    /// Per column, a coded column's histogram, which it gets instead of the tree (`None`: a number).
    pub coded: Vec<Option<CodedMarginal>>,
}

impl MarginalTree {
    /// The depth a number's true leaves are counted and released at: the tree's, or an adaptive tree's
    /// finest cells'.
    fn number_depth(&self) -> u32 {
        match self.shape {
            MarginalShape::Tree => self.schedule.depth,
            MarginalShape::Adaptive(_) => ADAPTIVE_CELL_DEPTH,
        }
    }

    /// The depth `column`'s true leaves are counted at: a number's ([`Self::number_depth`]), or a coded
    /// column's cell per code.
    pub fn column_depth(&self, column: usize) -> u32 {
        self.coded.get(column).and_then(Option::as_ref).map_or_else(|| self.number_depth(), |coded| coded.depth)
    }

    /// The depth one pass bins every column's leaves at, to be coarsened to each column's own.
    pub fn pass_depth(&self) -> u32 {
        (0..self.coded.len()).map(|column| self.column_depth(column)).max().unwrap_or_else(|| self.number_depth())
    }
}

/// The halvings of a coded axis of `slots` code slots: the fewest that give each code a cell of its own
/// (each cell is then at most one code wide), and at least the pair histograms' ([`PAIR_BITS`]), so that
/// each cell lies in one pair cell. The rows drawn for the pairs are spread inside their code's cell; in
/// cells wider than a pair cell they fell in pair cells the data's codes never do, and every pair with a
/// short list scored as wrong (flights' three origins: scores 20 times the others').
fn code_depth(slots: usize) -> u32 {
    slots.max(1).next_power_of_two().trailing_zeros().max(PAIR_BITS)
}

/// A coded axis of `slots` code slots: its [`code_depth`] and each slot's cell there, in code order, where
/// the binner puts it.
pub fn code_leaves(slots: usize) -> (u32, Vec<u32>) {
    let depth = code_depth(slots);
    // The binner's own quantisation of each slot's value on the axis [−½, slots − ½]: a coded axis is
    // [first − ½, first + slots − ½] with its codes on the integers from `first`, and every value here
    // is a small half-integer, so both differences from the lower bound are exact and equal.
    let bounds = ColumnBounds::new("codes", -0.5, slots as f64 - 0.5).expect("a coded axis has a code");
    let axis = AxisPlan::new(bounds, depth);
    (depth, (0..slots).map(|slot| axis.quantize(slot as f64)).collect())
}

/// A categorical or Boolean column's 1-D marginal: one histogram of its codes, Lap_Z(`scale`) on every
/// code's cell (empty ones included: which codes exist is public, from the list), nothing on the cells
/// that hold no code, counts below `floor` taken as empty. A row is in one code's cell, so this has the
/// histogram's sensitivity and spends the column's whole ε on one level. A tree over the list's order
/// split it over ⌈log2 codes⌉ levels, each leaf carrying every level's noise: on flights' 1 480-airport
/// list the destination's 1-D TV was 0.026 at ε = 1 (docs/mechanisms/pmm.md, "Mixed columns").
#[derive(Clone, Debug, PartialEq)]
pub struct CodedMarginal {
    /// The axis halved this many times ([`code_depth`]).
    pub depth: u32,
    /// The cell of each code slot at `depth`, in code order: where the binner puts it.
    pub code_cells: Vec<u32>,
    pub scale: RationalScale,
    pub floor: i64,
}

impl CodedMarginal {
    fn new(slots: usize, scale: RationalScale) -> Self {
        let (depth, code_cells) = code_leaves(slots);
        CodedMarginal { depth, code_cells, scale, floor: prune_floor(scale) }
    }

    /// The column's released counts at `depth` from its true `leaves` there: each code's cell noised and
    /// pruned, the cells without a code 0.
    fn release(&self, leaves: &[u64], key: &NoiseKey) -> Vec<u64> {
        let counts: Vec<u64> = self.code_cells.iter().map(|&cell| leaves[cell as usize]).collect();
        let noisy = flat_histogram(&counts, self.scale, key);
        let mut released = vec![0; leaves.len()];
        for (&cell, count) in self.code_cells.iter().zip(noisy) {
            released[cell as usize] = pruned(count, self.floor);
        }
        released
    }
}

/// How a column's leaves are released.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MarginalShape {
    /// The schedule's noisy levels, made consistent top-down (PMM in one dimension).
    Tree,
    /// PrivTree's cells, which follow the rows ([`AdaptiveTree`]).
    Adaptive(AdaptiveTree),
}

/// A column's marginal released by PrivTree (Zhang, Xiao and Xie, SIGMOD 2016) on the dyadic cells of its
/// bounds. From the whole range down, a node at depth k holding c rows is split in two while its biased
/// count max(c − k·δ, θ − δ) plus Lap_Z(λ) exceeds θ ([`ADAPTIVE_SPLIT_THRESHOLD`]), down to
/// [`ADAPTIVE_CELL_DEPTH`] at most: the decisions spend sensitivity·[`PRIVTREE_LOSS_SCALES`]/λ whatever the
/// depth. The cells it stopped at partition the bounds, and their counts are a histogram released with
/// Lap_Z(`count_scale`) each (sequential composition: the partition is released first). Where the rows are
/// the cells are small; elsewhere a few wide cells carry the noise.
///
/// Under replace a row leaves one root-to-cell path and joins another: below their common part the two
/// paths' counts move by one each, so both the decisions and the counts have sensitivity 2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveTree {
    /// λ, the split decisions' noise.
    pub split_scale: RationalScale,
    /// δ: the least whole count with e^(−δ/λ) ≤ ½.
    pub bias: i64,
    pub count_scale: RationalScale,
    /// Noisy cell counts below this are taken as empty ([`MARGINAL_PRUNE_SCALES`] count scales).
    pub floor: i64,
}

impl AdaptiveTree {
    /// The tree that spends `epsilon` (a column's) at `sensitivity`, [`ADAPTIVE_SPLIT_SHARE`] of it on the
    /// split decisions.
    pub fn new(sensitivity: f64, epsilon: f64) -> Result<Self> {
        let split_epsilon = epsilon * ADAPTIVE_SPLIT_SHARE;
        let split_sigma = sensitivity * PRIVTREE_LOSS_SCALES / split_epsilon;
        let split_scale = noise_scale(split_sigma, "an adaptive marginal's splits (--marginal-share)")?;
        let count_sigma = sensitivity / (epsilon - split_epsilon);
        let count_scale = noise_scale(count_sigma, "an adaptive marginal's cells (--marginal-share)")?;
        Ok(Self::with_scales(split_scale, count_scale))
    }

    /// The tree with these noise scales, its bias and floor following from them.
    pub fn with_scales(split_scale: RationalScale, count_scale: RationalScale) -> Self {
        // δ ≥ λ·ln 2, a hair above it so that rounding cannot leave it under.
        let bias = (split_scale.to_f64() * std::f64::consts::LN_2 * (1.0 + 1e-9)).ceil() as i64;
        AdaptiveTree { split_scale, bias: bias.max(1), count_scale, floor: prune_floor(count_scale) }
    }

    /// What the split decisions spend at `sensitivity`.
    pub fn split_epsilon(&self, sensitivity: f64) -> f64 {
        sensitivity * PRIVTREE_LOSS_SCALES / self.split_scale.to_f64()
    }

    /// What the cells' counts spend at `sensitivity`.
    pub fn count_epsilon(&self, sensitivity: f64) -> f64 {
        sensitivity / self.count_scale.to_f64()
    }
}

/// One cell of an adaptive marginal: the `index`-th of the 2^`depth` equal cells of the bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AdaptiveCell {
    pub depth: u32,
    pub index: u64,
}

/// PrivTree's split decisions ([`AdaptiveTree`]) on a column's true `leaves` (2^D of them, D the deepest
/// cells' depth), drawn level by level from the column key's own stream: the cells it stopped at, in
/// order along the axis.
pub fn adaptive_cells(leaves: &[u64], tree: &AdaptiveTree, key: &NoiseKey) -> Vec<AdaptiveCell> {
    assert!(leaves.len().is_power_of_two(), "the leaves of a dyadic axis");
    let deepest = leaves.len().trailing_zeros();
    let mut prefix = Vec::with_capacity(leaves.len() + 1);
    prefix.push(0u64);
    for &count in leaves {
        prefix.push(prefix[prefix.len() - 1] + count);
    }
    let sampler = ScaleSampler::new(tree.split_scale);
    let mut rng = key.stream(NoiseStream::MarginalSplits, 0);
    let (mut cells, mut level) = (Vec::new(), vec![0u64]);
    for depth in 0..deepest {
        let width = 1usize << (deepest - depth);
        let mut next = Vec::with_capacity(2 * level.len());
        for index in level {
            let start = index as usize * width;
            let count = i64::try_from(prefix[start + width] - prefix[start]).unwrap_or(i64::MAX);
            let biased = count.saturating_sub(i64::from(depth).saturating_mul(tree.bias));
            let biased = biased.max(ADAPTIVE_SPLIT_THRESHOLD.saturating_sub(tree.bias));
            if biased.saturating_add(sampler.sample(&mut rng)) > ADAPTIVE_SPLIT_THRESHOLD {
                next.extend([2 * index, 2 * index + 1]);
            } else {
                cells.push(AdaptiveCell { depth, index });
            }
        }
        level = next;
    }
    cells.extend(level.into_iter().map(|index| AdaptiveCell { depth: deepest, index }));
    cells.sort_unstable_by_key(|cell| cell.index << (deepest - cell.depth));
    cells
}

/// The noisy counts of `cells` (a partition of the axis of `leaves`), Lap_Z(`tree.count_scale`) on each,
/// drawn in order from the column key's own stream.
pub fn adaptive_counts(leaves: &[u64], cells: &[AdaptiveCell], tree: &AdaptiveTree, key: &NoiseKey) -> Vec<i64> {
    let deepest = leaves.len().trailing_zeros();
    let counts: Vec<u64> = cells
        .iter()
        .map(|cell| {
            let width = 1usize << (deepest - cell.depth);
            leaves[cell.index as usize * width..][..width].iter().sum()
        })
        .collect();
    ScaleSampler::new(tree.count_scale).noisy_counts(&counts, &mut key.stream(NoiseStream::MarginalCellCounts, 0))
}

/// A column's adaptive marginal released from its true `leaves`: its counts at the leaves' depth, each
/// cell's noisy count pruned below the floor and spread evenly over its leaves (post-processing), and how
/// many cells it has.
pub fn release_adaptive(leaves: &[u64], tree: &AdaptiveTree, key: &NoiseKey) -> (Vec<u64>, usize) {
    let deepest = leaves.len().trailing_zeros();
    let cells = adaptive_cells(leaves, tree, key);
    let noisy = adaptive_counts(leaves, &cells, tree, key);
    let mut counts = Vec::with_capacity(leaves.len());
    for (cell, &count) in cells.iter().zip(&noisy) {
        counts.extend(apportion(pruned(count, tree.floor), &vec![0; 1 << (deepest - cell.depth)]));
    }
    (counts, cells.len())
}

/// Noisy counts below this are taken as empty ([`MARGINAL_PRUNE_SCALES`] noise scales).
fn prune_floor(scale: RationalScale) -> i64 {
    (MARGINAL_PRUNE_SCALES * scale.to_f64()).ceil() as i64
}

fn pruned(count: i64, floor: i64) -> u64 {
    if count < floor || count < 0 {
        0
    } else {
        count as u64
    }
}

/// `total` shared out in proportion to `weights` (evenly where they are all 0), in whole counts that sum
/// to `total`: each part is the rounded-down cumulative share minus the ones before it.
pub(crate) fn apportion(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&weight| u128::from(weight)).sum();
    let evenly = sum == 0;
    let sum = if evenly { weights.len() as u128 } else { sum };
    let (mut cumulative, mut given) = (0u128, 0u64);
    weights
        .iter()
        .map(|&weight| {
            cumulative += if evenly { 1 } else { u128::from(weight) };
            let upto = (u128::from(total) * cumulative / sum) as u64;
            let part = upto - given;
            given = upto;
            part
        })
        .collect()
}

/// `leaves` with Lap_Z(`scale`) added to every cell, empty ones included, drawn in cell order from the
/// column key's own stream. Under add-remove a row changes one cell by 1, under replace two cells by 1
/// each, so the scale sensitivity/ε makes the histogram ε-DP.
pub fn flat_histogram(leaves: &[u64], scale: RationalScale, key: &NoiseKey) -> Vec<i64> {
    ScaleSampler::new(scale).noisy_counts(leaves, &mut key.stream(NoiseStream::MarginalHistogram, 0))
}

/// The warp of one axis halved `bits` times, from its released marginal `counts` ([`ReleasedMarginals::warps`]).
fn quantile_warp(counts: &[u64], bits: u32) -> CellCdf {
    let warp = CellCdf::from_counts(counts).unwrap_or_else(CellCdf::uniform).mixed_with_uniform(QUANTILE_WARP_WEIGHT);
    let axis_cells = 1usize << bits;
    if axis_cells >= 2 * QUANTILE_ALIGNED_CELLS {
        warp.aligned(QUANTILE_ALIGNED_CELLS, axis_cells, QUANTILE_ALIGN_MIN_CELLS)
    } else {
        warp
    }
}

/// What one tree spends: its levels below the root. The root is the public n (replace) or the joint
/// release's n̂ (add-remove), already in the budget once.
fn tree_epsilon(schedule: &LevelSchedule) -> f64 {
    // A fold from +0.0: `sum` of no levels is −0.0, which the report would print.
    (1..=schedule.depth).map(|level| schedule.level_epsilon(level)).fold(0.0, |total, epsilon| total + epsilon)
}

impl ReleasedMarginals {
    /// Adds each column's tree to `budget`.
    pub fn spend(&self, budget: &mut Budget) {
        for (column, &spent) in self.spends.iter().enumerate() {
            budget.spend(format!("marginal of column {column}"), spent);
        }
    }

    /// Each column's warp in the quantile partition on `geometry`: its released marginal's CDF mixed with
    /// the uniform one by [`QUANTILE_WARP_WEIGHT`] (uniform where it released nothing), on axes of at least
    /// twice [`QUANTILE_ALIGNED_CELLS`] cells aligned so that their cuts include the edges of that many equal
    /// cells of the bounds beside the heavy ones. Released counts and public sizes only.
    pub fn warps(&self, geometry: &CellGeometry) -> Vec<Arc<CellCdf>> {
        self.counts
            .iter()
            .enumerate()
            .map(|(axis, counts)| Arc::new(quantile_warp(counts, geometry.axis_bits(axis))))
            .collect()
    }

    /// Per column mapped by `maps`, how many equal cells of its bounds its values are spread over: the
    /// tree's leaves, or an adaptive tree's finest cells (each of its cells is a run of them, so an integer
    /// column's values stay on the integers of their cell: [`crate::io::integer_cells`]).
    /// A column without a map keeps coordinates that may be warped (the quantile partition), so `None`.
    pub fn value_cells(&self, maps: &[Option<MonotoneMap>]) -> Vec<Option<u64>> {
        maps.iter().zip(&self.parameters.depths).map(|(map, &depth)| map.as_ref().map(|_| 1u64 << depth)).collect()
    }

    /// The maps x ↦ G⁻¹(F(x)) of each column, F from the joint release's counts along each axis
    /// ([`axis_counts`]; the identity where either side released nothing).
    pub fn maps_from(&self, axes: &[Vec<u64>]) -> Vec<Option<MonotoneMap>> {
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

/// The joint leaf counts (`cells`: leaf code and count, of `geometry`'s leaves: all of them, a rank's part, or
/// those that hold rows) summed along each axis: the joint release's own marginals.
pub fn axis_counts(geometry: &CellGeometry, cells: impl Iterator<Item = (usize, u64)>) -> Vec<Vec<u64>> {
    let dims = geometry.dims();
    let mut axes: Vec<Vec<u64>> = (0..dims).map(|axis| vec![0; 1 << geometry.axis_bits(axis)]).collect();
    let decoder = LeafDecoder::new(geometry);
    let mut indices = vec![0u32; dims];
    for (code, count) in cells.filter(|&(_, count)| count > 0) {
        decoder.axis_indices(code as u32, &mut indices);
        for (axis, &index) in indices.iter().enumerate() {
            axes[axis][index as usize] += count;
        }
    }
    axes
}

/// x ↦ G⁻¹(F(x)) on [0,1]: monotone; pushes the law F forward onto G.
#[derive(Clone, Debug)]
pub struct MonotoneMap {
    pub from: CellCdf,
    pub to: CellCdf,
}

impl MonotoneMap {
    #[inline]
    pub fn apply(&self, x: f64) -> f64 {
        self.to.inverse(self.from.value(x))
    }

    /// [`Self::apply`] to every value of `values` in place, to the bit: F on each, then G⁻¹ on the lot in
    /// blocks ([`CellCdf::inverse_all`]).
    pub fn apply_all(&self, values: &mut [f64]) {
        values.iter_mut().for_each(|value| *value = self.from.value(*value));
        self.to.inverse_all(values);
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
        // In chunks on the pool: the pairs draw up to 2^24 values in one call (the writer's calls are a
        // batch each, already in parallel).
        const CHUNK: usize = 1 << 14;
        self.inner.sample_rows(start, rows, columns);
        for (values, map) in columns.iter_mut().zip(self.maps) {
            if let Some(map) = map {
                values.par_chunks_mut(CHUNK).for_each(|chunk| map.apply_all(chunk));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use rand::RngExt;

    use super::*;
    use crate::binner::AxisPlan;
    use crate::geometry::bounds::ColumnBounds;
    use crate::testing::case_rng;

    #[test]
    fn a_flat_histogram_noises_every_cell_empty_ones_included() {
        let scale = RationalScale::round_up(5.0).unwrap();
        let key = NoiseKey::from_user_seed(7);
        let noisy = flat_histogram(&[0; 4096], scale, &key);
        assert_eq!(noisy, flat_histogram(&[0; 4096], scale, &key), "seeded draws repeat");
        // Lap_Z(5): P(0) = tanh(1/10) ≈ 0.1, E|Z| ≈ 5.
        let zeros = noisy.iter().filter(|&&count| count == 0).count();
        assert!((300..=520).contains(&zeros), "{zeros} of 4096 empty cells drew 0");
        let mean_abs = noisy.iter().map(|count| count.abs() as f64).sum::<f64>() / 4096.0;
        assert!((4.5..5.5).contains(&mean_abs), "mean |noise| {mean_abs}");
        let counted = flat_histogram(&[1000; 4096], scale, &key);
        let shifted = counted.iter().zip(&noisy).all(|(&with, &without)| with == without + 1000);
        assert!(shifted, "the same noise is added to the counts, not drawn anew");
    }

    /// [`MarginalPlan::rows_for_depth`] is where the trees a release runs ([`MarginalPlan::tree`]) first
    /// reach the depth: one row fewer stays shallower, for n̂ under add-remove and the public n under replace.
    #[test]
    fn rows_for_depth_is_where_the_released_trees_first_reach_it() {
        use crate::geometry::partition::MAX_DEPTH;
        for neighbours in [Neighbours::AddRemove, Neighbours::Replace] {
            for epsilon in [0.1, 2.0] {
                let public = |file_rows| crate::testing::public_inputs(4, epsilon, neighbours, file_rows);
                let row_count = NoisyRowCount::plan(epsilon / 16.0).unwrap();
                let released = (neighbours == Neighbours::AddRemove).then_some(row_count);
                let depth_at = |rows: u64| {
                    let plan = MarginalPlan::new(&public(rows), 0.3, &PmmOptions::DEFAULT).unwrap();
                    plan.tree(released.map(|row_count| (rows, row_count))).unwrap().schedule.depth
                };
                let plan = MarginalPlan::new(&public(1000), 0.3, &PmmOptions::DEFAULT).unwrap();
                for depth in 1..=8 {
                    let rows = plan.rows_for_depth(depth, released).unwrap().unwrap();
                    let case = format!("{neighbours:?}, ε = {epsilon}, depth {depth}: {rows} rows");
                    assert!(depth_at(rows) >= depth && depth_at(rows - 1) < depth, "{case}");
                }
                assert_eq!(plan.rows_for_depth(MAX_DEPTH + 1, released).unwrap(), None, "deeper than any tree");
            }
        }
    }

    #[test]
    fn shares_are_whole_counts_in_proportion_that_sum_to_the_total() {
        assert_eq!(apportion(10, &[1, 1, 1, 1]), [2, 3, 2, 3]);
        assert_eq!(apportion(100, &[0, 3, 0, 1]), [0, 75, 0, 25]);
        assert_eq!(apportion(7, &[0, 0]), [3, 4], "evenly where every weight is 0");
        assert_eq!(apportion(0, &[5, 5]), [0, 0]);
        let shares = apportion(1_000_003, &[17, 0, 250, 3, 99_999]);
        assert_eq!(shares.iter().sum::<u64>(), 1_000_003);
    }

    /// Rows in 7% of the bounds: PrivTree cuts that part finely and leaves the rest in a few wide cells,
    /// every cell noised (empty ones included), and the released counts keep the rows where they are.
    #[test]
    fn an_adaptive_marginal_cuts_finely_where_the_rows_are_only() {
        let deepest = ADAPTIVE_CELL_DEPTH;
        let mut rng = case_rng(0xada);
        let mut leaves = vec![0u64; 1 << deepest];
        let (low, high) = (2048, 2048 + 287);
        for _ in 0..50_000 {
            leaves[rng.random_range(low..high)] += 1;
        }
        // ε = 0.0125 a column (ε = 0.1 over 4 columns at the marginal share 0.5), add-remove.
        let tree = AdaptiveTree::new(1.0, 0.0125).unwrap();
        assert!((tree.split_epsilon(1.0) + tree.count_epsilon(1.0) - 0.0125).abs() < 1e-6);
        let (mut inside_cells, mut outside_mass, mut noise) = (0usize, 0u64, Vec::new());
        for seed in 0..20 {
            let key = NoiseKey::from_user_seed(seed);
            let cells = adaptive_cells(&leaves, &tree, &key);
            assert_eq!(cells, adaptive_cells(&leaves, &tree, &key), "seeded decisions repeat");
            let covered: u64 = cells.iter().map(|cell| 1u64 << (deepest - cell.depth)).sum();
            assert_eq!(covered, 1 << deepest, "the cells partition the axis");
            let within = |cell: &AdaptiveCell| {
                let width = 1usize << (deepest - cell.depth);
                let start = cell.index as usize * width;
                start >= low && start + width <= high
            };
            let outside = |cell: &&AdaptiveCell| {
                let width = 1usize << (deepest - cell.depth);
                let start = cell.index as usize * width;
                start + width <= low || start >= high
            };
            let inside = cells.iter().filter(|cell| within(cell)).count();
            let outside = cells.iter().filter(outside).count();
            assert!(outside < inside, "{outside} cells over the empty 93% of the axis, {inside} over the rows' 7%");
            inside_cells += inside;
            assert!(cells.len() < 200, "{} cells: the splits stop where the counts are noise", cells.len());
            let noisy = adaptive_counts(&leaves, &cells, &tree, &key);
            for (cell, &count) in cells.iter().zip(&noisy) {
                let width = 1usize << (deepest - cell.depth);
                let true_count: u64 = leaves[cell.index as usize * width..][..width].iter().sum();
                noise.push(count - true_count as i64);
            }
            let (counts, released_cells) = release_adaptive(&leaves, &tree, &key);
            assert_eq!((counts.len(), released_cells), (leaves.len(), cells.len()));
            outside_mass += counts[..low].iter().chain(&counts[high..]).sum::<u64>();
            let total: u64 = counts.iter().sum();
            assert!((45_000..55_000).contains(&total), "{total} of 50000 rows released");
        }
        assert!(inside_cells >= 20 * 8, "{inside_cells} cells in the rows' 7% over 20 runs");
        assert!(outside_mass < 20 * 2_500, "{outside_mass} rows released outside the rows' range over 20 runs");
        // Lap_Z(σ): E|Z| ≈ σ on every cell.
        let mean_abs = noise.iter().map(|count| count.abs() as f64).sum::<f64>() / noise.len() as f64;
        let expected = tree.count_scale.to_f64();
        assert!((0.8 * expected..1.2 * expected).contains(&mean_abs), "mean |noise| {mean_abs} for {expected}");
    }

    /// The bias δ is the least whole count with e^(−δ/λ) ≤ ½, which the split decisions' bound needs.
    #[test]
    fn an_adaptive_marginals_bias_halves_the_split_odds_per_level() {
        for sigma in [0.7, 1.0, 3.0, 6.0, 535.3, 1e6] {
            let tree = AdaptiveTree::with_scales(RationalScale::round_up(sigma).unwrap(), RationalScale::round_up(1.0).unwrap());
            let lambda = tree.split_scale.to_f64();
            assert!((-(tree.bias as f64) / lambda).exp() <= 0.5, "λ = {lambda}: δ = {}", tree.bias);
            assert!(tree.bias == 1 || (-((tree.bias - 1) as f64) / lambda).exp() > 0.5, "λ = {lambda}: δ = {} not least", tree.bias);
        }
    }

    /// The edges of `grid` that a cell of `warped` crosses, over `values`.
    fn crossed_edges(warped: &AxisPlan, grid: &AxisPlan, values: &[f64]) -> BTreeSet<u32> {
        let mut spans: HashMap<u32, (u32, u32)> = HashMap::new();
        for &value in values {
            let (cell, grid_cell) = (warped.quantize(value), grid.quantize(value));
            let span = spans.entry(cell).or_insert((grid_cell, grid_cell));
            *span = (span.0.min(grid_cell), span.1.max(grid_cell));
        }
        spans.values().flat_map(|&(first, last)| first + 1..=last).collect()
    }

    #[test]
    fn the_quantile_partitions_cells_nest_in_the_pair_cells_where_it_has_several() {
        let mut rng = case_rng(0xa119);
        let bounds = ColumnBounds::new("delay", -60.0, 1500.0).unwrap();
        // Released marginals: a heavy-tailed column on 2^12 cells, a spike, a few coarse cells, none.
        let heavy: Vec<u64> =
            (0..1 << 12).map(|cell| (4e6 * (1.0 + cell as f64 / 20.0).powf(-2.5)) as u64).collect();
        let spike: Vec<u64> =
            (0..1 << 10).map(|cell| if cell == 300 { 10_000 } else { rng.random_range(0..3) }).collect();
        let marginals = [heavy, spike, vec![0, 9, 1, 0], vec![0; 64]];
        // Values on the grid's edges (as whole minutes), next to them, and anywhere.
        let edges = (0..=32).map(|edge| -60.0 + 1560.0 * edge as f64 / 32.0);
        let mut values: Vec<f64> =
            edges.flat_map(|edge| [edge, edge.next_down(), edge.next_up(), edge.round()]).collect();
        values.extend((0..20_000).map(|_| rng.random_range(-60.0..1500.0)));
        values.extend((-60..=1500).map(f64::from));
        let mut aligned_edges = 0;
        for counts in &marginals {
            let released = CellCdf::from_counts(counts).unwrap_or_else(CellCdf::uniform);
            let unaligned = released.mixed_with_uniform(QUANTILE_WARP_WEIGHT);
            for bits in 1..=9 {
                let warp = quantile_warp(counts, bits);
                if 1 << bits < 2 * QUANTILE_ALIGNED_CELLS {
                    assert_eq!(warp, unaligned, "{bits} bits: too few cells to align");
                    continue;
                }
                let warped = AxisPlan::warped(bounds.clone(), bits, Arc::new(warp));
                let cells = QUANTILE_ALIGNED_CELLS;
                let grid = AxisPlan::with_cells(bounds.clone(), cells as u32);
                // The axis's cells the warp puts in grid cell j, before the alignment.
                let holds = |j: u32| {
                    let edge = |j: u32| unaligned.value(f64::from(j) / cells as f64);
                    (edge(j + 1) - edge(j)) * f64::from(1u32 << bits)
                };
                let heavy_next_to = |edge: u32| {
                    (edge > 0 && holds(edge - 1) >= QUANTILE_ALIGN_MIN_CELLS)
                        || (edge < cells as u32 && holds(edge) >= QUANTILE_ALIGN_MIN_CELLS)
                };
                aligned_edges += (1..cells as u32).filter(|&edge| heavy_next_to(edge)).count();
                for edge in crossed_edges(&warped, &grid, &values) {
                    assert!(!heavy_next_to(edge), "{} cells, {bits} bits: edge {edge} crossed", counts.len());
                }
            }
        }
        assert!(aligned_edges > 50, "{aligned_edges} edges next to a grid cell of several cells");
        // Without the alignment the heavy column's cells cross the edge of its heaviest grid cell.
        let unaligned = CellCdf::from_counts(&marginals[0]).unwrap().mixed_with_uniform(QUANTILE_WARP_WEIGHT);
        let warped = AxisPlan::warped(bounds.clone(), 7, Arc::new(unaligned));
        assert!(crossed_edges(&warped, &AxisPlan::with_cells(bounds, 32), &values).contains(&1));
    }

    /// A coded column's marginal: a cell per code (every code in a cell of its own, as deep as the pair
    /// cells at least), Laplace noise on every code's cell in code order, empty codes included, and none
    /// on the cells that hold no code.
    #[test]
    fn a_coded_marginal_noises_every_code_and_only_the_codes() {
        assert_eq!((code_depth(1480), code_depth(3), code_depth(2)), (11, PAIR_BITS, PAIR_BITS));
        let scale = RationalScale::round_up(5.0).unwrap();
        let key = NoiseKey::from_user_seed(11);
        for slots in [2, 3, 17, 33, 1480] {
            let coded = CodedMarginal::new(slots, scale);
            let mut cells = coded.code_cells.clone();
            cells.dedup();
            assert_eq!(cells.len(), slots, "{slots} codes in cells of their own, in order");
            // The binner's cell of each code's value on the axis.
            let axis = AxisPlan::new(ColumnBounds::new("c", -1.5, slots as f64 - 1.5).unwrap(), coded.depth);
            let binned: Vec<u32> = (0..slots).map(|slot| axis.quantize(slot as f64 - 1.0)).collect();
            assert_eq!(binned, coded.code_cells, "{slots} slots: a nullable axis bins its codes in the same cells");
            // Code 1 holds no row; the others 1000 each.
            let mut leaves = vec![0u64; 1 << coded.depth];
            let counts: Vec<u64> = (0..slots).map(|slot| if slot == 1 { 0 } else { 1000 }).collect();
            for (&cell, &count) in coded.code_cells.iter().zip(&counts) {
                leaves[cell as usize] = count;
            }
            let released = coded.release(&leaves, &key);
            let noisy = flat_histogram(&counts, scale, &key);
            for (slot, (&cell, &noisy)) in coded.code_cells.iter().zip(&noisy).enumerate() {
                assert_eq!(released[cell as usize], pruned(noisy, coded.floor), "{slots} slots, code {slot}");
            }
            let off_code = (0..leaves.len() as u32).filter(|cell| !coded.code_cells.contains(cell));
            assert!(off_code.into_iter().all(|cell| released[cell as usize] == 0), "no mass off the codes");
        }
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
