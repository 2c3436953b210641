//! What a PSMM release puts in the run report: the grid, the cell noise and the projection.

use serde::Serialize;

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
