//! Composition of one run's releases. Every mechanism lists what it spent (with the rounded scales it
//! actually used); [`Budget::check`] sums the spends by basic composition (pure ε-DP) and is the one place
//! where a run's total is held against the ε the user gave.

use crate::error::{Error, Result};

/// One release's share of the budget.
#[derive(Clone, Debug, PartialEq)]
pub struct Spend {
    /// What was released ("level 3", "covariance", "n̂", ...).
    pub release: String,
    pub epsilon: f64,
}

/// The spends of one run against its total ε.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    pub epsilon: f64,
    pub spends: Vec<Spend>,
}

impl Budget {
    pub fn new(epsilon: f64) -> Self {
        Budget {
            epsilon,
            spends: Vec::new(),
        }
    }

    pub fn spend(&mut self, release: impl Into<String>, epsilon: f64) {
        self.spends.push(Spend {
            release: release.into(),
            epsilon,
        });
    }

    /// Σ of the spends.
    pub fn spent(&self) -> f64 {
        self.spends.iter().map(|spend| spend.epsilon).sum()
    }

    /// The total spent, or an internal error (a bug in a plan) when it exceeds ε or a spend is not a
    /// finite non-negative number.
    pub fn check(&self) -> Result<f64> {
        let spent = self.spent();
        let well_formed = self
            .spends
            .iter()
            .all(|spend| spend.epsilon.is_finite() && spend.epsilon >= 0.0);
        if well_formed && spent <= self.epsilon {
            Ok(spent)
        } else {
            Err(Error::internal(format!(
                "the releases would spend epsilon {spent} of {} ({:?}); nothing was written",
                self.epsilon, self.spends
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_total_above_epsilon_is_refused() {
        let mut budget = Budget::new(1.0);
        budget.spend("a", 0.5);
        budget.spend("b", 0.5);
        assert_eq!(budget.check().unwrap(), 1.0);
        budget.spend("c", 1e-12);
        assert!(budget.check().is_err());
        let mut negative = Budget::new(1.0);
        negative.spend("a", -0.1);
        assert!(negative.check().is_err());
        let mut nan = Budget::new(1.0);
        nan.spend("a", f64::NAN);
        assert!(nan.check().is_err());
    }
}
