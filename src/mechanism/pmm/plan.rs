//! PMM's plan and release (docs/mechanisms/pmm.md). The plan fixes, from public inputs only, where ε
//! goes (every level of the tree, and n̂ first when the depth is chosen under add-remove), the depth or
//! the rule that picks it from n̂, and the noise of every level; the release bins the data once (twice
//! when n̂ asks for a deeper tree than planned), noises every level and makes the tree consistent. With
//! `--marginal-share` the columns are then mapped onto released 1-D marginals, and with `--partition
//! quantile` those marginals are released first and the tree's cells are cut at their quantiles (half
//! and half with equal widths). With `--pair-share` a share of ε is set aside first for the pair
//! histograms, which the release then maps the joint release's column pairs onto (pairs.rs). With
//! `--refine-share` the tree's dense leaves are cut finer, their sub-cells released from the tree's share
//! (refine.rs). The release's steps are written once, for one machine and for a rank of many (release.rs).

use super::auto::AutoPick;
use super::averaging::BottomUp;
use super::consistency::Consistency;
use super::marginals::{MarginalPlan, MonotoneMap, Partition, ReleasedMarginals};
use super::options::PmmOptions;
use super::pairs::{PairMap, PairParameters, PairPlan};
use super::refine::{LeafRefinement, LeafRefinementParameters};
use super::report::{AutoSwitch, AutoThresholds, LevelInfo, PmmParameters};
use super::release::OneMachine;
use super::schedule::{
    cell_memory_bytes, choose_depth, max_depth_for_memory, LevelSchedule, RootNoise,
};
use super::release_leaf_counts;
use crate::binner::device::DeviceChoice;
use crate::binner::pass::DataPass;
use crate::binner::ScanStats;
use crate::error::{Error, Result};
use crate::geometry::partition::{CellGeometry, MAX_DEPTH};
use crate::mechanism::options::value_name;
use crate::mechanism::{
    AccuracyBound, MechanismParameters, PublicInputs, Release, ReleasedMeasure, NORMALISED_UNITS,
};
use crate::privacy::{Budget, Neighbours, NoisyRowCount, RunSeeds};
use crate::progress::Timings;
use crate::sampler::Placement;

/// How far above the file's row count n̂ is planned for before the data are binned: Lap_Z(σ_0)
/// exceeds 20σ_0 with probability below e^{-20}, and then the pass is simply repeated at the right depth.
const ROOT_NOISE_HEADROOM: f64 = 20.0;

/// The bound's words with `$scope` after them: for the noisy counts (`--bottom-up none`), and for the
/// counts averaged bottom-up (`schedule::LevelSchedule::accuracy_bound` has the terms).
macro_rules! accuracy_formulas {
    ($scope:literal) => {
        AccuracyFormulas {
            noisy: concat!(
                "E W1 <= (1/n) * sum_j (2*sqrt(2)*sigma_j + f_j) * Delta_{j-1} + 2^-floor(r/d), f_j = ceil(k*sigma_j) \
                 the pruning floor  (dissertation Thm 3.9; Lemma 3.16 with pruned counts)",
                $scope
            ),
            averaged: concat!(
                "E W1 <= (1/n) * sum_j (e_j + f_j) * Delta_{j-1} + 2^-floor(r/d), e_j = sqrt(2*V_j) + 1/2 on the \
                 levels averaged bottom-up (V_j the variance of their estimates; 1/2 for rounding them to counts), \
                 sqrt(2*V_r) at the leaves, 2*sqrt(2)*sigma_0 at a noised root, f_j = ceil(k*sigma_j) the pruning \
                 floor  (dissertation Thm 3.9; Lemma 3.16 with averaged, pruned counts)",
                $scope
            ),
        }
    };
}

/// The bound's words for both kinds of counts the splits read.
struct AccuracyFormulas {
    noisy: &'static str,
    averaged: &'static str,
}

impl AccuracyFormulas {
    fn for_counts(&self, bottom_up: BottomUp) -> &'static str {
        match bottom_up {
            BottomUp::None => self.noisy,
            BottomUp::Average => self.averaged,
        }
    }
}

const ACCURACY_FORMULA: AccuracyFormulas = accuracy_formulas!("");

/// With `--marginal-share` the bound is the joint tree's: the maps move points, and no bound is proven
/// for the calibrated table.
const CALIBRATED_ACCURACY_FORMULA: AccuracyFormulas =
    accuracy_formulas!(" for the joint tree BEFORE the marginal maps; not proven for the calibrated table");

/// With `--partition quantile` the bound is the joint tree's in the warped coordinates.
const QUANTILE_ACCURACY_FORMULA: AccuracyFormulas = accuracy_formulas!(
    " for the joint tree in the warped coordinates (each axis through (G + uniform)/2, G its released \
     marginal's CDF, aligned to the pair cells on axes of 64 cells or more), BEFORE the maps back; not proven in \
     the columns' units"
);

/// With `--pair-share` the bound is the joint tree's before any map.
const PAIR_MAPPED_ACCURACY_FORMULA: AccuracyFormulas = accuracy_formulas!(
    " for the joint tree in its own coordinates, BEFORE the marginal and pair maps; not proven for the \
     mapped table"
);

/// Where the size that fixes the depth comes from.
#[derive(Clone, Copy, Debug)]
pub enum TreeSize {
    /// replace: the public n.
    Public(u64),
    /// add-remove without `--depth`: this plan releases n̂ first and picks the depth from it.
    ReleasedFirst(NoisyRowCount),
    /// add-remove, n̂ already released by the caller (lowdim) at this plan's scale.
    AlreadyReleased { n_hat: u64, row_count: NoisyRowCount },
    /// add-remove with `--depth`: no size needed; the root is one more noised level.
    NotNeeded,
}

/// The depth, or how it will be chosen.
#[derive(Clone, Debug)]
enum Depth {
    /// Known now, with its schedule.
    Known(LevelSchedule),
    /// Chosen from the n̂ this plan releases; the data are binned first at `planned`.
    FromReleasedNHat { planned: u32 },
}

/// A PMM run's plan.
#[derive(Clone, Debug)]
pub struct PmmPlan {
    /// The ε this plan may spend (its levels, and n̂ when it releases n̂ itself).
    epsilon: f64,
    dims: usize,
    neighbours: Neighbours,
    /// ε of the levels: all of ε, less n̂'s share when this plan releases n̂.
    level_epsilon: f64,
    size: TreeSize,
    depth: Depth,
    depth_rule: String,
    /// The deepest tree memory allows.
    memory_depth: u32,
    consistency: Consistency,
    placement: Placement,
    device: DeviceChoice,
    /// `--marginal-share`: the fine 1-D marginals each column is calibrated to.
    marginals: Option<MarginalPlan>,
    /// `--pair-share`: the pair histograms the column pairs are mapped onto.
    pairs: Option<PairPlan>,
    /// `--refine-share`: the dense leaves' sub-cells.
    refinement: Option<LeafRefinement>,
    /// `--mechanism auto`: the rule that chose the settings.
    chosen_by: Option<&'static str>,
    /// `--mechanism auto` with [`LargerTable`] or [`SmallerTable`] settings: where it switches to them.
    auto_thresholds: Option<AutoThresholds>,
    /// `--mechanism auto` at d ≥ 3 under add-remove: the plan run instead when ε·n̂ is large enough. It
    /// releases the same n̂ (one release, one spend) and spends the rest of ε its own way.
    larger: Option<Box<PmmPlan>>,
    /// `--mechanism auto` at d ≥ 4 under add-remove: the plan run instead of `larger` when ε·n̂ is larger
    /// still. It releases the same n̂ as `larger`.
    largest: Option<Box<PmmPlan>>,
    /// `--mechanism auto` at d = 3–5 under add-remove: the plan run instead when ε·n̂ is too small.
    smaller: Option<Box<PmmPlan>>,
}


impl PmmPlan {
    /// PMM on the input's columns: the public inputs and `--root-share` decide the size it plans from.
    /// `--pair-share` S takes S·ε first; the rest is planned at (1 − S)·ε as without it. With auto's
    /// [`LargerTable`] (larger and largest) or [`SmallerTable`] settings, under replace the public n picks the
    /// settings now; under add-remove every plan releases the same n̂ first and the release picks by it
    /// ([`Self::for_n_hat`]).
    pub fn new(public: &PublicInputs, options: &PmmOptions) -> Result<Self> {
        if options.larger_table.is_none() && options.largest_table.is_none() && options.smaller_table.is_none() {
            return Self::without_switch(public, options, None);
        }
        let own = PmmOptions { larger_table: None, largest_table: None, smaller_table: None, ..options.clone() };
        let larger = options.larger_table.as_deref();
        let largest = options.largest_table.as_deref();
        let smaller = options.smaller_table.as_deref();
        let mut thresholds = AutoThresholds {
            plain_below_epsilon_n: None,
            larger_table_from_epsilon_n: larger.map(|larger| larger.from_epsilon_n),
            largest_table_from_epsilon_n: largest.map(|largest| largest.from_epsilon_n),
            pairs_from_epsilon_n: larger.filter(|larger| larger.options.pair_share > 0.0).map(|l| l.from_epsilon_n),
        };
        if public.neighbours == Neighbours::Replace {
            let own_plan = Self::without_switch(public, &own, None)?;
            if let Some(smaller) = smaller {
                let below = own_plan.epsilon_n_for_marginal_depth(smaller.below_marginal_depth, None)?;
                thresholds.plain_below_epsilon_n = Some(below);
            }
            let picked = match thresholds.pick(public.epsilon * public.file_rows as f64) {
                AutoPick::Smaller => smaller.map(|smaller| &smaller.options),
                AutoPick::Larger => larger.map(|larger| &larger.options),
                AutoPick::Largest => largest.map(|largest| &largest.options),
                AutoPick::Own => None,
            };
            let mut plan = match picked {
                Some(options) => Self::without_switch(public, options, None)?,
                None => own_plan,
            };
            plan.auto_thresholds = Some(thresholds);
            return Ok(plan);
        }
        // Every plan releases the n̂ of the plan that plans the most (the larger table's, else this one's),
        // at the ε that plan gives it (the pairs' share off first); the largest table's plan too.
        let top = larger.map_or(&own, |larger| &larger.options);
        let top_plan = Self::without_switch(public, top, None)?;
        let Some(row_count) = top_plan.releases_n_hat() else {
            return Self::without_switch(public, &own, None);
        };
        let n_hat_epsilon = public.epsilon * (1.0 - top.pair_share) * top.noisy_n_share;
        let with_top_n_hat = |options: &PmmOptions| -> Result<PmmPlan> {
            let plan = Self::without_switch(public, options, Some(n_hat_epsilon))?;
            if plan.releases_n_hat().map(|own| own.scale) != Some(row_count.scale) {
                return Err(Error::internal("auto's plans must release the same n̂"));
            }
            Ok(plan)
        };
        let mut plan = match larger {
            Some(_) => PmmPlan { larger: Some(Box::new(top_plan)), ..with_top_n_hat(&own)? },
            None => top_plan,
        };
        if let Some(smaller) = smaller {
            let below = plan.epsilon_n_for_marginal_depth(smaller.below_marginal_depth, Some(row_count))?;
            thresholds.plain_below_epsilon_n = Some(below);
            plan.smaller = Some(Box::new(with_top_n_hat(&smaller.options)?));
        }
        if let Some(largest) = largest {
            plan.largest = Some(Box::new(with_top_n_hat(&largest.options)?));
        }
        // Each plan reports the thresholds, whichever n̂ picks.
        plan.auto_thresholds = Some(thresholds);
        for switch in plan.smaller.iter_mut().chain(plan.larger.iter_mut()).chain(plan.largest.iter_mut()) {
            switch.auto_thresholds = Some(thresholds);
        }
        // The data are binned first at the depth planned by the plan the file's row count picks: n̂ is
        // released near that count, so the plan it picks seldom needs a second pass.
        plan.depth = Depth::FromReleasedNHat { planned: plan.for_n_hat(public.file_rows).planned_depth() };
        Ok(plan)
    }

    /// [`Self::new`] for one set of settings; `n_hat_epsilon`: the ε of n̂ when it is not `--root-share`'s
    /// share (the larger table's n̂, which the smaller table's plan releases too).
    fn without_switch(public: &PublicInputs, options: &PmmOptions, n_hat_epsilon: Option<f64>) -> Result<Self> {
        let pairs = if options.pair_share > 0.0 { Some(PairPlan::new(public, options.pair_share, &options.marginal_codes, &options.null_bands)?) } else { None };
        let epsilon = public.epsilon;
        let public = &PublicInputs { epsilon: epsilon * (1.0 - options.pair_share), ..*public };
        let share_of_n_hat = public.epsilon * options.noisy_n_share;
        let size = match (options.depth, public.neighbours) {
            (_, Neighbours::Replace) => TreeSize::Public(public.file_rows),
            (Some(_), Neighbours::AddRemove) => TreeSize::NotNeeded,
            (None, Neighbours::AddRemove) => {
                TreeSize::ReleasedFirst(NoisyRowCount::plan(n_hat_epsilon.unwrap_or(share_of_n_hat))?)
            }
        };
        let tree_share = 1.0 - options.marginal_share - options.refine_share;
        let level_epsilon = match (size, n_hat_epsilon) {
            (TreeSize::ReleasedFirst(_), Some(n_hat_epsilon)) => public.epsilon * tree_share - n_hat_epsilon,
            (TreeSize::ReleasedFirst(_), None) => public.epsilon * (tree_share - options.noisy_n_share),
            _ => public.epsilon * tree_share,
        };
        if level_epsilon <= 0.0 {
            return Err(Error::bad_input(format!(
                "--root-share {}, --marginal-share {} and --refine-share {} leave nothing of ε for the tree",
                options.noisy_n_share, options.marginal_share, options.refine_share
            )));
        }
        let mut plan = Self::with_size(public, public.dims, level_epsilon, size, options, "")?;
        plan.epsilon = epsilon;
        if options.marginal_share > 0.0 {
            plan.marginals = Some(MarginalPlan::new(public, options.marginal_share, options)?);
        }
        plan.pairs = pairs;
        if options.refine_share > 0.0 {
            plan.refinement = Some(LeafRefinement::new(public, options.refine_share)?);
        }
        Ok(plan)
    }

    /// The plan the release runs once n̂ is known: the smaller table's while ε·n̂ is below its threshold,
    /// the larger (largest) table's from its threshold on, else this one. Reads the released n̂ only.
    pub(super) fn for_n_hat(&self, n_hat: u64) -> &PmmPlan {
        let pick = self.auto_thresholds.map(|thresholds| thresholds.pick(self.epsilon * n_hat as f64));
        let switch = match pick {
            Some(AutoPick::Smaller) => &self.smaller,
            Some(AutoPick::Larger) => &self.larger,
            Some(AutoPick::Largest) => &self.largest,
            Some(AutoPick::Own) | None => &None,
        };
        switch.as_deref().unwrap_or(self)
    }

    /// The ε·n below which this plan's marginals would be shallower than `depth` (n is n̂, released with
    /// `row_count`'s noise, under add-remove, and the public n under replace): where auto's smaller table
    /// runs instead ([`SmallerTable`]).
    fn epsilon_n_for_marginal_depth(&self, depth: u32, row_count: Option<NoisyRowCount>) -> Result<f64> {
        let marginals = (self.marginals.as_ref())
            .ok_or_else(|| Error::internal("auto's switch to plain PMM follows the depth of its marginals"))?;
        Ok(marginals.rows_for_depth(depth, row_count)?.map_or(f64::INFINITY, |rows| self.epsilon * rows as f64))
    }

    /// The depth the count-and-marginals pass bins the marginals at before n̂ is released (add-remove,
    /// quantile partition): deep enough for whichever plan n̂ then picks.
    pub(super) fn marginal_pass_depth(&self, marginals: &MarginalPlan, row_count: NoisyRowCount) -> Result<u32> {
        let mut depth = marginals.planned_depth(row_count)?;
        for switch in self.larger.iter().chain(self.largest.iter()) {
            if let Some(marginals) = switch.marginals.as_ref() {
                depth = depth.max(marginals.planned_depth(row_count)?);
            }
        }
        Ok(depth)
    }

    /// PMM in `dims` dimensions with `level_epsilon` for its levels, for a size known to the caller
    /// (lowdim's subroutine); `context` is added to the depth rule's words (" in d' = 3 dimensions").
    pub fn with_size(
        public: &PublicInputs,
        dims: usize,
        level_epsilon: f64,
        size: TreeSize,
        options: &PmmOptions,
        context: &str,
    ) -> Result<Self> {
        let memory_depth = max_depth_for_memory(public.memory_limit, public.threads);
        let neighbours = public.neighbours;
        let rule = |size_words: &str| {
            format!(
                "{}{context} for the {size_words} (capped at {memory_depth} by memory)",
                depth_rule_name(dims)
            )
        };
        let schedule = |depth: u32| {
            let root = match size {
                TreeSize::AlreadyReleased { row_count, .. } => RootNoise::Released(row_count.scale),
                _ => RootNoise::InSchedule,
            };
            LevelSchedule::new(neighbours, level_epsilon, dims, depth, root)
        };
        let (depth, depth_rule) = match (options.depth, size) {
            (Some(depth), _) => {
                check_depth_fits(public, depth)?;
                (Depth::Known(schedule(depth)?), "given by --depth".to_string())
            }
            (None, TreeSize::Public(n)) => {
                let depth = depth_within_memory(
                    Neighbours::Replace,
                    level_epsilon,
                    dims,
                    n as f64,
                    None,
                    memory_depth,
                );
                (Depth::Known(schedule(depth)?), rule("public n"))
            }
            (None, TreeSize::AlreadyReleased { n_hat, row_count }) => {
                let depth = depth_within_memory(
                    Neighbours::AddRemove,
                    level_epsilon,
                    dims,
                    n_hat as f64,
                    Some(row_count.scale.to_f64()),
                    memory_depth,
                );
                (Depth::Known(schedule(depth)?), rule(&format!("released n̂ = {n_hat}")))
            }
            (None, TreeSize::ReleasedFirst(row_count)) => {
                let sigma = row_count.scale.to_f64();
                let guess = public.file_rows as f64 + ROOT_NOISE_HEADROOM * sigma;
                let planned = choose_depth(
                    Neighbours::AddRemove,
                    level_epsilon,
                    dims,
                    guess,
                    Some(sigma),
                    memory_depth,
                );
                (Depth::FromReleasedNHat { planned }, rule("released n̂"))
            }
            (None, TreeSize::NotNeeded) => {
                return Err(Error::internal("a PMM plan without --depth needs a size"))
            }
        };
        Ok(PmmPlan {
            epsilon: level_epsilon,
            dims,
            neighbours,
            level_epsilon,
            size,
            depth,
            depth_rule,
            memory_depth,
            consistency: options.consistency_step(),
            placement: public.placement,
            device: options.device,
            marginals: None,
            pairs: None,
            refinement: None,
            chosen_by: options.chosen_by,
            auto_thresholds: None,
            larger: None,
            largest: None,
            smaller: None,
        })
    }

    /// The rule that chose (or will choose) the depth, in the report's words.
    pub fn depth_rule(&self) -> &str {
        &self.depth_rule
    }

    /// The leaf geometry, when the depth is already known.
    pub fn geometry(&self) -> Option<CellGeometry> {
        match &self.depth {
            Depth::Known(schedule) => Some(CellGeometry::new(self.dims, schedule.depth)),
            Depth::FromReleasedNHat { .. } => None,
        }
    }

    pub fn device(&self) -> DeviceChoice {
        self.device
    }

    /// Bins the data, releases n̂ when the plan says so, noises the tree and makes it consistent; then
    /// the marginals and the pairs the plan has: the one release ([`Self::release_on`]) on one machine.
    pub fn release(&self, data: &DataPass, seeds: &RunSeeds, timings: &mut Timings) -> Result<Release> {
        let one_machine = OneMachine { data };
        Ok(self.release_on(&one_machine, seeds, timings)?.into_release(&one_machine))
    }

    /// `release` with the pair `maps` after it: their budget, parameters and the bound's words join it.
    pub(super) fn with_pair_maps(&self, mut release: Release, maps: Vec<PairMap>, parameters: PairParameters) -> Release {
        parameters.spend(&mut release.budget);
        note_cpu_pass(&mut release.binning, "pairs");
        release.measure = ReleasedMeasure::PairMapped { inner: Box::new(release.measure), maps };
        release.accuracy.formula = PAIR_MAPPED_ACCURACY_FORMULA.for_counts(self.consistency.bottom_up);
        // The maps move the rows after the tree: its bound is not proven for the table they make.
        release.accuracy.holds_for_table = false;
        if let MechanismParameters::Pmm(pmm) = &mut release.parameters {
            pmm.pair_marginals = Some(parameters);
        }
        release
    }

    /// The pairs of this plan, or of one n̂ may pick instead ([`Self::for_n_hat`]), when one maps pairs.
    pub(super) fn any_pairs(&self) -> Option<&PairPlan> {
        let switches = [&self.smaller, &self.larger, &self.largest].into_iter().flatten();
        self.pairs.as_ref().or_else(|| switches.filter_map(|plan| plan.pairs.as_ref()).next())
    }

    /// `--pair-share`'s histograms, when the plan has them.
    pub(super) fn pairs(&self) -> Option<&PairPlan> {
        self.pairs.as_ref()
    }

    /// `--marginal-share`'s trees, when the plan has them.
    pub(super) fn marginals(&self) -> Option<&MarginalPlan> {
        self.marginals.as_ref()
    }

    /// The marginals whose released quantiles cut the joint tree's cells (`--partition quantile`), when
    /// the plan has them.
    pub(super) fn quantile_marginals(&self) -> Option<&MarginalPlan> {
        self.marginals.as_ref().filter(|marginals| marginals.partition() == Partition::Quantile)
    }

    /// Whether the joint tree is cut at its released marginals' quantiles.
    pub(super) fn cuts_at_quantiles(&self) -> bool {
        self.quantile_marginals().is_some()
    }

    /// n̂'s noise when this plan releases n̂ first (add-remove, the depth rule).
    pub(super) fn releases_n_hat(&self) -> Option<NoisyRowCount> {
        match (&self.depth, self.size) {
            (Depth::FromReleasedNHat { .. }, TreeSize::ReleasedFirst(row_count)) => Some(row_count),
            _ => None,
        }
    }

    /// n̂ and its noise when this plan released it (the marginal trees' root under add-remove).
    pub(super) fn released_row_count(&self, n_hat: Option<u64>) -> Option<(u64, NoisyRowCount)> {
        match (n_hat, self.size) {
            (Some(n_hat), TreeSize::ReleasedFirst(row_count)) => Some((n_hat, row_count)),
            _ => None,
        }
    }

    /// `--refine-share`: the refinement and how many levels below a tree of `depth` it cuts the leaves, when
    /// the plan has it.
    pub(super) fn refinement(&self, depth: u32) -> Option<(&LeafRefinement, u32)> {
        let levels = LeafRefinement::max_levels(depth, self.memory_depth);
        self.refinement.as_ref().map(|refinement| (refinement, levels))
    }

    /// `release` with the refinement's budget and its report `parameters` (`None` without `--refine-share`).
    pub(super) fn with_refined_leaves(&self, release: &mut Release, parameters: Option<LeafRefinementParameters>) {
        if let Some(refinement) = &self.refinement {
            refinement.spend(&mut release.budget);
        }
        if let MechanismParameters::Pmm(pmm) = &mut release.parameters {
            pmm.refined_leaves = parameters;
        }
    }

    /// [`finish`](Self::finish) for the `joint` release (total `root_count`) with each column mapped by
    /// `maps` onto `marginals`: their budget, parameters and the bound's words join the release's.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_calibrated(
        &self,
        schedule: &LevelSchedule,
        joint: ReleasedMeasure,
        maps: Vec<Option<MonotoneMap>>,
        marginals: ReleasedMarginals,
        root_count: u64,
        scan: ScanStats,
        binning: String,
    ) -> Release {
        let value_cells = marginals.value_cells(&maps);
        let measure = ReleasedMeasure::Calibrated { inner: Box::new(joint), maps, value_cells };
        let mut release = self.finish(schedule, measure, root_count, scan, binning);
        note_cpu_pass(&mut release.binning, "marginals");
        marginals.spend(&mut release.budget);
        release.accuracy.formula = match marginals.parameters.partition {
            Partition::Midpoint => CALIBRATED_ACCURACY_FORMULA,
            Partition::Quantile => QUANTILE_ACCURACY_FORMULA,
        }
        .for_counts(self.consistency.bottom_up);
        release.accuracy.holds_for_table = false;
        if let MechanismParameters::Pmm(parameters) = &mut release.parameters {
            parameters.marginal_calibration = Some(marginals.parameters);
        }
        release
    }

    /// The depth the data are binned at first: the known one, or the one planned before n̂.
    pub fn planned_depth(&self) -> u32 {
        match &self.depth {
            Depth::Known(schedule) => schedule.depth,
            Depth::FromReleasedNHat { planned } => *planned,
        }
    }

    /// The schedule of the release, and n̂ when this plan releases it first from `rows_binned` (the true
    /// number of rows binned; the depth then follows from n̂).
    fn schedule_for(&self, rows_binned: u64, seeds: &RunSeeds) -> Result<(LevelSchedule, Option<u64>)> {
        match (&self.depth, self.size) {
            (Depth::Known(schedule), _) => Ok((schedule.clone(), None)),
            (Depth::FromReleasedNHat { .. }, TreeSize::ReleasedFirst(row_count)) => {
                let n_hat = row_count.release(rows_binned, &seeds.noise);
                Ok((self.schedule_for_n_hat(n_hat, row_count)?, Some(n_hat)))
            }
            (Depth::FromReleasedNHat { .. }, _) => Err(Error::internal("n̂ is released by the plan that planned it")),
        }
    }

    /// [`Self::schedule_for`], and the plan that then runs: the one n̂ picks ([`Self::for_n_hat`]) where this
    /// plan releases n̂, else this one.
    pub(super) fn plan_for_rows(&self, rows_binned: u64, seeds: &RunSeeds) -> Result<(&Self, LevelSchedule, Option<u64>)> {
        match self.releases_n_hat() {
            Some(row_count) => {
                let n_hat = row_count.release(rows_binned, &seeds.noise);
                let plan = self.for_n_hat(n_hat);
                Ok((plan, plan.schedule_for_n_hat(n_hat, row_count)?, Some(n_hat)))
            }
            None => {
                let (schedule, n_hat) = self.schedule_for(rows_binned, seeds)?;
                Ok((self, schedule, n_hat))
            }
        }
    }

    /// The schedule for the released `n_hat` (released with `row_count`'s noise): the depth follows it.
    pub(super) fn schedule_for_n_hat(&self, n_hat: u64, row_count: NoisyRowCount) -> Result<LevelSchedule> {
        let depth = depth_within_memory(
            Neighbours::AddRemove,
            self.level_epsilon,
            self.dims,
            n_hat as f64,
            Some(row_count.scale.to_f64()),
            self.memory_depth,
        );
        let root = RootNoise::Released(row_count.scale);
        LevelSchedule::new(Neighbours::AddRemove, self.level_epsilon, self.dims, depth, root)
    }

    pub(super) fn dims(&self) -> usize {
        self.dims
    }

    pub(super) fn consistency(&self) -> Consistency {
        self.consistency
    }

    pub(super) fn placement(&self) -> Placement {
        self.placement
    }

    /// Theorem 3.9 for `schedule` with this plan's pruning floors, for n (or n̂) rows.
    pub fn accuracy_bound(&self, schedule: &LevelSchedule, n: f64) -> f64 {
        schedule.accuracy_bound(n, &self.consistency.floors(&schedule.scales), self.consistency.bottom_up)
    }

    /// The release of `measure` (whose total is `root_count`) under `schedule`: its budget, report
    /// parameters and accuracy bound.
    pub(super) fn finish(
        &self,
        schedule: &LevelSchedule,
        measure: ReleasedMeasure,
        root_count: u64,
        scan: ScanStats,
        binning: String,
    ) -> Release {
        let mut parameters = self.parameters(schedule);
        parameters.auto_switch = (self.auto_thresholds)
            .map(|thresholds| AutoSwitch { epsilon_n: self.epsilon * root_count as f64, thresholds });
        Release {
            mechanism: "pmm",
            budget: self.budget(schedule),
            parameters: MechanismParameters::Pmm(parameters),
            root_count,
            root_count_is: root_count_is(self.neighbours),
            accuracy: AccuracyBound {
                expected_w1_bound: self.accuracy_bound(schedule, root_count as f64),
                units: NORMALISED_UNITS,
                n: root_count,
                formula: ACCURACY_FORMULA.for_counts(self.consistency.bottom_up),
                holds_for_table: true,
            },
            measure,
            anonymity: None,
            scan,
            covariance_loss: None,
            binning,
            output_phase: "sample and write",
        }
    }

    /// Noise and consistency on leaves binned at the known depth (lowdim's subroutine bins them
    /// itself). With an n̂ released by the caller, the root is that n̂.
    pub fn release_leaves(&self, leaves: Vec<u64>, seeds: &RunSeeds, timings: &mut Timings) -> Result<Vec<u64>> {
        let Depth::Known(schedule) = &self.depth else {
            return Err(Error::internal("the depth is chosen in release()"));
        };
        let n_hat = match self.size {
            TreeSize::AlreadyReleased { n_hat, .. } => Some(n_hat),
            _ => None,
        };
        let coins = seeds.consistency();
        Ok(release_leaf_counts(leaves, schedule, n_hat, &seeds.noise, self.consistency, coins, timings))
    }

    /// The known schedule (lowdim's subroutine).
    pub fn schedule(&self) -> Option<&LevelSchedule> {
        match &self.depth {
            Depth::Known(schedule) => Some(schedule),
            Depth::FromReleasedNHat { .. } => None,
        }
    }

    /// What each level spent, in level order (level 0 is n̂ when this plan released it first).
    pub fn budget(&self, schedule: &LevelSchedule) -> Budget {
        let mut budget = Budget::new(self.epsilon);
        for level in 0..=schedule.depth {
            let name = match (level, self.size) {
                (0, TreeSize::ReleasedFirst(_)) => "n̂".to_string(),
                _ => format!("level {level}"),
            };
            budget.spend(name, schedule.level_epsilon(level));
        }
        budget
    }

    /// The report's view of the release: depth, rules and the scale and ε of every level.
    pub fn parameters(&self, schedule: &LevelSchedule) -> PmmParameters {
        let geometry = CellGeometry::new(self.dims, schedule.depth);
        let floors = self.consistency.floors(&schedule.scales);
        PmmParameters {
            depth: schedule.depth,
            depth_rule: self.depth_rule.clone(),
            bottom_up: value_name(&self.consistency.bottom_up),
            consistency: value_name(&self.consistency.rule),
            prune_sigmas: self.consistency.prune_sigmas,
            placement: value_name(&self.placement),
            levels: (0..=schedule.depth)
                .map(|level| LevelInfo {
                    level,
                    sigma: schedule.scales[level as usize].map(|scale| scale.to_f64()),
                    sigma_num: schedule.scales[level as usize].map(|scale| scale.num()),
                    sigma_den: schedule.scales[level as usize].map(|scale| scale.den()),
                    epsilon: schedule.level_epsilon(level),
                    prune_floor: floors[level as usize],
                    cell_diameter: geometry.diameter(level),
                })
                .collect(),
            marginal_calibration: None,
            pair_marginals: None,
            refined_leaves: None,
            auto: self.chosen_by,
            auto_switch: None,
        }
    }
}

/// Refuses a `--depth` whose cell arrays would not fit in the run's memory limit.
pub fn check_depth_fits(public: &PublicInputs, depth: u32) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::bad_input(format!(
            "--depth {depth} is too large: the tree is at most {MAX_DEPTH} levels deep (its cells are numbered by \
             32-bit codes)"
        )));
    }
    let memory_depth = max_depth_for_memory(public.memory_limit, public.threads);
    if depth > memory_depth {
        return Err(Error::bad_input(format!(
            "--depth {depth} is too large: this machine's memory allows at most {} (cells need {} bytes at depth {depth})",
            memory_depth.min(MAX_DEPTH),
            cell_memory_bytes(depth, public.threads)
        )));
    }
    Ok(())
}

/// Adds to a GPU binner's report line that the `what` pass (the 1-D marginals' or the pairs' histograms,
/// `DataPass::marginal_and_pair_counts`) counted on the CPU: under `--device gpu` only the joint tree's leaves
/// are binned on the device, and the report says so rather than name the GPU for the whole run.
fn note_cpu_pass(binning: &mut String, what: &str) {
    if binning.starts_with("gpu") {
        binning.push_str(&format!("; the {what} counted on the CPU"));
    }
}

/// What the released total is, in the report's words.
pub fn root_count_is(neighbours: Neighbours) -> &'static str {
    match neighbours {
        Neighbours::AddRemove => "released noisy count n̂",
        Neighbours::Replace => "public n",
    }
}

/// The rule [`choose_depth`] applies, in words for the report.
fn depth_rule_name(dims: usize) -> &'static str {
    if dims == 1 {
        "minimises the Theorem 3.9 bound"
    } else {
        "ceil(log2(epsilon n)) - 1"
    }
}

/// [`choose_depth`] capped at `memory_depth`, with a warning on stderr when the memory limit makes the
/// tree shallower than the rule asks (a small --memory-limit-mib would otherwise cost accuracy silently).
fn depth_within_memory(
    neighbours: Neighbours,
    level_epsilon: f64,
    dims: usize,
    n: f64,
    root_sigma: Option<f64>,
    memory_depth: u32,
) -> u32 {
    let depth = choose_depth(neighbours, level_epsilon, dims, n, root_sigma, memory_depth);
    let wanted = choose_depth(neighbours, level_epsilon, dims, n, root_sigma, MAX_DEPTH);
    if wanted > depth {
        eprintln!(
            "warning: pmm: the memory limit caps the tree at depth {depth} (the depth rule asks for {wanted}); \
             raise --memory-limit-mib for a finer release"
        );
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::pmm::options::SmallerTable;

    /// auto's switch to plain PMM ([`SmallerTable`]) is taken exactly where the marginals the run would
    /// release are shallower than its depth: read off n̂ under add-remove, off the public n under replace.
    #[test]
    fn the_smaller_table_runs_where_the_marginals_would_be_too_shallow() {
        let calibrated = PmmOptions { marginal_share: 0.3, partition: Partition::Quantile, ..PmmOptions::DEFAULT };
        let smaller = SmallerTable { below_marginal_depth: 2, options: PmmOptions::DEFAULT };
        let auto = PmmOptions { smaller_table: Some(Box::new(smaller)), ..calibrated.clone() };
        let public = |neighbours, file_rows| crate::testing::public_inputs(4, 0.1, neighbours, file_rows);
        let plan = PmmPlan::new(&public(Neighbours::AddRemove, 10_000), &auto).unwrap();
        let (row_count, marginals) = (plan.releases_n_hat().unwrap(), plan.marginals().unwrap());
        let mut plain = 0;
        for n_hat in (1000..20_000).step_by(50) {
            let depth = marginals.tree(Some((n_hat, row_count))).unwrap().schedule.depth;
            assert_eq!(plan.for_n_hat(n_hat).marginals().is_none(), depth < 2, "n̂ = {n_hat}: depth {depth}");
            plain += usize::from(depth < 2);
        }
        assert!(0 < plain && plain < 380, "n̂ fell on both sides of the switch: {plain} of 380 plain");
        let mut plain = 0;
        for rows in (1000..40_000).step_by(500) {
            let run = PmmPlan::new(&public(Neighbours::Replace, rows), &auto).unwrap();
            let own = PmmPlan::new(&public(Neighbours::Replace, rows), &calibrated).unwrap();
            let depth = own.marginals().unwrap().tree(None).unwrap().schedule.depth;
            assert_eq!(run.marginals().is_none(), depth < 2, "n = {rows}: depth {depth}");
            plain += usize::from(depth < 2);
        }
        assert!(0 < plain && plain < 78, "n fell on both sides of the switch: {plain} of 78 plain");
    }
}
