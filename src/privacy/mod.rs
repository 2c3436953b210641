//! The privacy home (docs/privacy.md): what is protected and what every mechanism's accounting is built
//! from. Each mechanism's plan says where its ε goes; this module owns the pieces they share:
//!
//! - [`Neighbours`]: the neighbouring relation, and the sensitivity of a histogram under it;
//! - [`budget`]: composition of the spends of one run, checked against ε in one place;
//! - [`noise_scale`]: every noise scale rounded up to a rational with one safety margin;
//! - [`streams`]: the registry of noise streams (which stream each release draws from);
//! - [`seeds`]: the run's secret noise key and its named post-processing seeds;
//! - [`resumed_stream`]: a noise stream reopened at a saved word position, cheaply, for a few draws;
//! - [`zcdp`]: the zCDP accountant of Gaussian mechanisms and its conversion to (ε, δ);
//! - [`row_count`]: the noisy row count n̂ that mechanisms release first under add-remove;
//! - [`private_bounds`]: a numeric column's bounds released from a declared share of ε (`--private-bounds`).

pub mod budget;
pub mod private_bounds;
pub mod resumed_stream;
pub mod row_count;
pub mod seeds;
pub mod streams;
pub mod zcdp;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::noise::discrete_laplace::RationalScale;

pub use budget::Budget;
pub use row_count::{NoisyRowCount, DEFAULT_NOISY_N_SHARE};
pub use seeds::{draw_seed, NoiseKey, RunSeeds};
pub use streams::NoiseStream;

/// Which datasets count as neighbours, and so what the guarantee protects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Neighbours {
    /// Adding or removing one row: the row count n is private.
    AddRemove,
    /// Replacing one row by another: the row count n is public.
    Replace,
}

impl Neighbours {
    pub const DEFAULT: Neighbours = Neighbours::AddRemove;

    pub fn describe(self) -> &'static str {
        match self {
            Neighbours::AddRemove => {
                "add-remove: datasets differ by adding or removing one row; n is private"
            }
            Neighbours::Replace => "replace: datasets differ by replacing one row; n is public",
        }
    }

    /// ℓ1 sensitivity of a histogram of the rows: one cell changes by one (add-remove), or two cells
    /// change by one each (replace).
    pub fn histogram_sensitivity(self) -> f64 {
        match self {
            Neighbours::AddRemove => 1.0,
            Neighbours::Replace => 2.0,
        }
    }
}

/// Each scale is raised by this relative margin before its exact rounding up, so that f64 rounding
/// in a plan's arithmetic can never make the spent budget exceed ε.
pub const SCALE_SAFETY_MARGIN: f64 = 1e-9;

/// The noise scale of a release that needs `sigma`: raised by [`SCALE_SAFETY_MARGIN`], then rounded up
/// to a rational (more noise, never less). `what` names the release in the error.
pub fn noise_scale(sigma: f64, what: &str) -> Result<RationalScale> {
    RationalScale::round_up(sigma * (1.0 + SCALE_SAFETY_MARGIN)).ok_or_else(|| {
        Error::bad_input(format!(
            "{what} would need a noise scale of {sigma:e}, outside the sampler's range: choose another epsilon"
        ))
    })
}

/// Validates a user's ε: finite and positive.
pub fn check_epsilon(epsilon: f64) -> Result<()> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(())
    } else {
        Err(Error::privacy(format!(
            "--epsilon must be a finite number > 0, got {}",
            crate::error::compact_number(epsilon)
        )))
    }
}

/// Above this ε a run is warned: the guarantee then lets one row change the odds of any outcome by a factor
/// e^ε > e^10 ≈ 22 000, which protects little; published single releases use ε ≤ 10 (most ≤ 1 to 2), and a
/// larger ε is for experiments.
pub const EPSILON_WARNING_ABOVE: f64 = 10.0;

/// The warning for an ε above [`EPSILON_WARNING_ABOVE`], if it is.
pub fn epsilon_warning(epsilon: f64) -> Option<String> {
    (epsilon > EPSILON_WARNING_ABOVE).then(|| {
        format!(
            "ε = {} is above {EPSILON_WARNING_ABOVE}: one row may change the odds of any output by a factor e^ε > \
             22 000, so the guarantee protects little (fine for experiments, not for a release); large ε also makes \
             the tree as deep as memory allows, which costs time",
            crate::error::compact_number(epsilon)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epsilon_must_be_finite_and_positive() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(check_epsilon(bad).is_err());
        }
        assert!(check_epsilon(0.5).is_ok());
    }

    #[test]
    fn scales_are_never_rounded_down() {
        for sigma in [1e-3, 0.37, 1.0, 16.0 / 0.0625, 12345.678] {
            let scale = noise_scale(sigma, "a test").unwrap();
            assert!(scale.to_f64() >= sigma * (1.0 + SCALE_SAFETY_MARGIN) * (1.0 - 1e-15));
        }
        assert!(noise_scale(f64::INFINITY, "a test").is_err());
    }
}
