//! 2-way marginals by conditional mapping (`--pair-share`, docs/mechanisms/pmm.md). At d ≥ 4 the joint
//! tree has a few cells per axis, and how pairs of columns move together is what it loses first. A
//! declared share of ε releases d − 1 pair histograms (32 × 32 equal cells on the public bounds) for
//! the pairs of a tree chosen where the joint release is most wrong: every pair's ℓ1 distance between
//! the data's histogram and the one of rows drawn from the joint release, released with noise (a tenth
//! of the share), and the maximum spanning tree of those noisy scores. Then, pair by
//! pair from column 0 outwards, each synthetic child value is moved, order kept, within its parent's
//! cell onto that row of the released histogram (x ↦ G_b⁻¹(F_b(x)), G_b spreading each released cell's
//! rows inside it as the synthetic rows are), the released rows first fitted to both columns' marginals
//! of the drawn rows; then a number is put back onto its own 1-D marginal keeping its new ranks. A pair is
//! mapped only where its released rows disagree with
//! the synthetic table's own conditionals beyond their noise; elsewhere the release only repeats what
//! the joint release says, and mapping onto it would add its noise. The maps are fitted on rows drawn
//! from the joint release and read released counts only.

use std::ops::Range;

use rayon::prelude::*;
use serde::Serialize;

use super::marginals::{code_leaves, MonotoneMap, ReleasedMarginals};
use super::pair_axis::{cell_of, PairAxis, PAIR_BITS, PAIR_CELLS};
use crate::binner::histogram::count_pair;
use crate::binner::pass::PairCut;
use crate::error::{Error, Result};
use crate::geometry::cdf::CellCdf;
use crate::mechanism::PublicInputs;
use crate::noise::discrete_laplace::RationalScale;
use crate::noise::laplace_table::ScaleSampler;
use crate::privacy::{noise_scale, Budget, NoiseKey, NoiseStream, RunSeeds};
use crate::ranks::RankSums;
use crate::sampler::RowGenerator;

/// Released counts below this many noise scales are taken as empty before rows are mapped onto them.
pub const PAIR_PRUNE_SCALES: f64 = 3.0;

/// A pair is mapped where the median over its parent's cells of the disagreement z-score
/// ([`disagreement`]) exceeds this: at 5 the mapping kept its gains on flights and cost 0.5–6% of joint
/// W1 on generated tables whose pairs the joint release already gets right (ungated: up to 29%).
pub const PAIR_GATE_Z: f64 = 5.0;

/// ... or where the median over the rows does (each row counting with its parent cell's z): a long-tailed
/// parent has many thin cells where the release is mostly noise, and their median can hide a pair the
/// joint release gets wrong where the rows are (flights' delays: z over the cells 1.3–2.8 in two seeds of
/// five, 2-way TV 0.09 unmapped). At 5 over the rows the gate also mapped pairs of a skewed table at z =
/// 5–6, which cost it 4% of joint W1; the flights pairs that gain score 31–500 (docs/mechanisms/pmm.md).
pub const PAIR_ROWS_GATE_Z: f64 = 20.0;

/// The fewest rows drawn from the joint release to choose the pairs and fit the maps on: below it a
/// table's rows are drawn more than once over.
pub const PAIR_SAMPLE_MIN_ROWS: usize = 1 << 20;

/// The most values (rows × columns) drawn for the pairs: 200 MB with their cells. Twice as many (2^23
/// rows at d = 4) scored no better on 10^7 rows and took the run 1.25× as long (docs/mechanisms/pmm.md).
pub const PAIR_SAMPLE_VALUES: usize = 1 << 24;

/// The part of the pairs' share spent on the noisy scores that choose the tree. The tree used to be the
/// mutual information of the drawn rows, free but blind to what the joint release had lost: on flights
/// at d = 6 hour against distance and air time came out independent (2-way TV 0.10–0.14) and were never
/// chosen. 0.05 had the noisiest scores at ε = 0.1 (2-way TV 5% worse at d = 5), 0.25 left the
/// histograms less (4% worse overall; docs/mechanisms/pmm.md, "Choosing the pairs where the joint
/// release is wrong").
pub const PAIR_SELECTION_FRACTION: f64 = 0.1;

/// Equal cells of the child's fitted CDF within one parent cell (on its quantile).
const CONDITIONAL_CELLS: usize = 1 << 10;

/// Knots per parent cell of each tabulated pair map: one lookup and a linear step per written row
/// instead of two CDF lookups and two inversions, which halved sampling and writing at 10^7 rows, with
/// joint W1 and 2-way TV on flights within 2% of the exact maps (docs/mechanisms/pmm.md).
pub const MAP_KNOTS: usize = 1 << 12;

/// The pair histograms' share of ε: [`PAIR_SELECTION_FRACTION`] of it on the scores of all d(d − 1)/2
/// pairs, the rest split evenly over the d − 1 pairs of the tree.
#[derive(Clone, Debug)]
pub struct PairPlan {
    share: f64,
    scale: RationalScale,
    /// The scores' scale; `None` at d = 2, where the one pair is the tree.
    selection_scale: Option<RationalScale>,
    /// A row's ℓ1 effect on one histogram (and on one score) under the run's neighbouring relation.
    sensitivity: f64,
    dims: usize,
    /// Per column, a categorical or Boolean column's code slots, 0 for a number.
    codes: Vec<usize>,
    /// Per column, the share of a nullable number's axis its null band takes (0: none).
    null_bands: Vec<f64>,
}

/// What the report says about the pairs.
#[derive(Clone, Debug, Serialize)]
pub struct PairParameters {
    pub share: f64,
    pub epsilon_per_pair: f64,
    /// What the noisy scores that chose the tree spent (0 at d = 2), and their Laplace scale.
    pub selection_epsilon: f64,
    pub selection_sigma: f64,
    /// A number's cells (equal ones of its public bounds).
    pub cells_per_axis: usize,
    /// Each column's cells in the pair histograms: a coded column's are its codes with released rows.
    pub cells_of_columns: Vec<usize>,
    /// The Laplace scale of every cell of every pair histogram.
    pub sigma: f64,
    /// Released counts below it were taken as empty.
    pub prune_floor: f64,
    pub gate_z: f64,
    pub gate_z_over_rows: f64,
    pub sample_rows: usize,
    /// The tree's pairs in the order they were mapped (columns numbered in the run's column order).
    pub pairs: Vec<PairInfo>,
    pub tree: &'static str,
    pub map: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct PairInfo {
    pub parent: usize,
    pub child: usize,
    /// The released ℓ1 distance between the data's histogram of the pair and the drawn rows' (in rows;
    /// none at d = 2, where nothing is chosen).
    pub noisy_score: Option<i64>,
    /// The median over the parent's cells of the z-score of the released rows against the synthetic
    /// conditionals ([`PAIR_GATE_Z`]).
    pub disagreement_z: f64,
    /// The same z-scores' median over the rows ([`PAIR_ROWS_GATE_Z`]).
    pub disagreement_z_over_rows: f64,
    pub mapped: bool,
}

impl PairPlan {
    /// `share` of `public.epsilon`: the scores, then the d − 1 pairs; `codes`: per column, a coded column's
    /// code slots, 0 for a number (empty: all numbers); `null_bands`: per number, the share of its axis its
    /// null band takes, 0 where it has none (empty: none has).
    pub fn new(public: &PublicInputs, share: f64, codes: &[usize], null_bands: &[f64]) -> Result<Self> {
        if public.dims < 2 {
            return Err(Error::bad_input("--pair-share releases pairs of columns: it needs at least 2 columns"));
        }
        let sensitivity = public.neighbours.histogram_sensitivity();
        let selection_scale = match candidate_count(public.dims) {
            1 => None,
            // A row moves every pair's score by at most the sensitivity: ℓ1 sensitivity P·Δ for P scores.
            candidates => {
                let epsilon = public.epsilon * share * PAIR_SELECTION_FRACTION;
                Some(noise_scale(candidates as f64 * sensitivity / epsilon, "the pair scores (--pair-share)")?)
            }
        };
        let histograms = if selection_scale.is_some() { 1.0 - PAIR_SELECTION_FRACTION } else { 1.0 };
        let epsilon_per_pair = public.epsilon * share * histograms / (public.dims - 1) as f64;
        let scale = noise_scale(sensitivity / epsilon_per_pair, "a pair histogram (--pair-share)")?;
        let codes = (0..public.dims).map(|column| codes.get(column).copied().unwrap_or(0)).collect();
        let null_bands = (0..public.dims).map(|column| null_bands.get(column).copied().unwrap_or(0.0)).collect();
        Ok(PairPlan { share, scale, selection_scale, sensitivity, dims: public.dims, codes, null_bands })
    }

    /// Each column's pair cells: a coded column's from its released 1-D marginal where there is one
    /// ([`PairAxis::of_codes`], as many as [`PairAxis::coded_cells_for`] the joint release's
    /// `released_rows` allows), else equal cells (beside a null cell for a nullable number).
    pub fn axes(&self, marginals: Option<&ReleasedMarginals>, released_rows: u64) -> Vec<PairAxis> {
        let most_cells = PairAxis::coded_cells_for(released_rows, self.scale.to_f64());
        (self.codes.iter().enumerate())
            .map(|(column, &slots)| match marginals {
                Some(released) if slots > 0 => {
                    let (_, leaves) = code_leaves(slots);
                    let counts = &released.counts[column];
                    PairAxis::of_codes(&leaves.iter().map(|&leaf| counts[leaf as usize]).collect::<Vec<_>>(), most_cells)
                }
                _ => self.number_axis(column),
            })
            .collect()
    }

    /// A number's pair cells, or a coded column's where no 1-D marginal says which of its codes have rows.
    fn number_axis(&self, column: usize) -> PairAxis {
        match self.null_bands[column] {
            band if band > 0.0 && self.codes[column] == 0 => PairAxis::NullBand(band),
            _ => PairAxis::Equal,
        }
    }

    /// How the data's pass puts each column in `axes`' cells: binned at the depth they need (a number at
    /// [`PAIR_BITS`], a coded column at its codes' depth), grouped into them.
    pub fn cuts(&self, axes: &[PairAxis]) -> Vec<PairCut> {
        let fine = self.fine_cuts();
        axes.iter().zip(fine).map(|(axis, fine)| axis.cut(fine.bits)).collect()
    }

    /// The cells a pass may count the pairs on before the 1-D marginals are released, fine enough to be
    /// grouped into any of [`Self::cuts`] afterwards ([`Self::regroupings`]): [`PAIR_BITS`] for a number, a
    /// cell per code; a nullable number's own cells, which no release changes.
    pub fn fine_cuts(&self) -> Vec<PairCut> {
        (self.codes.iter().enumerate())
            .map(|(column, &slots)| match self.number_axis(column) {
                axis @ PairAxis::NullBand(_) => axis.cut(axis.bits()),
                _ => PairCut::equal(if slots == 0 { PAIR_BITS } else { code_leaves(slots).0 }),
            })
            .collect()
    }

    /// How the cells of [`Self::fine_cuts`] group into `axes`' cells (a nullable number's are already them).
    pub fn regroupings(&self, axes: &[PairAxis]) -> Vec<PairCut> {
        (self.fine_cuts().into_iter().zip(axes))
            .map(|(fine, axis)| match fine.groups {
                Some(_) => PairCut { bits: fine.bits, groups: Some((0..fine.cells as u32).collect()), cells: fine.cells },
                None => axis.cut(fine.bits),
            })
            .collect()
    }

    /// What each pair histogram spends: its sensitivity over its (rounded-up) scale.
    pub fn epsilon_per_pair(&self) -> f64 {
        self.sensitivity / self.scale.to_f64()
    }

    /// What the scores spend together: their ℓ1 sensitivity over their (rounded-up) scale.
    pub fn selection_epsilon(&self) -> f64 {
        let candidates = candidate_count(self.dims) as f64;
        self.selection_scale.map_or(0.0, |scale| candidates * self.sensitivity / scale.to_f64())
    }

    /// One pair's histogram with Lap_Z(σ) on every cell, empty ones included; negative counts are kept
    /// (the gate reads them unthresholded).
    pub fn noisy_histogram(&self, counts: &[u64], (parent, child): (usize, usize), key: &NoiseKey) -> Vec<i64> {
        let mut rng = key.stream(NoiseStream::PairHistogram, (parent * self.dims + child) as u64);
        ScaleSampler::new(self.scale).noisy_counts(counts, &mut rng)
    }

    /// The scores of [`candidate_pairs`] with Lap_Z(σ) each, from one stream in that order (`None` at
    /// d = 2, which releases no score).
    pub fn noisy_scores(&self, scores: &[u64], key: &NoiseKey) -> Option<Vec<i64>> {
        let scale = self.selection_scale?;
        Some(ScaleSampler::new(scale).noisy_counts(scores, &mut key.stream(NoiseStream::PairSelection, 0)))
    }

    /// How many rows are drawn from a joint release of `released_rows` to choose the pairs and fit the
    /// maps on: as many as it has, within [`PAIR_SAMPLE_MIN_ROWS`] and [`PAIR_SAMPLE_VALUES`] / d. A fixed
    /// 2^20 on 10^7 rows fitted the maps on a tenth of them and read that tenth's sampling noise as the
    /// joint release's error (every pair of a uniform table mapped at ε = 10); 4·10^6 rows there cut the
    /// 2-way TV by 4–38% and the largest 1-D W1 by 3–42% on generated tables, for 1.3× the run's time
    /// (docs/mechanisms/pmm.md, "The rows drawn for the pairs").
    pub fn drawn_rows(&self, released_rows: u64) -> usize {
        let most = (PAIR_SAMPLE_VALUES / self.dims).max(PAIR_SAMPLE_MIN_ROWS);
        (released_rows as usize).clamp(PAIR_SAMPLE_MIN_ROWS, most)
    }

    /// Releases the pair histograms, on `axes`' cells, of the tree chosen from the rows drawn from the joint
    /// release (`drawn`, seeded by [`RunSeeds::pair_sample`]) and the data's histograms of the pairs it is
    /// given (`pair_counts`, on `axes`' cells; it is given [`candidate_pairs`]), and fits the maps of the
    /// pairs the gate lets through; the maps come back in the order they apply.
    pub fn release_on(
        &self,
        mut drawn: DrawnRows,
        axes: &[PairAxis],
        pair_counts: impl FnOnce(&[(usize, usize)]) -> Result<Vec<Vec<u64>>>,
        seeds: &RunSeeds,
    ) -> Result<(Vec<PairMap>, PairParameters)> {
        let mut cells: Vec<Vec<u32>> = drawn.columns.iter().zip(axes).map(|(values, axis)| pair_cells(values, axis)).collect();
        let candidates = candidate_pairs(self.dims);
        let counts = pair_counts(&candidates)?;
        // Every candidate's histogram of the drawn rows, from one pass over them (in candidate order).
        let drawn_pairs = drawn.histogram(pair_histograms(&cells, &candidates, axes));
        let mut rest = drawn_pairs.as_slice();
        let drawn_pairs: Vec<&[u64]> = (candidates.iter())
            .map(|&(a, b)| {
                let (pair, after) = rest.split_at(axes[a].cells() * axes[b].cells());
                rest = after;
                pair
            })
            .collect();
        let scores: Vec<u64> = (counts.iter().zip(&drawn_pairs))
            .map(|(counts, synthetic)| distance_to_drawn(counts, synthetic, drawn.released_rows))
            .collect();
        let noisy_scores = self.noisy_scores(&scores, &seeds.noise);
        let tree = match &noisy_scores {
            Some(noisy) => spanning_tree(self.dims, |a, b| noisy[candidate_index(self.dims, a, b)]),
            None => candidates,
        };
        let sigma = self.scale.to_f64();
        let (mut maps, mut pairs) = (Vec::new(), Vec::new());
        let mut moved = vec![false; self.dims];
        for &(parent, child) in &tree {
            let index = candidate_index(self.dims, parent, child);
            let (parent_cells, child_cells) = (axes[parent].cells(), axes[child].cells());
            // A candidate's histogram has its lower column first.
            let in_order = |counts: &[u64]| match parent < child {
                true => counts.to_vec(),
                false => transposed(counts, parent_cells),
            };
            let noisy = self.noisy_histogram(&in_order(&counts[index]), (parent, child), &seeds.noise);
            // The drawn rows' histogram of the pair is the candidate's until a map moves one of its columns.
            let synthetic = match moved[parent] || moved[child] {
                false => in_order(drawn_pairs[index]),
                true => drawn.histogram(pair_histogram(&cells[parent], &cells[child], (parent_cells, child_cells))),
            };
            let (disagreement_z, disagreement_z_over_rows) = disagreement(&synthetic, &noisy, sigma, child_cells);
            let mapped = disagreement_z > PAIR_GATE_Z || disagreement_z_over_rows > PAIR_ROWS_GATE_Z;
            if mapped {
                let floor = PAIR_PRUNE_SCALES * sigma;
                let released: Vec<u64> =
                    noisy.iter().map(|&count| if (count as f64) < floor { 0 } else { count as u64 }).collect();
                let axes = (&axes[parent], &axes[child]);
                let map = PairMap::fit((parent, child), axes, &cells[parent], &drawn, &released, self.codes[child] > 0);
                map.apply(&mut drawn.columns);
                cells[child] = pair_cells(&drawn.columns[child], axes.1);
                moved[child] = true;
                maps.push(map);
            }
            let noisy_score = noisy_scores.as_ref().map(|noisy| noisy[index]);
            pairs.push(PairInfo { parent, child, noisy_score, disagreement_z, disagreement_z_over_rows, mapped });
        }
        let parameters = PairParameters {
            share: self.share,
            epsilon_per_pair: self.epsilon_per_pair(),
            selection_epsilon: self.selection_epsilon(),
            selection_sigma: self.selection_scale.map_or(0.0, |scale| scale.to_f64()),
            cells_per_axis: PAIR_CELLS,
            cells_of_columns: axes.iter().map(PairAxis::cells).collect(),
            sigma,
            prune_floor: PAIR_PRUNE_SCALES * sigma,
            gate_z: PAIR_GATE_Z,
            gate_z_over_rows: PAIR_ROWS_GATE_Z,
            sample_rows: self.drawn_rows(drawn.released_rows),
            pairs,
            tree: "maximum spanning tree of the noisy scores, grown from column 0; a pair's score is the l1 distance \
                   between the data's histogram of it (32 equal cells of a number's bounds and one for its null, a \
                   cell per code the released 1-D marginal gives rows) and that of rows drawn from the joint \
                   release (scaled to its released rows), with Laplace noise",
            map: "in tree order, where the gate lets a pair through: x -> G_b^-1(F_b(x)) on the child, b the \
                  parent's cell, F_b the synthetic child's CDF in it, G_b the released row's (pruned, each \
                  cell's rows spread inside it as the synthetic rows are; the released rows first fitted to both \
                  columns' marginals of the drawn rows); then a number child back onto its own 1-D marginal \
                  keeping its new ranks; fitted on rows drawn from the joint release; \
                  post-processing",
        };
        Ok((maps, parameters))
    }
}

/// The rows drawn from the joint release that the pairs are chosen and fitted on: all of them on one
/// machine; across ranks each rank's share, whose histograms are summed over the `ranks`, so that every
/// rank chooses, gates and fits from the same counts as one machine would.
pub struct DrawnRows<'a> {
    pub columns: Vec<Vec<f64>>,
    /// The joint release's total (released, so the scores may scale the drawn rows to it).
    pub released_rows: u64,
    pub ranks: &'a dyn RankSums,
}

impl DrawnRows<'_> {
    /// `counts` of these rows summed with the other ranks' (as they are on one machine).
    fn histogram(&self, mut counts: Vec<u64>) -> Vec<u64> {
        self.ranks.sum(&mut counts);
        counts
    }
}

impl PairParameters {
    /// Adds the scores and every pair histogram to `budget`, mapped or not: all of them were released.
    pub fn spend(&self, budget: &mut Budget) {
        if self.selection_epsilon > 0.0 {
            budget.spend("pair scores (choosing the pairs)", self.selection_epsilon);
        }
        for pair in &self.pairs {
            budget.spend(format!("pair marginal of columns {} and {}", pair.parent, pair.child), self.epsilon_per_pair);
        }
    }
}

/// One pair's map: the child moved within each parent cell, then (a number) put back onto its own marginal;
/// tabulated per parent cell at [`MAP_KNOTS`] + 1 equally spaced quantiles of the child's marginal and
/// linear between them.
///
/// The child's conditionals and the knots live on its quantile u = F(x) (F the drawn child's marginal on
/// its finer cells, [`PairAxis::fine_cells`]), not on x: an integer column with fine released cells (month at ε = 10: 2048
/// cells on [1, 12]) has all its mass in spikes narrower than a conditional cell or a knot step in x, and
/// a map tabulated in x spread each spike's rows over the wrong integers (its largest 1-D W1 5–20× the
/// unmapped column's on flights, d = 6). On u every cell holds about the same share of the rows.
#[derive(Clone, Debug)]
pub struct PairMap {
    parent: usize,
    child: usize,
    /// The parent's pair cells.
    parent_axis: PairAxis,
    /// The drawn child's marginal F (`None`: no rows were drawn; u = x).
    quantile: Option<CellCdf>,
    /// Parent cell b's map at child quantile u = k / MAP_KNOTS: `knots[b · (MAP_KNOTS + 1) + k]`.
    knots: Vec<f64>,
    /// A categorical or Boolean child takes the nearest knot's value instead of a value between two: where
    /// two neighbouring knots lie on different codes, a value between them lies on a code between those,
    /// one the release may give no row (flights' destinations: 105 airports of a 1 480-airport list, 0.6%
    /// of the rows moved onto airports without flights at every ε).
    discrete: bool,
}

impl PairMap {
    /// The map's parts, for a saved release: the parent and child columns, the parent's pair cells, the drawn
    /// child's marginal, the knots, and whether the child is discrete.
    pub fn parts(&self) -> (usize, usize, &PairAxis, Option<&CellCdf>, &[f64], bool) {
        (self.parent, self.child, &self.parent_axis, self.quantile.as_ref(), &self.knots, self.discrete)
    }

    /// The map with these [`PairMap::parts`]; `None` where they do not make a map between two of `dims`
    /// columns.
    pub fn from_parts(
        (parent, child, parent_axis): (usize, usize, PairAxis),
        quantile: Option<CellCdf>,
        (knots, discrete): (Vec<f64>, bool),
        dims: usize,
    ) -> Option<PairMap> {
        let knots_fit = knots.len() == parent_axis.cells() * (MAP_KNOTS + 1);
        let valid = parent < dims && child < dims && parent != child && knots_fit;
        valid.then_some(PairMap { parent, child, parent_axis, quantile, knots, discrete })
    }

    /// The map of the drawn child values (beside their parents' cells on `parent_axis`) onto the `released`
    /// rows (on the two axes' cells).
    fn fit(
        (parent, child): (usize, usize),
        (parent_axis, child_axis): (&PairAxis, &PairAxis),
        parent_cells: &[u32],
        drawn: &DrawnRows,
        released: &[u64],
        discrete: bool,
    ) -> PairMap {
        let child_values = &drawn.columns[child];
        let (parents, fine) = (parent_axis.cells(), child_axis.fine_cells());
        // The drawn child's shape on x in each parent cell, finer than the released rows; summed over the
        // parent cells, its whole 1-D marginal.
        let shapes = drawn.histogram(counts_on_the_pool(parents * fine, parent_cells.len(), |row| {
            parent_cells[row] as usize * fine + cell_of(child_values[row], fine)
        }));
        let marginal_counts = shapes.chunks_exact(fine).fold(vec![0; fine], |mut sum, shape| {
            sum.iter_mut().zip(shape).for_each(|(sum, &count)| *sum += count);
            sum
        });
        let cell_of_fine = child_axis.cell_of_fine();
        // Where a parent cell has no drawn rows in a child cell, a coded child's released rows there go to
        // its codes as the drawn rows' marginal has them: spread evenly, they would land on codes the 1-D
        // release pruned.
        let coded = matches!(child_axis, PairAxis::Codes(_));
        let fallback = coded.then_some(marginal_counts.as_slice());
        // The released rows fitted to the drawn rows' marginals of both columns (post-processing), so that
        // the moved child keeps its own marginal on the pair cells. The step back onto it keeps ranks, and
        // where the release's child marginal differed from the drawn one that step moved ranks across cells:
        // flights' distances left their destination's cell (2-way TV 0.14–0.22 against 0.02 fitted), and a
        // coded child's rows took the codes beside theirs in the list (Honolulu flights with 75-minute air
        // times). A coded child takes no step back at all: the fitted rows are its marginal.
        let parent_rows: Vec<u64> = shapes.chunks_exact(fine).map(|shape| shape.iter().sum()).collect();
        let mut child_rows = vec![0u64; child_axis.cells()];
        marginal_counts.iter().zip(&cell_of_fine).for_each(|(&count, &cell)| child_rows[cell as usize] += count);
        let released = raked(released, &parent_rows, &child_rows);
        let released = released.as_slice();
        let quantile = CellCdf::from_counts(&marginal_counts);
        let to_quantile = |x: f64| quantile.as_ref().map_or(x, |cdf| cdf.value(x));
        let to_value = |u: f64| quantile.as_ref().map_or(u, |cdf| cdf.inverse(u));
        // The drawn rows' quantiles and moved values are only counted: worked out row by row where they are,
        // not kept (two more columns of millions of rows to allocate and fill).
        let child_quantile = |row: usize| to_quantile(child_values[row]);
        let within = drawn.histogram(counts_on_the_pool(parents * CONDITIONAL_CELLS, parent_cells.len(), |row| {
            parent_cells[row] as usize * CONDITIONAL_CELLS + cell_of(child_quantile(row), CONDITIONAL_CELLS)
        }));
        // Per parent cell, F_b (on u) → G_b (on x); none where the drawn rows or the release have nothing
        // in that cell.
        let conditionals: Vec<Option<MonotoneMap>> = within
            .par_chunks_exact(CONDITIONAL_CELLS)
            .zip(shapes.par_chunks_exact(fine))
            .zip(released.par_chunks_exact(child_axis.cells()))
            .map(|((synthetic, shape), released)| {
                let to = CellCdf::from_weights(&released_within(shape, released, &cell_of_fine, fallback))?;
                Some(MonotoneMap { from: CellCdf::from_counts(synthetic)?, to })
            })
            .collect();
        // A coded child's mapped values settle on the centre of the nearest code the drawn rows have. The
        // inverse CDFs put a value on the upper edge of a code where the next codes have no rows, and that
        // edge is the next code's: whole parent cells of flights' destinations went to airports without
        // flights (1-D TV 0.18).
        let settled = coded.then(|| nearest_with_rows(&marginal_counts));
        let settle = |value: f64| match &settled {
            Some(nearest) => (nearest[cell_of(value, fine)] as f64 + 0.5) / fine as f64,
            None => value,
        };
        let conditional =
            |cell: usize, u: f64| conditionals[cell].as_ref().map_or_else(|| to_value(u), |map| map.apply(u));
        // A number: the moved child's marginal → the child's marginal before the move.
        let marginal = match coded {
            true => None,
            false => {
                let moved_counts = counts_on_the_pool(fine, parent_cells.len(), |row| {
                    cell_of(conditional(parent_cells[row] as usize, child_quantile(row)), fine)
                });
                let moved = CellCdf::from_counts(&drawn.histogram(moved_counts));
                moved.zip(quantile.clone()).map(|(from, to)| MonotoneMap { from, to })
            }
        };
        let cell_knots = |cell: usize| -> Vec<f64> {
            (0..=MAP_KNOTS)
                .map(|knot| {
                    let moved = conditional(cell, knot as f64 / MAP_KNOTS as f64);
                    settle(marginal.as_ref().map_or(moved, |map| map.apply(moved)))
                })
                .collect()
        };
        let knots = (0..parents).into_par_iter().map(cell_knots).collect::<Vec<_>>().concat();
        PairMap { parent, child, parent_axis: parent_axis.clone(), quantile, knots, discrete }
    }

    /// The child value `value` mapped beside the parent value `parent` ([`Self::map_all`] maps many).
    #[cfg(test)]
    fn map(&self, parent: f64, value: f64) -> f64 {
        let knots = &self.knots[self.parent_axis.cell_of(parent) * (MAP_KNOTS + 1)..][..=MAP_KNOTS];
        let u = self.quantile.as_ref().map_or(value, |cdf| cdf.value(value));
        let scaled = u.clamp(0.0, 1.0) * MAP_KNOTS as f64;
        if self.discrete {
            return knots[(scaled + 0.5) as usize];
        }
        let knot = (scaled as usize).min(MAP_KNOTS - 1);
        knots[knot] + (scaled - knot as f64) * (knots[knot + 1] - knots[knot])
    }

    /// Maps the child column of `columns` in place, row by row beside its parent.
    fn apply(&self, columns: &mut [Vec<f64>]) {
        const CHUNK: usize = 1 << 14;
        let mut child = std::mem::take(&mut columns[self.child]);
        let parent = &columns[self.parent];
        child.par_chunks_mut(CHUNK).zip(parent.par_chunks(CHUNK)).for_each(|(child, parent)| self.map_all(parent, child));
        columns[self.child] = child;
    }

    /// [`Self::map`] of every child value of `child` beside its parent in `parent`, in place and to the bit,
    /// in blocks: first every value's knot and its place between two, then the knots read, so that the
    /// reads of a block (the knots of 32 parent cells are a megabyte) are independent of one another.
    fn map_all(&self, parent: &[f64], child: &mut [f64]) {
        const BLOCK: usize = 64;
        let mut firsts = [0usize; BLOCK];
        for (child, parent) in child.chunks_mut(BLOCK).zip(parent.chunks(BLOCK)) {
            for ((value, &parent), first) in child.iter_mut().zip(parent).zip(&mut firsts) {
                let u = self.quantile.as_ref().map_or(*value, |cdf| cdf.value(*value));
                *value = u.clamp(0.0, 1.0) * MAP_KNOTS as f64;
                *first = self.parent_axis.cell_of(parent) * (MAP_KNOTS + 1);
            }
            if self.discrete {
                for (value, &first) in child.iter_mut().zip(&firsts) {
                    *value = self.knots[first + (*value + 0.5) as usize];
                }
                continue;
            }
            for (value, &first) in child.iter_mut().zip(&firsts) {
                let scaled = *value;
                let knot = (scaled as usize).min(MAP_KNOTS - 1);
                let (low, high) = (self.knots[first + knot], self.knots[first + knot + 1]);
                *value = low + (scaled - knot as f64) * (high - low);
            }
        }
    }
}

/// A released row of child cells (`released`) spread over the finer cells of `shape` (the synthetic
/// child's counts on them, [`PairAxis::fine_cells`], finer cell f in child cell `cell_of_fine[f]`) as the
/// synthetic rows are in each child cell; where there are none, as `fallback`'s are, or evenly. The map
/// then moves rows between child cells and keeps the joint release's shape inside them, which at
/// ε·n̂ = 10^8 is finer than the pairs' 32 cells.
fn released_within(shape: &[u64], released: &[f64], cell_of_fine: &[u32], fallback: Option<&[u64]>) -> Vec<f64> {
    let mut spread = vec![0.0; shape.len()];
    let mut start = 0;
    while start < shape.len() {
        let cell = cell_of_fine[start];
        let end = start + cell_of_fine[start..].iter().take_while(|&&other| other == cell).count();
        let released = released[cell as usize];
        let weights = [Some(&shape[start..end]), fallback.map(|fallback| &fallback[start..end])]
            .into_iter()
            .flatten()
            .find(|weights| weights.iter().any(|&count| count > 0));
        let spread = &mut spread[start..end];
        match weights {
            Some(weights) => {
                let rows: u64 = weights.iter().sum();
                spread.iter_mut().zip(weights).for_each(|(spread, &count)| *spread = released * count as f64 / rows as f64);
            }
            None => spread.fill(released / (end - start) as f64),
        }
        start = end;
    }
    spread
}

/// The released rows of a pair (`released[b · cells + c]`, parent cell b, child cell c) fitted to the drawn
/// rows' parent and child marginals (`parent_rows`, `child_rows`) by iterative proportional fitting. A parent
/// cell with drawn rows and no released ones starts as the child marginal.
fn raked(released: &[u64], parent_rows: &[u64], child_rows: &[u64]) -> Vec<f64> {
    const SWEEPS: usize = 64;
    let cells = child_rows.len();
    let mut table: Vec<f64> = released.iter().map(|&count| count as f64).collect();
    for (row, &rows) in table.chunks_exact_mut(cells).zip(parent_rows) {
        if rows > 0 && row.iter().all(|&count| count == 0.0) {
            row.iter_mut().zip(child_rows).for_each(|(cell, &count)| *cell = count as f64);
        }
    }
    for _ in 0..SWEEPS {
        for (row, &rows) in table.chunks_exact_mut(cells).zip(parent_rows) {
            let sum: f64 = row.iter().sum();
            if rows > 0 && sum > 0.0 {
                row.iter_mut().for_each(|cell| *cell *= rows as f64 / sum);
            }
        }
        let mut sums = vec![0.0; cells];
        for (row, &rows) in table.chunks_exact(cells).zip(parent_rows) {
            if rows > 0 {
                sums.iter_mut().zip(row).for_each(|(sum, &cell)| *sum += cell);
            }
        }
        for (row, &rows) in table.chunks_exact_mut(cells).zip(parent_rows) {
            if rows > 0 {
                for ((cell, &sum), &target) in row.iter_mut().zip(&sums).zip(child_rows) {
                    if sum > 0.0 {
                        *cell *= target as f64 / sum;
                    }
                }
            }
        }
    }
    table
}

/// For each cell, the nearest cell with a count (itself where it has one; the lower of two as near); each
/// itself where none has a count.
fn nearest_with_rows(counts: &[u64]) -> Vec<u32> {
    let cells = counts.len();
    let mut nearest: Vec<u32> = (0..cells as u32).collect();
    let with_rows: Vec<usize> = (0..cells).filter(|&cell| counts[cell] > 0).collect();
    if with_rows.is_empty() {
        return nearest;
    }
    for (cell, nearest) in nearest.iter_mut().enumerate() {
        let after = with_rows.partition_point(|&other| other < cell);
        let below = after.checked_sub(1).map(|index| with_rows[index]);
        let above = with_rows.get(after).copied();
        *nearest = match (below, above) {
            (Some(below), Some(above)) if above - cell < cell - below => above,
            (Some(below), _) => below,
            (None, above) => above.expect("a cell with rows"),
        } as u32;
    }
    nearest
}

/// The joint release's rows with each mapped pair's child passed through its map, in tree order.
pub struct PairMappedRows<'a> {
    pub inner: Box<dyn RowGenerator + 'a>,
    pub maps: &'a [PairMap],
}

impl RowGenerator for PairMappedRows<'_> {
    fn total_rows(&self) -> u64 {
        self.inner.total_rows()
    }

    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        self.inner.sample_rows(start, rows, columns);
        for map in self.maps {
            map.apply(columns);
        }
    }
}

/// Each value's cell on `axis`.
fn pair_cells(values: &[f64], axis: &PairAxis) -> Vec<u32> {
    values.par_iter().map(|&value| axis.cell_of(value) as u32).collect()
}

/// The histogram of two columns' cells (`first` of `first_cells`, `second` of `second_cells`), cell
/// `first · second_cells + second`, as the pass bins the data.
fn pair_histogram(first: &[u32], second: &[u32], (first_cells, second_cells): (usize, usize)) -> Vec<u64> {
    counts_on_the_pool(first_cells * second_cells, first.len(), |row| first[row] as usize * second_cells + second[row] as usize)
}

/// [`pair_histogram`] of each of `pairs` of the columns' `cells` (on `axes`), one after another, from one pass
/// over the rows.
fn pair_histograms(cells: &[Vec<u32>], pairs: &[(usize, usize)], axes: &[PairAxis]) -> Vec<u64> {
    let rows = cells.first().map_or(0, Vec::len);
    let sizes: Vec<usize> = pairs.iter().map(|&(a, b)| axes[a].cells() * axes[b].cells()).collect();
    counted_in_blocks(sizes.iter().sum(), rows, |mut counts, block| {
        let mut spare = Vec::new();
        for (&(a, b), &size) in pairs.iter().zip(&sizes) {
            let (pair, rest) = counts.split_at_mut(size);
            let rows = (&cells[a][block.clone()], &cells[b][block.clone()]);
            count_pair(pair, &mut spare, rows, axes[b].cells());
            counts = rest;
        }
    })
}

/// How many of `rows` rows fall in each of `cells` cells (`cell_of_row`), counted in blocks on the pool.
fn counts_on_the_pool(cells: usize, rows: usize, cell_of_row: impl Fn(usize) -> usize + Sync) -> Vec<u64> {
    counted_in_blocks(cells, rows, |counts, block| block.for_each(|row| counts[cell_of_row(row)] += 1))
}

/// `count` run on blocks of `rows` rows into `cells` counts per task, summed: the drawn rows are millions,
/// and integer counts add up to the same whatever the split. At most about two tasks per thread, each with
/// one histogram: the candidates' histograms of a wide table are millions of cells.
fn counted_in_blocks(cells: usize, rows: usize, count: impl Fn(&mut [u64], Range<usize>) + Sync) -> Vec<u64> {
    const BLOCK_ROWS: usize = 1 << 16;
    let blocks = rows.div_ceil(BLOCK_ROWS);
    let per_task = blocks.div_ceil(2 * rayon::current_num_threads()).max(1);
    (0..blocks)
        .into_par_iter()
        .with_min_len(per_task)
        .fold(
            || vec![0u64; cells],
            |mut counts, block| {
                count(&mut counts, block * BLOCK_ROWS..rows.min((block + 1) * BLOCK_ROWS));
                counts
            },
        )
        .reduce_with(|mut total, counts| {
            total.iter_mut().zip(counts).for_each(|(total, count)| *total += count);
            total
        })
        .unwrap_or_else(|| vec![0u64; cells])
}

/// Every pair (a, b) of `dims` columns with a < b, in order: the pairs the scores are released for.
pub fn candidate_pairs(dims: usize) -> Vec<(usize, usize)> {
    (0..dims).flat_map(|a| (a + 1..dims).map(move |b| (a, b))).collect()
}

/// How many pairs [`candidate_pairs`] lists: d(d − 1)/2.
fn candidate_count(dims: usize) -> usize {
    dims * dims.saturating_sub(1) / 2
}

/// The position of the pair {a, b} in [`candidate_pairs`].
fn candidate_index(dims: usize, a: usize, b: usize) -> usize {
    let (a, b) = (a.min(b), a.max(b));
    a * dims - a * (a + 1) / 2 + (b - a - 1)
}

/// A pair histogram (`columns` cells of its second column) with its two columns swapped.
fn transposed(counts: &[u64], columns: usize) -> Vec<u64> {
    let rows = counts.len() / columns;
    (0..counts.len()).map(|cell| counts[(cell % rows) * columns + cell / rows]).collect()
}

/// A pair's score: Σ_c |counts_c − round(T · synthetic_c / Σ synthetic)|, the data's histogram against the
/// drawn rows' scaled to the joint release's `released_rows` T (both public once released). One row
/// more or less moves one data count by one: the score moves by at most 1 (2 under replace).
fn distance_to_drawn(counts: &[u64], synthetic: &[u64], released_rows: u64) -> u64 {
    let drawn: u64 = synthetic.iter().sum();
    let expected = |count: u64| match drawn {
        0 => 0,
        _ => ((u128::from(released_rows) * u128::from(count) + u128::from(drawn / 2)) / u128::from(drawn)) as u64,
    };
    counts.iter().zip(synthetic).map(|(&count, &synthetic)| count.abs_diff(expected(synthetic))).sum()
}

/// The tree's pairs (parent, child) in the order Prim's algorithm adds them from column 0: the
/// maximum spanning tree of `weight(a, b)` over `dims` columns. Ties go to the last pair in (parent,
/// child) order.
fn spanning_tree(dims: usize, weight: impl Fn(usize, usize) -> i64) -> Vec<(usize, usize)> {
    let mut reached = vec![false; dims];
    reached[0] = true;
    let mut tree = Vec::with_capacity(dims - 1);
    for _ in 1..dims {
        let mut best = (i64::MIN, 0, 0);
        for parent in (0..dims).filter(|&parent| reached[parent]) {
            for child in (0..dims).filter(|&child| !reached[child]) {
                if weight(parent, child) >= best.0 {
                    best = (weight(parent, child), parent, child);
                }
            }
        }
        reached[best.2] = true;
        tree.push((best.1, best.2));
    }
    tree
}

/// How far a released pair histogram (`noisy`, unthresholded, Laplace scale `sigma`) is from the
/// synthetic table's own conditionals (its pair histogram `synthetic`, `child_cells` per parent cell): per parent cell b
/// with synthetic rows, χ² = Σ_c (R_c − T·q_c)² / (2σ² + T·q_c), R the released row, T its total (at
/// least 0), q the synthetic conditional, as a z-score (χ² − B)/√(2B); the median over those cells, and
/// the median over the synthetic rows (each row counting with its cell's z). Near 0 where the release
/// only repeats what the synthetic table says; 0 with no synthetic rows.
fn disagreement(synthetic: &[u64], noisy: &[i64], sigma: f64, child_cells: usize) -> (f64, f64) {
    let cells = child_cells as f64;
    let mut z_scores: Vec<(f64, u64)> = synthetic
        .chunks_exact(child_cells)
        .zip(noisy.chunks_exact(child_cells))
        .filter_map(|(synthetic, released)| {
            let rows: u64 = synthetic.iter().sum();
            if rows == 0 {
                return None;
            }
            let total = released.iter().sum::<i64>().max(0) as f64;
            let chi2: f64 = synthetic
                .iter()
                .zip(released)
                .map(|(&count, &released)| {
                    let expected = total * count as f64 / rows as f64;
                    (released as f64 - expected).powi(2) / (2.0 * sigma * sigma + expected)
                })
                .sum();
            Some(((chi2 - cells) / (2.0 * cells).sqrt(), rows))
        })
        .collect();
    let mut over_cells: Vec<f64> = z_scores.iter().map(|&(z, _)| z).collect();
    (median(&mut over_cells), weighted_median(&mut z_scores))
}

/// The median (the mean of the middle two for an even count; 0 for none).
fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// The median of `values` each counted `weight` times (the lower one where the weights split evenly; 0
/// for none).
fn weighted_median(values: &mut [(f64, u64)]) -> f64 {
    values.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: u64 = values.iter().map(|&(_, weight)| weight).sum();
    let mut seen = 0;
    for &(value, weight) in values.iter() {
        seen += weight;
        if 2 * seen >= total {
            return value;
        }
    }
    0.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::pmm::pair_axis::CODED_PAIR_CELLS;
    use crate::ranks::OneRank;
    use crate::testing::case_rng;
    use rand::seq::SliceRandom;
    use rand::RngExt;

    const EQUAL: (&PairAxis, &PairAxis) = (&PairAxis::Equal, &PairAxis::Equal);

    /// `rows` uniform values of [0, 1).
    fn uniform(rng: &mut impl RngExt, rows: usize) -> Vec<f64> {
        (0..rows).map(|_| rng.random::<f64>()).collect()
    }

    #[test]
    fn the_tree_is_the_maximum_spanning_tree_of_the_scores_grown_from_column_0() {
        // Four columns; the heaviest scores form the path 3 - 1 - 2, and 0 joins through its best pair (0, 2).
        let scores = [[0, 5, 7, 1], [5, 0, 40, 30], [7, 40, 0, 2], [1, 30, 2, 0]];
        let tree = spanning_tree(4, |a, b| scores[a][b]);
        assert_eq!(tree, [(0, 2), (2, 1), (1, 3)]);
        // Every pair has its place among the candidates.
        let candidates = candidate_pairs(4);
        for (index, &(a, b)) in candidates.iter().enumerate() {
            assert_eq!((candidate_index(4, a, b), candidate_index(4, b, a)), (index, index));
        }
    }

    #[test]
    fn a_score_is_the_distance_to_the_scaled_drawn_rows_and_one_row_moves_it_by_at_most_one() {
        let mut rng = case_rng(1);
        let synthetic: Vec<u64> = (0..PAIR_CELLS * PAIR_CELLS).map(|_| rng.random_range(0..50)).collect();
        // The data twice as many rows as drawn, in the same shape: nothing to tell apart.
        let doubled: Vec<u64> = synthetic.iter().map(|&count| 2 * count).collect();
        let released_rows = doubled.iter().sum();
        assert_eq!(distance_to_drawn(&doubled, &synthetic, released_rows), 0);
        let counts: Vec<u64> = (0..PAIR_CELLS * PAIR_CELLS).map(|_| rng.random_range(0..100)).collect();
        let score = distance_to_drawn(&counts, &synthetic, released_rows);
        for _ in 0..1000 {
            let (cell, other) = (rng.random_range(0..counts.len()), rng.random_range(0..counts.len()));
            let mut added = counts.clone();
            added[cell] += 1;
            assert!(distance_to_drawn(&added, &synthetic, released_rows).abs_diff(score) <= 1, "add-remove");
            added[other] = added[other].saturating_sub(1);
            assert!(distance_to_drawn(&added, &synthetic, released_rows).abs_diff(score) <= 2, "replace");
        }
        // A transposed histogram swaps its columns' roles.
        let transposed_counts = transposed(&counts, PAIR_CELLS);
        assert_eq!(transposed_counts[3 * PAIR_CELLS + 5], counts[5 * PAIR_CELLS + 3]);
        assert_eq!(transposed(&transposed_counts, PAIR_CELLS), counts);
        // A histogram of 3 × 2 cells.
        assert_eq!(transposed(&[1, 2, 3, 4, 5, 6], 2), [1, 3, 5, 2, 4, 6]);
    }

    /// The synthetic pair's own histogram, as the release would give it without noise.
    fn own_histogram(parent: &[f64], child: &[f64]) -> Vec<u64> {
        pair_histogram(&pair_cells(parent, &PairAxis::Equal), &pair_cells(child, &PairAxis::Equal), (PAIR_CELLS, PAIR_CELLS))
    }

    #[test]
    fn the_gate_passes_a_release_that_disagrees_and_keeps_one_that_agrees() {
        let mut rng = case_rng(2);
        let (parent, child) = (uniform(&mut rng, 100_000), uniform(&mut rng, 100_000));
        let synthetic = own_histogram(&parent, &child);
        let sigma = 20.0;
        // The release of an independent pair like the synthetic one, with noise of scale sigma.
        let independent = own_histogram(&parent, &uniform(&mut rng, 100_000));
        let noisy: Vec<i64> =
            independent.iter().map(|&count| count as i64 + ((rng.random::<f64>() - 0.5) * 4.0 * sigma) as i64).collect();
        let agreeing = disagreement(&synthetic, &noisy, sigma, PAIR_CELLS);
        assert!(agreeing.0 < PAIR_GATE_Z && agreeing.1 < PAIR_ROWS_GATE_Z, "an agreeing release scored {agreeing:?}");
        // The release of a pair on the diagonal: every row far from the synthetic conditional.
        let diagonal: Vec<i64> = own_histogram(&parent, &parent).iter().map(|&count| count as i64).collect();
        let disagreeing = disagreement(&synthetic, &diagonal, sigma, PAIR_CELLS);
        assert!(disagreeing.0 > 100.0 * PAIR_GATE_Z, "a disagreeing release scored {disagreeing:?}");
        let empty = vec![0; PAIR_CELLS * PAIR_CELLS];
        assert_eq!(disagreement(&empty, &diagonal, sigma, PAIR_CELLS), (0.0, 0.0), "no synthetic rows, nothing to compare");
    }

    #[test]
    fn the_gate_weighs_the_parent_cells_by_their_rows() {
        // A long-tailed parent: nine rows in ten in its first two cells, the rest thin over the other 30.
        let mut rng = case_rng(5);
        let rows = 100_000;
        let parent: Vec<f64> = (0..rows)
            .map(|_| match rng.random::<f64>() < 0.9 {
                true => rng.random::<f64>() * 2.0 / PAIR_CELLS as f64,
                false => (2.0 + rng.random::<f64>() * 30.0) / PAIR_CELLS as f64,
            })
            .collect();
        let child = uniform(&mut rng, rows);
        let synthetic = own_histogram(&parent, &child);
        // The release says the child follows the parent in the two heavy cells and agrees elsewhere.
        let heavy = 2 * PAIR_CELLS;
        let released: Vec<i64> = own_histogram(&parent, &parent)[..heavy]
            .iter()
            .chain(&synthetic[heavy..])
            .map(|&count| count as i64)
            .collect();
        // 30 of 32 cells agree, so the median cell does; the median row is in a heavy cell that does not.
        let (over_cells, over_rows) = disagreement(&synthetic, &released, 20.0, PAIR_CELLS);
        assert!(over_cells < PAIR_GATE_Z, "the thin cells' median scored {over_cells}");
        assert!(over_rows > 100.0 * PAIR_ROWS_GATE_Z, "the heavy cells' disagreement scored {over_rows}");
        assert_eq!(weighted_median(&mut [(3.0, 1), (1.0, 5), (2.0, 1)]), 1.0);
        assert_eq!(weighted_median(&mut [(3.0, 5), (1.0, 1), (2.0, 1)]), 3.0);
        assert_eq!(weighted_median(&mut []), 0.0);
    }

    /// A categorical child's values are codes: mapped, each lands on a code the release gives rows, never
    /// between two (where the interpolating map puts some).
    #[test]
    fn a_discrete_child_lands_on_the_released_codes_only() {
        let mut rng = case_rng(9);
        let rows = PAIR_SAMPLE_MIN_ROWS;
        let code_cells = [3usize, 16, 28];
        let at = |cell: usize| (cell as f64 + 0.5) / PAIR_CELLS as f64;
        let parent = uniform(&mut rng, rows);
        let child: Vec<f64> = (0..rows).map(|_| at(code_cells[rng.random_range(0..3)])).collect();
        // The release: in the lower half of the parent the child is code 3 or 16, in the upper 16 or 28.
        let truth: Vec<f64> = parent.iter().map(|&p| at(code_cells[usize::from(p >= 0.5) + rng.random_range(0..2)])).collect();
        let released = own_histogram(&parent, &truth);
        let landed_off_code = |discrete: bool| {
            let mut drawn = DrawnRows { columns: vec![parent.clone(), child.clone()], released_rows: rows as u64, ranks: &OneRank };
            PairMap::fit((0, 1), EQUAL, &pair_cells(&parent, &PairAxis::Equal), &drawn, &released, discrete).apply(&mut drawn.columns);
            drawn.columns[1].iter().filter(|&&value| !code_cells.contains(&cell_of(value, PAIR_CELLS))).count()
        };
        assert_eq!(landed_off_code(true), 0, "a discrete child's values on the codes only");
        assert!(landed_off_code(false) > 0, "the interpolating map puts values between codes: the test sees it");
    }

    /// `rows` values at the centres of `live` of `slots` codes (normalised), drawn evenly.
    fn on_codes(rng: &mut impl RngExt, rows: usize, live: &[usize], slots: usize) -> Vec<f64> {
        (0..rows).map(|_| (live[rng.random_range(0..live.len())] as f64 + 0.5) / slots as f64).collect()
    }

    /// A long list with a cell per live code tells its codes apart where equal cells lump several of them
    /// together: each of 120 live codes of 300 sends its rows to a child cell of its own.
    #[test]
    fn a_coded_parent_with_a_cell_per_live_code_maps_each_code_onto_its_own_row() {
        let mut rng = case_rng(11);
        let (rows, slots) = (PAIR_SAMPLE_MIN_ROWS, 300);
        let live: Vec<usize> = (0..slots).filter(|code| code % 5 < 2).collect();
        let target = |parent: f64| (parent * slots as f64) as usize * 7 % PAIR_CELLS;
        let parent = on_codes(&mut rng, rows, &live, slots);
        let truth: Vec<f64> = parent.iter().map(|&p| (target(p) as f64 + rng.random::<f64>()) / PAIR_CELLS as f64).collect();
        let released_codes: Vec<u64> = (0..slots).map(|code| u64::from(code % 5 < 2) * 100).collect();
        let on_target = |parent_axis: &PairAxis| {
            let released = pair_histogram(
                &pair_cells(&parent, parent_axis),
                &pair_cells(&truth, &PairAxis::Equal),
                (parent_axis.cells(), PAIR_CELLS),
            );
            // The drawn child as the joint release gives it: the released marginal, independent of the parent.
            let mut child = truth.clone();
            child.shuffle(&mut case_rng(12));
            let columns = vec![parent.clone(), child];
            let mut drawn = DrawnRows { columns, released_rows: rows as u64, ranks: &OneRank };
            let cells = pair_cells(&parent, parent_axis);
            PairMap::fit((0, 1), (parent_axis, &PairAxis::Equal), &cells, &drawn, &released, false).apply(&mut drawn.columns);
            let hits = parent.iter().zip(&drawn.columns[1]).filter(|(&p, &c)| cell_of(c, PAIR_CELLS) == target(p)).count();
            hits as f64 / rows as f64
        };
        let codes = PairAxis::of_codes(&released_codes, CODED_PAIR_CELLS);
        assert_eq!(codes.cells(), live.len());
        let (with_codes, with_equal_cells) = (on_target(&codes), on_target(&PairAxis::Equal));
        assert!(with_codes > 0.9, "{with_codes} of the rows on their code's row");
        assert!(with_equal_cells < 0.6, "equal cells lump codes together ({with_equal_cells}): the test sees it");
    }

    /// A coded child's rows land on the codes its release gives rows, never on a pruned code beside them,
    /// even in a parent cell where the drawn rows have none of the released code.
    #[test]
    fn a_coded_child_lands_on_live_codes_only_and_follows_its_parent() {
        let mut rng = case_rng(13);
        let (rows, slots) = (PAIR_SAMPLE_MIN_ROWS, 300);
        let live: Vec<usize> = (0..slots).filter(|code| code % 6 == 1).collect();
        let child_axis = PairAxis::of_codes(&(0..slots).map(|code| u64::from(code % 6 == 1)).collect::<Vec<_>>(), CODED_PAIR_CELLS);
        let parent = uniform(&mut rng, rows);
        // The release: parent cell b's rows all on live code number b; the drawn rows there all on the next
        // one (the same marginal), so each parent cell has no drawn row on its released code.
        let code_of = |parent: f64, shift: usize| live[(cell_of(parent, PAIR_CELLS) + shift) % PAIR_CELLS];
        let at = |code: usize| (code as f64 + 0.5) / slots as f64;
        let truth: Vec<f64> = parent.iter().map(|&p| at(code_of(p, 0))).collect();
        let parent_cells = pair_cells(&parent, &PairAxis::Equal);
        let released = pair_histogram(&parent_cells, &pair_cells(&truth, &child_axis), (PAIR_CELLS, child_axis.cells()));
        // Each drawn value anywhere in its code's leaf, as the step onto the 1-D release leaves them.
        let (depth, leaves) = code_leaves(slots);
        let leaf_count = 1usize << depth;
        let in_leaf = |code: usize, place: f64| (leaves[code] as f64 + place) / leaf_count as f64;
        let drawn_child = parent.iter().map(|&p| in_leaf(code_of(p, 1), rng.random::<f64>())).collect();
        let mut drawn = DrawnRows { columns: vec![parent.clone(), drawn_child], released_rows: rows as u64, ranks: &OneRank };
        let axes = (&PairAxis::Equal, &child_axis);
        PairMap::fit((0, 1), axes, &parent_cells, &drawn, &released, true).apply(&mut drawn.columns);
        // The code the writer gives a value: the one in its leaf.
        let code = |value: f64| leaves.iter().position(|&leaf| leaf as usize == cell_of(value, leaf_count));
        let mapped = &drawn.columns[1];
        assert!(mapped.iter().all(|&value| code(value).is_some_and(|code| code % 6 == 1)), "every value on a live code");
        let hits = parent.iter().zip(mapped).filter(|(&p, &c)| code(c) == Some(code_of(p, 0))).count() as f64 / rows as f64;
        assert!(hits > 0.9, "{hits} of the rows on their parent's code");
    }

    /// A nullable number's pair cells are its null band and 32 equal cells of its bounds: where the band is
    /// not a whole number of the axis's 32nds (an integer column's bounds whose width is no multiple of 15),
    /// equal cells of the axis straddle two of those and mix what the release says of each.
    #[test]
    fn a_nullable_parent_maps_its_null_rows_and_each_bound_cell_onto_their_own_rows() {
        let mut rng = case_rng(17);
        let (rows, band) = (PAIR_SAMPLE_MIN_ROWS, 0.05);
        let axis = PairAxis::NullBand(band);
        // A tenth of the rows null (anywhere in the band, as the sampler spreads them), the rest uniform.
        let parent: Vec<f64> = (0..rows)
            .map(|_| match rng.random::<f64>() < 0.1 {
                true => rng.random::<f64>() * band,
                false => band + rng.random::<f64>() * (1.0 - band),
            })
            .collect();
        let target = |parent: f64| axis.cell_of(parent) * 7 % PAIR_CELLS;
        let truth: Vec<f64> = parent.iter().map(|&p| (target(p) as f64 + rng.random::<f64>()) / PAIR_CELLS as f64).collect();
        let on_target = |parent_axis: &PairAxis| {
            let cells = pair_cells(&parent, parent_axis);
            let released = pair_histogram(&cells, &pair_cells(&truth, &PairAxis::Equal), (parent_axis.cells(), PAIR_CELLS));
            let mut child = truth.clone();
            child.shuffle(&mut case_rng(18));
            let mut drawn = DrawnRows { columns: vec![parent.clone(), child], released_rows: rows as u64, ranks: &OneRank };
            PairMap::fit((0, 1), (parent_axis, &PairAxis::Equal), &cells, &drawn, &released, false).apply(&mut drawn.columns);
            let hits = parent.iter().zip(&drawn.columns[1]).filter(|(&p, &c)| cell_of(c, PAIR_CELLS) == target(p)).count();
            hits as f64 / rows as f64
        };
        let (with_band, with_equal_cells) = (on_target(&axis), on_target(&PairAxis::Equal));
        assert!(with_band > 0.9, "{with_band} of the rows on their cell's row");
        assert!(with_equal_cells < 0.7, "equal cells of the axis mix two cells' rows ({with_equal_cells}): the test sees it");
    }

    /// A coded child's released rows disagree with its drawn marginal (noise, pruning): fitted to both
    /// marginals first, the map keeps the child's marginal, and no row takes a code its parent cell's
    /// release gives none. A step back onto the marginal by ranks moved rows across codes' edges instead.
    #[test]
    fn a_coded_child_keeps_its_marginal_and_no_code_leaves_the_parent_cells_released_with_it() {
        let mut rng = case_rng(19);
        let (rows, slots) = (PAIR_SAMPLE_MIN_ROWS, 3);
        let child_axis = PairAxis::of_codes(&[1, 1, 1], CODED_PAIR_CELLS);
        let (depth, leaves) = code_leaves(slots);
        let leaf_count = 1usize << depth;
        let parent = uniform(&mut rng, rows);
        // Drawn: codes 0, 1, 2 in shares 0.2, 0.3, 0.5, independent of the parent, anywhere in their leaves.
        let drawn_child: Vec<f64> = (0..rows)
            .map(|_| {
                let code = match rng.random::<f64>() {
                    u if u < 0.2 => 0,
                    u if u < 0.5 => 1,
                    _ => 2,
                };
                (leaves[code] as f64 + rng.random::<f64>()) / leaf_count as f64
            })
            .collect();
        // Released: the lower half of the parent on codes 0 and 1 (4 : 3), the upper half on code 2; its
        // child marginal (0.29, 0.21, 0.5) is not the drawn one.
        let parent_cells = pair_cells(&parent, &PairAxis::Equal);
        let released: Vec<u64> = (0..PAIR_CELLS).flat_map(|cell| if cell < 16 { [400, 300, 0] } else { [0, 0, 700] }).collect();
        let mut drawn = DrawnRows { columns: vec![parent.clone(), drawn_child], released_rows: rows as u64, ranks: &OneRank };
        let axes = (&PairAxis::Equal, &child_axis);
        PairMap::fit((0, 1), axes, &parent_cells, &drawn, &released, true).apply(&mut drawn.columns);
        let code = |value: f64| leaves.iter().position(|&leaf| leaf as usize == cell_of(value, leaf_count)).expect("a code");
        let mapped: Vec<usize> = drawn.columns[1].iter().map(|&value| code(value)).collect();
        let astray = parent.iter().zip(&mapped).filter(|(&p, &c)| (p < 0.5) != (c < 2)).count();
        assert_eq!(astray, 0, "rows on a code their parent cell was released without");
        for (code, share) in [0.2, 0.3, 0.5].into_iter().enumerate() {
            let mapped_share = mapped.iter().filter(|&&c| c == code).count() as f64 / rows as f64;
            assert!((mapped_share - share).abs() < 0.01, "code {code}: {mapped_share} of the rows, drawn {share}");
        }
    }

    #[test]
    fn raking_fits_both_marginals_and_fills_a_released_row_without_rows() {
        let raked = raked(&[4, 0, 1, 1, 0, 0], &[10, 5, 5], &[12, 8]);
        let (rows, columns): (Vec<f64>, Vec<f64>) =
            (raked.chunks_exact(2).map(|row| row.iter().sum()).collect(), (0..2).map(|c| raked[c] + raked[2 + c] + raked[4 + c]).collect());
        rows.iter().zip([10.0, 5.0, 5.0]).for_each(|(row, target)| assert!((row - target).abs() < 1e-6, "{rows:?}"));
        columns.iter().zip([12.0, 8.0]).for_each(|(column, target)| assert!((column - target).abs() < 1e-6, "{columns:?}"));
        // Parent cell 0 released no row of child cell 1: it still has none.
        assert_eq!(raked[1], 0.0);
        // The third released row was empty: it starts as the child marginal.
        assert!(raked[4] > 0.0 && raked[5] > 0.0);
    }

    #[test]
    fn the_map_moves_each_parent_cell_onto_its_row_keeps_the_order_there_and_the_marginal() {
        let mut rng = case_rng(3);
        let rows = PAIR_SAMPLE_MIN_ROWS;
        let (parent, child) = (uniform(&mut rng, rows), uniform(&mut rng, rows));
        let released = own_histogram(&parent, &parent);
        let columns = vec![parent.clone(), child.clone()];
        let mut drawn = DrawnRows { columns, released_rows: rows as u64, ranks: &OneRank };
        let map = PairMap::fit((0, 1), EQUAL, &pair_cells(&parent, &PairAxis::Equal), &drawn, &released, false);
        map.apply(&mut drawn.columns);
        let mapped = &drawn.columns[1];
        // Onto the diagonal: moved within its parent's cell, the child now falls in that cell, but for the
        // sampling noise of the step back onto its marginal near the cells' edges.
        let on_row = parent.iter().zip(mapped).filter(|(&p, &c)| cell_of(p, PAIR_CELLS) == cell_of(c, PAIR_CELLS));
        let on_row = on_row.count() as f64 / rows as f64;
        assert!(on_row > 0.95, "{on_row} of the rows in their parent's cell");
        let near: f64 = parent.iter().zip(mapped).map(|(&p, &c)| (p - c).abs()).sum::<f64>() / rows as f64;
        // A third of a cell when the child is uniform in its parent's cell (a third of [0, 1] before).
        assert!(near < 0.5 / PAIR_CELLS as f64, "mean |parent − child| {near}");
        // Inside one parent cell the child keeps its order.
        let mut in_cell: Vec<(f64, f64)> = (0..rows)
            .filter(|&row| cell_of(parent[row], PAIR_CELLS) == 7)
            .map(|row| (child[row], mapped[row]))
            .collect();
        in_cell.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(in_cell.windows(2).all(|pair| pair[0].1 <= pair[1].1), "the map is monotone within a cell");
        // The child's marginal is the one it had (uniform here): the largest CDF gap stays small.
        let mut sorted = mapped.clone();
        sorted.sort_by(f64::total_cmp);
        let gap = sorted.iter().enumerate().map(|(rank, &value)| (value - rank as f64 / rows as f64).abs()).fold(0.0, f64::max);
        assert!(gap < 0.01, "the mapped child's marginal moved by {gap}");
    }

    #[test]
    fn a_spiky_child_keeps_the_shares_of_its_values() {
        // An integer column as a fine release gives it: twelve values, each spread over one cell of 2048.
        let mut rng = case_rng(4);
        let rows = PAIR_SAMPLE_MIN_ROWS;
        let weights = [1.0, 2.0, 3.0, 1.0, 5.0, 2.0, 1.0, 4.0, 2.0, 3.0, 1.0, 2.0];
        let cumulative: Vec<f64> = weights.iter().scan(0.0, |sum, w| { *sum += w / 27.0; Some(*sum) }).collect();
        let spike = |value: usize| (value as f64 * 186.0 + 0.5) / 2048.0;
        let parent = uniform(&mut rng, rows);
        let child: Vec<f64> = (0..rows)
            .map(|_| {
                let draw = rng.random::<f64>();
                let value = cumulative.partition_point(|&c| c < draw).min(11);
                spike(value) + (rng.random::<f64>() - 0.5) / 2048.0
            })
            .collect();
        let nearest = |x: f64| (0..12).min_by(|&a, &b| (spike(a) - x).abs().total_cmp(&(spike(b) - x).abs())).unwrap();
        let shares = |values: &[f64]| {
            let mut shares = [0.0; 12];
            values.iter().for_each(|&x| shares[nearest(x)] += 1.0 / rows as f64);
            shares
        };
        // The release says what the synthetic rows say (an independent pair): the map should change nothing
        // but the order within each parent cell, and each value keeps its share.
        let released = own_histogram(&parent, &child);
        let columns = vec![parent.clone(), child.clone()];
        let mut drawn = DrawnRows { columns, released_rows: rows as u64, ranks: &OneRank };
        let map = PairMap::fit((0, 1), EQUAL, &pair_cells(&parent, &PairAxis::Equal), &drawn, &released, false);
        map.apply(&mut drawn.columns);
        let (before, after) = (shares(&child), shares(&drawn.columns[1]));
        let worst = before.iter().zip(&after).map(|(b, a)| (b - a).abs()).fold(0.0, f64::max);
        assert!(worst < 0.005, "a value's share moved by {worst}: {before:?} -> {after:?}");
    }

    #[test]
    fn the_map_keeps_where_each_parent_cells_rows_lie_inside_a_child_cell() {
        // Inside every child cell, the rows whose parent is in its lower half lie on a narrow band a quarter
        // of the way up and the others on one at three quarters (a joint release finer than the pairs'
        // cells, as at ε·n̂ = 10^8); the release moves each parent cell's rows one child cell up. Spread
        // evenly inside the child cells, the map would put half the rows on the other band.
        let mut rng = case_rng(6);
        let rows = PAIR_SAMPLE_MIN_ROWS;
        let parent = uniform(&mut rng, rows);
        let band = |parent: f64| if cell_of(parent, PAIR_CELLS) < PAIR_CELLS / 2 { 0.25 } else { 0.75 };
        let child: Vec<f64> = parent
            .iter()
            .map(|&p| {
                let within = band(p) + (rng.random::<f64>() - 0.5) / 50.0;
                (rng.random_range(0..PAIR_CELLS) as f64 + within) / PAIR_CELLS as f64
            })
            .collect();
        let synthetic = own_histogram(&parent, &child);
        let up = |cell: usize| cell - cell % PAIR_CELLS + (cell + PAIR_CELLS - 1) % PAIR_CELLS;
        let released: Vec<u64> = (0..PAIR_CELLS * PAIR_CELLS).map(|cell| synthetic[up(cell)]).collect();
        let columns = vec![parent.clone(), child];
        let mut drawn = DrawnRows { columns, released_rows: rows as u64, ranks: &OneRank };
        let map = PairMap::fit((0, 1), EQUAL, &pair_cells(&parent, &PairAxis::Equal), &drawn, &released, false);
        // The maps applied in blocks are the row-by-row map to the bit, continuous and discrete.
        for map in [map.clone(), PairMap { discrete: true, ..map.clone() }] {
            let mut blocked = drawn.columns[1].clone();
            map.map_all(&parent, &mut blocked);
            let mut rows = parent.iter().zip(&drawn.columns[1]).zip(&blocked);
            assert!(rows.all(|((&p, &c), &b)| map.map(p, c).to_bits() == b.to_bits()), "discrete: {}", map.discrete);
        }
        map.apply(&mut drawn.columns);
        let mapped = &drawn.columns[1];
        let off: u64 = own_histogram(&parent, mapped).iter().zip(&released).map(|(&a, &b)| a.abs_diff(b)).sum();
        assert!((off as f64) < 0.05 * rows as f64, "{off} rows off the released histogram");
        let within = |child: f64| (child * PAIR_CELLS as f64).fract();
        let on_band = parent.iter().zip(mapped).filter(|(&p, &c)| (within(c) - band(p)).abs() < 0.1).count();
        let on_band = on_band as f64 / rows as f64;
        assert!(on_band > 0.9, "{on_band} of the rows on their band");
    }

    #[test]
    fn a_released_row_is_spread_within_each_child_cell_as_the_synthetic_rows_are() {
        // Two finer cells in each of three child cells; the second child cell has no synthetic rows.
        let cell_of_fine = [0, 0, 1, 1, 2, 2];
        let spread = released_within(&[1, 2, 0, 0, 5, 0], &[30.0, 8.0, 5.0], &cell_of_fine, None);
        assert_eq!(spread, vec![10.0, 20.0, 4.0, 4.0, 5.0, 0.0]);
        // ... or as a fallback's rows are there (a coded child's marginal), evenly where it has none either.
        let spread = released_within(&[1, 2, 0, 0, 0, 0], &[30.0, 8.0, 6.0], &cell_of_fine, Some(&[1, 1, 0, 3, 0, 0]));
        assert_eq!(spread, vec![10.0, 20.0, 0.0, 8.0, 3.0, 3.0]);
        assert_eq!(nearest_with_rows(&[0, 3, 0, 0, 0, 1, 0]), [1, 1, 1, 1, 5, 5, 5]);
        assert_eq!(nearest_with_rows(&[0, 0]), [0, 1]);
        // Cells of unequal widths (a coded child's codes).
        let spread = released_within(&[1, 1, 1, 2], &[6.0, 4.0], &[0, 0, 0, 1], None);
        assert_eq!(spread, vec![2.0, 2.0, 2.0, 4.0]);
    }

    #[test]
    fn the_plan_splits_its_share_over_the_scores_and_the_pairs_with_the_relations_sensitivity() {
        use crate::privacy::Neighbours;
        let public = |neighbours| crate::testing::public_inputs(5, 2.0, neighbours, 1000);
        for (neighbours, sensitivity) in [(Neighbours::AddRemove, 1.0), (Neighbours::Replace, 2.0)] {
            let plan = PairPlan::new(&public(neighbours), 0.4, &[], &[]).unwrap();
            // ε·S = 0.8: a tenth, 0.08, on the ten scores (scale 10·Δ/0.08), then 0.18 on each of four pairs.
            assert!((plan.selection_epsilon() - 0.08).abs() < 1e-8 && plan.selection_epsilon() <= 0.08);
            assert!((plan.selection_scale.unwrap().to_f64() - 10.0 * sensitivity / 0.08).abs() < 1e-4);
            assert!((plan.epsilon_per_pair() - 0.18).abs() < 1e-8 && plan.epsilon_per_pair() <= 0.18);
            assert!((plan.scale.to_f64() - sensitivity / 0.18).abs() < 1e-6);
            let spent = plan.selection_epsilon() + 4.0 * plan.epsilon_per_pair();
            assert!(spent <= 0.8 && spent > 0.8 - 1e-6, "{spent}");
        }
        // Two columns: one pair, nothing to choose; it gets the whole share.
        let two = PairPlan::new(&PublicInputs { dims: 2, ..public(Neighbours::AddRemove) }, 0.4, &[], &[]).unwrap();
        assert!(two.selection_scale.is_none() && two.selection_epsilon() == 0.0);
        // ... and releases no score: an un-noised one would be the data's distance itself.
        assert!(two.noisy_scores(&[5], &crate::privacy::NoiseKey::from_user_seed(1)).is_none());
        assert!((two.epsilon_per_pair() - 0.8).abs() < 1e-8 && two.epsilon_per_pair() <= 0.8);
        let one_column = PublicInputs { dims: 1, ..public(Neighbours::AddRemove) };
        assert!(PairPlan::new(&one_column, 0.4, &[], &[]).is_err());
    }

    #[test]
    fn the_pairs_draw_as_many_rows_as_were_released_within_their_bounds() {
        let public = |dims| crate::testing::public_inputs(dims, 1.0, crate::privacy::Neighbours::AddRemove, 1000);
        let drawn = |dims, released| PairPlan::new(&public(dims), 0.2, &[], &[]).unwrap().drawn_rows(released);
        // A small table's rows are drawn more than once over, as before.
        assert_eq!(drawn(4, 1000), PAIR_SAMPLE_MIN_ROWS);
        // A large one's rows once, up to 2^24 values.
        assert_eq!(drawn(4, 3_000_000), 3_000_000);
        assert_eq!(drawn(4, 10_000_000), 1 << 22);
        assert_eq!(drawn(6, 10_000_000), (1 << 24) / 6);
        assert_eq!(drawn(4, 1 << 40), 1 << 22);
        // Never fewer than the small table's, however wide.
        assert_eq!(drawn(64, 10_000_000), PAIR_SAMPLE_MIN_ROWS);
    }
}
