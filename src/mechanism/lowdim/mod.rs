//! Low-dimensional synthesis by private PCA (paper 002, Algorithm 1; docs/mechanisms/lowdim.md): private centred
//! covariance, top-d' eigenvectors, private mean, then a mechanism on the projected coordinates in
//! [−R, R]^{d'}, shifted back by the same private mean and clamped to [0,1]^d.
//!
//! - [`covariance`]: exact integer Gram sums of the quantised rows, released on a public grid with
//!   exact discrete Laplace noise (safe against floating-point attacks).
//! - [`basis`]: the noisy spectrum, the top-d' eigenvectors and the private choice of d'.
//! - [`projection`]: the map between data space and the subroutine's unit cube, both ways.
//!
//! - [`plan`]: the mechanism's entry, its plan and its release (composing PMM's or PSMM's plan);
//! - [`report`]: what the run report says about a lowdim release;
//! - [`options`]: its typed options; [`args`]: its flags.
//!
//! This module also splits ε between the stages ([`LowdimBudget`]).

pub mod args;
pub mod basis;
pub mod covariance;
pub mod options;
pub mod plan;
pub mod projection;
pub mod report;

pub use plan::LowdimPlan;

use crate::error::{Error, Result};

use crate::privacy::Neighbours;

/// ε per stage. Under `replace` the paper's split ε/3 × 3 (n public). Under `add-remove` a declared
/// share s of ε first buys a noisy n̂, and (1 − s)ε is split in three equal shares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LowdimBudget {
    /// ε of the released row count n̂ (add-remove only).
    pub noisy_n: Option<f64>,
    pub covariance: f64,
    pub mean: f64,
    /// ε of the mechanism run on the projected coordinates.
    pub subroutine: f64,
}

impl LowdimBudget {
    pub fn split(epsilon: f64, neighbours: Neighbours, noisy_n_share: Option<f64>) -> Result<Self> {
        let (noisy_n, rest) = match (neighbours, noisy_n_share) {
            (Neighbours::Replace, None) => (None, epsilon),
            (Neighbours::Replace, Some(_)) => {
                return Err(Error::bad_input(
                    "--root-share applies to lowdim under --neighbours add-remove only: under replace n is public",
                ))
            }
            (Neighbours::AddRemove, Some(share)) => (Some(share * epsilon), (1.0 - share) * epsilon),
            (Neighbours::AddRemove, None) => {
                return Err(Error::privacy(
                    "--mechanism lowdim under --neighbours add-remove needs --root-share S: the paper's \
                     covariance and mean noise use the row count n, which is private under add-remove, so a \
                     share S of epsilon must first release a noisy n (for example --root-share 0.1); \
                     or use --neighbours replace, where n is public",
                ))
            }
        };
        let third = rest / 3.0;
        Ok(LowdimBudget {
            noisy_n,
            covariance: third,
            mean: third,
            subroutine: third,
        })
    }

    /// The planned total (the run report gives the spent total, with rounded-up scales).
    #[cfg(test)]
    pub fn total(&self) -> f64 {
        self.noisy_n.unwrap_or(0.0) + self.covariance + self.mean + self.subroutine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_three_equal_thirds_of_what_remains_and_sum_to_epsilon() {
        for &epsilon in &[0.1, 1.0, 4.0, 37.5] {
            let replace = LowdimBudget::split(epsilon, Neighbours::Replace, None).unwrap();
            assert_eq!(replace.noisy_n, None);
            // A ε/4 split (the paper's appendix) or shares that do not sum to ε fail here.
            for share in [replace.covariance, replace.mean, replace.subroutine] {
                assert!((share - epsilon / 3.0).abs() <= 1e-12 * epsilon);
            }
            assert!((replace.total() - epsilon).abs() <= 1e-12 * epsilon);
            let add_remove =
                LowdimBudget::split(epsilon, Neighbours::AddRemove, Some(0.1)).unwrap();
            assert!((add_remove.noisy_n.unwrap() - 0.1 * epsilon).abs() <= 1e-12 * epsilon);
            for share in [
                add_remove.covariance,
                add_remove.mean,
                add_remove.subroutine,
            ] {
                assert!((share - 0.3 * epsilon).abs() <= 1e-12 * epsilon);
            }
            assert!((add_remove.total() - epsilon).abs() <= 1e-12 * epsilon);
        }
    }

    #[test]
    fn add_remove_without_a_noisy_n_share_is_refused_with_the_reason() {
        let error = LowdimBudget::split(1.0, Neighbours::AddRemove, None).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("--root-share"), "{message}");
        assert!(message.contains("private under add-remove"), "{message}");
        assert!(LowdimBudget::split(1.0, Neighbours::Replace, Some(0.1)).is_err());
    }
}
