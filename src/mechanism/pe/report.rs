//! What a PE release puts in the run report: every parameter with the formula it came from, the
//! accountant, each step's spend and the total.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct PeParameters {
    pub variant: String,
    pub domain: String,
    pub metric: String,
    pub diameter: f64,
    pub init: String,
    pub steps: u32,
    pub steps_rule: String,
    /// σ on the probability scale (count noise σ / n) that fixes α and n_s.
    pub sigma: f64,
    pub alpha: f64,
    pub alpha_rule: &'static str,
    pub scales: u32,
    pub scales_rule: &'static str,
    pub variations_per_point: usize,
    pub variation_sigmas: Vec<f64>,
    pub variation_sigmas_rule: &'static str,
    pub samples: usize,
    pub samples_rule: String,
    pub candidates_per_step: usize,
    /// H of the threshold variant (probability scale); null for the other variants.
    pub threshold: Option<f64>,
    pub privacy: PePrivacy,
    pub steps_released: Vec<PeStep>,
    pub nearest_neighbour_index: String,
}

/// The accounting of a PE run.
#[derive(Clone, Debug, Serialize)]
pub struct PePrivacy {
    pub accountant: &'static str,
    pub sensitivity: &'static str,
    /// The request.
    pub epsilon: f64,
    pub delta: f64,
    /// Gaussian variants: the discrete Gaussian's variance on the counts, num/den exactly.
    pub count_noise_variance: Option<f64>,
    pub count_noise_variance_num: Option<u64>,
    pub count_noise_variance_den: Option<u64>,
    /// Gaussian variants: ρ per step and in total (zCDP).
    pub rho_per_step: Option<f64>,
    pub rho_total: Option<f64>,
    /// Laplace variant: the discrete Laplace scale on the counts (num/den), the count a bin must reach,
    /// and the (ε, δ) of each step.
    pub laplace_scale: Option<f64>,
    pub laplace_scale_num: Option<u64>,
    pub laplace_scale_den: Option<u64>,
    pub laplace_threshold_count: Option<u64>,
    pub epsilon_per_step: Option<f64>,
    pub delta_per_step: Option<f64>,
    /// (ε, δ) of the whole run under the accountant, never above the request.
    pub epsilon_spent: f64,
    pub delta_spent: f64,
    pub calibration: &'static str,
}

/// One step, from released values only.
#[derive(Clone, Debug, Serialize)]
pub struct PeStep {
    pub step: u32,
    pub candidates: usize,
    /// Candidates with a positive weight after post-processing.
    pub kept_candidates: usize,
    /// True when no weight survived and S_{t−1} was kept (post-processing, no data read).
    pub kept_previous_points: bool,
    /// projection variant: D_BL between the noisy histogram and its projection.
    pub d_bl_to_noisy_histogram: Option<f64>,
}
