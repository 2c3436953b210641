//! What a PMM release puts in the run report: the depth, its rule, and the scale and ε of every level.

use serde::Serialize;

use super::marginals::MarginalParameters;
use super::pairs::PairParameters;

#[derive(Clone, Debug, Serialize)]
pub struct PmmParameters {
    pub depth: u32,
    pub depth_rule: String,
    pub consistency: String,
    /// k of the pruning floors: noisy counts below ⌈k·σ_j⌉ were taken as empty before consistency.
    pub prune_sigmas: f64,
    pub placement: String,
    pub levels: Vec<LevelInfo>,
    /// `--mechanism auto`: why these settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<&'static str>,
    /// `--marginal-share`: the released 1-D marginals the columns are mapped onto.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marginal_calibration: Option<MarginalParameters>,
    /// `--pair-share`: the released pair histograms and which pairs were mapped onto them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair_marginals: Option<PairParameters>,
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
