//! The two outputs besides the table, kept apart (SPEC §1, §6):
//! - [`RunReport`]: publishable. Only public inputs and values computed from the release.
//! - [`Diagnostics`]: for the data owner only. True counts, clamped/dropped rows, timings, memory.

use serde::Serialize;

use crate::binner::ScanStats;

#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub tool: ToolInfo,
    pub mechanism: &'static str,
    pub guarantee: Guarantee,
    pub input: InputInfo,
    pub parameters: MechanismParameters,
    pub release: ReleaseInfo,
    pub accuracy: AccuracyBound,
    pub device: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ToolInfo {
    pub name: &'static str,
    pub version: &'static str,
    pub arrow_parquet: &'static str,
}

impl ToolInfo {
    pub fn current() -> Self {
        ToolInfo {
            name: "dpsynth",
            version: env!("CARGO_PKG_VERSION"),
            arrow_parquet: "60",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Guarantee {
    /// Pure ε-differential privacy.
    pub epsilon: f64,
    pub delta: f64,
    /// ε actually spent with the rounded noise scales (never above `epsilon`).
    pub epsilon_spent: f64,
    pub neighbours: String,
    /// What the guarantee treats as public.
    pub public_inputs: Vec<String>,
    /// False for a run with `--seed`: its noise is reproducible by anyone who knows the seed.
    pub fit_for_release: bool,
    pub noise: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct InputInfo {
    pub file: String,
    pub columns: Vec<ColumnInfo>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ColumnInfo {
    pub name: String,
    pub data_type: String,
    pub lo: f64,
    pub hi: f64,
}

/// What the mechanism chose; each mechanism has its own fields.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum MechanismParameters {
    Pmm(PmmParameters),
    Lowdim(Box<LowdimParameters>),
    Psmm(PsmmParameters),
}

impl MechanismParameters {
    /// One line for the terminal summary.
    pub fn summary(&self) -> String {
        match self {
            MechanismParameters::Pmm(pmm) => format!("depth {}", pmm.depth),
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
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PmmParameters {
    pub depth: u32,
    pub depth_rule: String,
    pub consistency: String,
    pub placement: String,
    pub levels: Vec<LevelInfo>,
}

/// `lowdim` (private PCA, paper 002): the subspace, the ε per stage, the noise of each release and the
/// inner run (PMM or PSMM) on the projected coordinates.
#[derive(Clone, Debug, Serialize)]
pub struct LowdimParameters {
    pub target_dim: usize,
    pub target_dim_rule: String,
    /// Paper 002's (E.1) terms per candidate d' (all of them under `auto`, the chosen one otherwise),
    /// without their unknown constants.
    pub target_dim_criterion: Vec<RateTermsInfo>,
    pub inner_mechanism: &'static str,
    /// ε actually spent per stage, with the rounded scales; they sum to `guarantee.epsilon_spent`.
    pub epsilon_shares: LowdimShares,
    pub quantisation: String,
    pub covariance_noise: GridNoiseInfo,
    pub mean_noise: GridNoiseInfo,
    /// The released private mean X̄_priv (normalised units): the subspace passes through it.
    pub private_mean: Vec<f64>,
    /// Paper 002's R = √d + ‖X̄_priv‖₂ (its subroutine cube is [−R, R]^{d'}).
    pub radius: f64,
    /// The box the subroutine partitions instead, per principal axis: the exact bounding box of the
    /// image of [0,1]^d under a = V̂ᵀ(x − X̄_priv), never wider than [−R, R].
    pub subroutine_box: Vec<[f64; 2]>,
    /// Eigenvalues of the released covariance M̂, algebraically largest first (normalised units²).
    pub noisy_eigenvalues: Vec<f64>,
    /// The inner run's own parameters, the fields of a `pmm` or a `psmm` report (`inner_mechanism`
    /// says which), in the subroutine box's unit cube.
    pub inner: InnerParameters,
}

/// The parameters of lowdim's subroutine, written as the plain PMM or PSMM object.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum InnerParameters {
    Pmm(PmmParameters),
    Psmm(PsmmParameters),
}

#[derive(Clone, Debug, Serialize)]
pub struct LowdimShares {
    pub noisy_n: Option<f64>,
    pub covariance: f64,
    pub mean: f64,
    pub subroutine: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RateTermsInfo {
    pub target_dim: usize,
    pub tail: f64,
    pub private_pca: f64,
    pub synthetic: f64,
    pub total: f64,
}

/// One statistic released on a public grid with exact discrete Laplace noise.
#[derive(Clone, Debug, Serialize)]
pub struct GridNoiseInfo {
    pub released: &'static str,
    /// Values are integer multiples of 2^-grid_bits (normalised units).
    pub grid_bits: u32,
    /// Largest change of one released entry between neighbours, grid units (rounding included).
    pub entry_sensitivity_grid_units: f64,
    /// Lap_Z scale (off the diagonal for the covariance), grid units, exactly num/den.
    pub scale_grid_units: f64,
    pub scale_num: u64,
    pub scale_den: u64,
    /// The same scale in normalised units.
    pub scale: f64,
    /// The covariance diagonal's scale in normalised units (twice the off-diagonal one, as in the paper).
    pub diagonal_scale: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PsmmParameters {
    /// k: the grid has k^d equal cubes.
    pub cells_per_axis: u32,
    /// m = k^d.
    pub cells: u64,
    pub cells_rule: String,
    pub cell_diameter: f64,
    /// The Lap_Z scale of every cell, num/den exactly.
    pub noise_scale: f64,
    pub noise_scale_num: u64,
    pub noise_scale_den: u64,
    pub epsilon_cells: f64,
    /// ε spent on the released row count n̂ (add-remove without --cells); null otherwise.
    pub epsilon_n_hat: Option<f64>,
    /// M in ν = c/M, and what it is.
    pub normaliser: u64,
    pub normaliser_is: &'static str,
    /// d_BL(projection, ν) in normalised ℓ∞ units; null when M = 0 (nothing to project).
    pub d_bl_to_noisy_measure: Option<f64>,
    pub solver: &'static str,
    pub placement: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct LevelInfo {
    pub level: u32,
    /// σ_j as released to the sampler (num/den exactly); null where the count is public.
    pub sigma: Option<f64>,
    pub sigma_num: Option<u64>,
    pub sigma_den: Option<u64>,
    pub epsilon: f64,
    pub cell_diameter: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReleaseInfo {
    /// n̂ under add-remove (released), the public n under replace.
    pub root_count: u64,
    pub root_count_is: &'static str,
    pub synthetic_rows: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct AccuracyBound {
    /// The mechanism's bound on E W1 (see `formula`), with `n` below.
    pub expected_w1_bound: f64,
    pub units: &'static str,
    pub n: u64,
    pub formula: &'static str,
}

/// Owner-only facts about the run. Not differentially private; never publish.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnostics {
    pub warning: &'static str,
    pub true_rows: u64,
    pub rows_read: u64,
    pub rows_dropped: u64,
    pub rows_clamped: u64,
    pub clamped_values: Vec<ClampedColumn>,
    /// Wall-clock seconds per phase, in the order the phases ran.
    pub timings_seconds: Vec<PhaseTiming>,
    pub threads: usize,
    pub binning: String,
    pub peak_memory_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PhaseTiming {
    pub phase: &'static str,
    pub seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClampedColumn {
    pub column: String,
    pub clamped: u64,
}

pub const DIAGNOSTICS_WARNING: &str =
    "NOT PRIVATE: true counts and timings about the sensitive data, for the data owner only. Never publish this file.";

impl Diagnostics {
    pub fn new(stats: &ScanStats, columns: &[String], threads: usize, binning: String) -> Self {
        Diagnostics {
            warning: DIAGNOSTICS_WARNING,
            true_rows: stats.rows_binned,
            rows_read: stats.rows_read,
            rows_dropped: stats.rows_dropped,
            rows_clamped: stats.rows_clamped,
            clamped_values: columns
                .iter()
                .zip(&stats.clamped_values)
                .map(|(column, &clamped)| ClampedColumn {
                    column: column.clone(),
                    clamped,
                })
                .collect(),
            timings_seconds: Vec::new(),
            threads,
            binning,
            peak_memory_bytes: None,
        }
    }
}

/// The process's peak resident memory (Linux `VmHWM`), if the platform says.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Total physical memory (Linux `MemTotal`), if the platform says.
pub fn physical_memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
