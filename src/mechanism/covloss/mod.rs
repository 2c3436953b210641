//! Covariance-loss microaggregation (seed 004, Boedihardjo–Strohmer–Vershynin; docs/mechanisms/covloss.md)
//! on Boolean encodings of a table ([`crate::encoding`]): two mechanisms that keep low-order marginals on
//! average.
//!
//! - `microagg` ([`microagg`]): Algorithm 1, (n/k)-anonymous (every released centroid is the mean of at
//!   least ⌊n/k⌋ rows). **Not differentially private.**
//! - `covloss` ([`private`]): Algorithm 2, pure ε-DP under replace (n public), ε split in three releases.
//!
//! Shared pieces: [`moments`] (exact pair counts by AND + popcount, projections, group sums), [`net`] (the
//! lattice α-net and its nearest point), [`partition`] (the spectral net partition) and [`points`] (the
//! released weighted points and their synthetic rows); [`plan`] makes both arms of the shared plan;
//! [`options`] holds their typed options and [`args`] their flags.

pub mod args;
pub mod microagg;
pub mod moments;
pub mod net;
pub mod options;
pub mod partition;
pub mod plan;
pub mod points;
pub mod private;

pub use microagg::{CellsFrom, MicroaggParameters, MicroaggPlan};
pub use options::{CovlossOptions, MicroaggOptions};
pub use plan::EncodedPlan;
pub use private::{CovlossParameters, CovlossPlan};

/// Makes counts of the rows at hand the whole table's: across ranks each holds its share of the rows and
/// its counts are summed over the ranks ([`crate::binner::pass::DataPass::sum_over_ranks`]); on one
/// machine the rows are the table and this does nothing.
pub type SumOverRanks<'a> = &'a dyn Fn(&mut [u64]);

/// The damping threshold b of Algorithm 2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Damping {
    /// The paper's b = (p√n/ε)^{1/2} [RECONSTRUCTED]: its centroids are mostly noise at feasible n.
    Paper,
    /// b = n/(2s): data-independent, since s depends on the public n only (note §3.6).
    Cells,
    /// A given b > 0.
    Fixed(f64),
}

impl std::str::FromStr for Damping {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "paper" => Ok(Damping::Paper),
            "cells" => Ok(Damping::Cells),
            number => match number.parse::<f64>() {
                Ok(b) if b.is_finite() && b > 0.0 => Ok(Damping::Fixed(b)),
                _ => Err(format!("damping must be 'paper', 'cells' or a number > 0, got '{text}'")),
            },
        }
    }
}

/// Algorithm 2's settings; `None` takes the paper's value from the public n, p, ε.
#[derive(Clone, Debug, PartialEq)]
pub struct CovlossSettings {
    pub alpha: Option<f64>,
    pub t: Option<usize>,
    pub damping: Damping,
    /// Relative shares of ε for (second moment, weights, centroids); normalised to sum to ε.
    pub shares: [f64; 3],
}

impl CovlossSettings {
    pub const DEFAULT: CovlossSettings = CovlossSettings {
        alpha: None,
        t: None,
        // The paper's b is tuned to its worst case and leaves the centroids mostly noise at any n we ran
        // (docs/mechanisms/covloss.md, "When covloss is the wrong choice"); b = n/(2s) is as private.
        damping: Damping::Cells,
        shares: [1.0, 1.0, 1.0],
    };
}

#[cfg(test)]
mod tests;
