//! What a lowdim release puts in the run report: the subspace, the ε per stage, the noise of each
//! release and the inner run's own parameters.

use serde::Serialize;

use crate::mechanism::pmm::report::PmmParameters;
use crate::mechanism::psmm::report::PsmmParameters;

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
