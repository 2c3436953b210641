//! What a PMM release puts in the run report: the depth, its rule, and the scale and ε of every level.

use serde::Serialize;

use super::marginals::MarginalParameters;
use super::pairs::PairParameters;
use super::refine::LeafRefinementParameters;

#[derive(Clone, Debug, Serialize)]
pub struct PmmParameters {
    pub depth: u32,
    pub depth_rule: String,
    /// The pass before the top-down splits: `none` (the noisy counts) or `average` (averaged bottom-up).
    pub bottom_up: String,
    pub consistency: String,
    /// k of the pruning floors: noisy counts below ⌈k·σ_j⌉ were taken as empty before consistency.
    pub prune_sigmas: f64,
    pub placement: String,
    pub levels: Vec<LevelInfo>,
    /// `--mechanism auto`: why these settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<&'static str>,
    /// `--mechanism auto` where it switches settings by the table's size: the ε·n it compared and where.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_switch: Option<AutoSwitch>,
    /// `--marginal-share`: the released 1-D marginals the columns are mapped onto.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marginal_calibration: Option<MarginalParameters>,
    /// `--pair-share`: the released pair histograms and which pairs were mapped onto them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair_marginals: Option<PairParameters>,
    /// `--refine-share`: the dense leaves cut finer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refined_leaves: Option<LeafRefinementParameters>,
}

/// Where `--mechanism auto` switches settings, in ε·n: n is n̂ under add-remove (released before the
/// choice), the public n under replace.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct AutoThresholds {
    /// Plain PMM below it: each column's marginal would be shallower than auto's rule asks (null: no such
    /// switch at this d, or no table reaches that depth).
    pub plain_below_epsilon_n: Option<f64>,
    /// auto's larger table's settings from it on (null: no such switch at this d).
    pub larger_table_from_epsilon_n: Option<f64>,
    /// auto's largest table's settings from it on (null: no such switch at this d).
    pub largest_table_from_epsilon_n: Option<f64>,
    /// The pair maps from it on: the same threshold where the larger table's settings add them (d ≥ 4),
    /// else null.
    pub pairs_from_epsilon_n: Option<f64>,
}

/// The ε·n auto's switch compared with its thresholds (n̂, the released total, under add-remove).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct AutoSwitch {
    pub epsilon_n: f64,
    #[serde(flatten)]
    pub thresholds: AutoThresholds,
}

#[derive(Clone, Debug, Serialize)]
pub struct LevelInfo {
    pub level: u32,
    /// σ_j as released to the sampler (num/den exactly); null where the count is public.
    pub sigma: Option<f64>,
    pub sigma_num: Option<u64>,
    pub sigma_den: Option<u64>,
    pub epsilon: f64,
    /// ⌈k·σ_j⌉: this level's noisy counts below it were taken as 0 (0: none pruned).
    pub prune_floor: i64,
    pub cell_diameter: f64,
}
