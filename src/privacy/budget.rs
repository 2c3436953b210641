//! Composition of one run's releases. Every mechanism lists what it spent (with the rounded scales it
//! actually used); [`Budget::check`] composes the spends with the run's [`Accountant`] and is the one
//! place where a run's total is held against the (ε, δ) the user gave:
//! - [`Accountant::BasicComposition`]: Σ ε_i ≤ ε and Σ δ_i ≤ δ (pure ε-DP when every δ_i = 0, as for
//!   PMM, PSMM and lowdim, whose δ is 0);
//! - [`Accountant::Zcdp`]: the spends are zCDP ρ_i (Gaussian noise), Σ ρ_i is converted once to (ε, δ)
//!   ([`super::zcdp`]) and must fit the request.

use crate::error::{Error, Result};
use crate::privacy::zcdp;

/// How a run's spends compose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accountant {
    BasicComposition,
    Zcdp,
}

impl Accountant {
    pub fn describe(self) -> &'static str {
        match self {
            Accountant::BasicComposition => "basic composition: the (epsilon_i, delta_i) add up",
            Accountant::Zcdp => {
                "zCDP (Bun-Steinke): the rho_i add up, converted once to (epsilon, delta) by \
                 Canonne-Kamath-Steinke 2020 Corollary 13"
            }
        }
    }
}

/// One release's share of the budget: (ε, δ) under basic composition, ρ under zCDP.
#[derive(Clone, Debug, PartialEq)]
pub struct Spend {
    /// What was released ("level 3", "covariance", "n̂", ...).
    pub release: String,
    pub epsilon: f64,
    pub delta: f64,
    pub rho: f64,
}

/// The spends of one run against its total (ε, δ).
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    pub epsilon: f64,
    pub delta: f64,
    pub accountant: Accountant,
    pub spends: Vec<Spend>,
}

impl Budget {
    /// A pure ε budget (δ = 0, basic composition).
    pub fn new(epsilon: f64) -> Self {
        Budget::approximate(epsilon, 0.0)
    }

    /// An (ε, δ) budget under basic composition.
    pub fn approximate(epsilon: f64, delta: f64) -> Self {
        Budget {
            epsilon,
            delta,
            accountant: Accountant::BasicComposition,
            spends: Vec::new(),
        }
    }

    /// An (ε, δ) budget whose spends are zCDP ρ.
    pub fn zcdp(epsilon: f64, delta: f64) -> Self {
        Budget {
            accountant: Accountant::Zcdp,
            ..Budget::approximate(epsilon, delta)
        }
    }

    /// A pure ε spend.
    pub fn spend(&mut self, release: impl Into<String>, epsilon: f64) {
        self.spend_approximate(release, epsilon, 0.0);
    }

    /// An (ε, δ) spend.
    pub fn spend_approximate(&mut self, release: impl Into<String>, epsilon: f64, delta: f64) {
        self.spends.push(Spend {
            release: release.into(),
            epsilon,
            delta,
            rho: 0.0,
        });
    }

    /// A ρ-zCDP spend.
    pub fn spend_rho(&mut self, release: impl Into<String>, rho: f64) {
        self.spends.push(Spend {
            release: release.into(),
            epsilon: 0.0,
            delta: 0.0,
            rho,
        });
    }

    /// Σ δ_i of the spends (basic composition).
    pub fn spent_delta(&self) -> f64 {
        self.spends.iter().map(|spend| spend.delta).sum()
    }

    /// Σ ρ_i of the spends (zCDP).
    pub fn spent_rho(&self) -> f64 {
        self.spends.iter().map(|spend| spend.rho).sum()
    }

    /// Σ of the spends.
    pub fn spent(&self) -> f64 {
        self.spends.iter().map(|spend| spend.epsilon).sum()
    }

    /// The ε spent (Σ ε_i, or the ε of Σ ρ_i at δ under zCDP), or an internal error (a bug in a plan)
    /// when the total exceeds (ε, δ), a spend is not a finite non-negative number, or a spend is of the
    /// other accountant's kind.
    pub fn check(&self) -> Result<f64> {
        let finite = |value: f64| value.is_finite() && value >= 0.0;
        let well_formed = self.spends.iter().all(|spend| {
            finite(spend.epsilon)
                && finite(spend.delta)
                && finite(spend.rho)
                && match self.accountant {
                    Accountant::BasicComposition => spend.rho == 0.0,
                    Accountant::Zcdp => spend.epsilon == 0.0 && spend.delta == 0.0,
                }
        });
        let (spent, fits) = match self.accountant {
            Accountant::BasicComposition => {
                let spent = self.spent();
                (spent, spent <= self.epsilon && self.spent_delta() <= self.delta)
            }
            Accountant::Zcdp => {
                let rho = self.spent_rho();
                let spent = zcdp::epsilon_for(rho, self.delta);
                (spent, spent <= self.epsilon && zcdp::delta_for(rho, self.epsilon) <= self.delta)
            }
        };
        if well_formed && fits {
            Ok(spent)
        } else {
            Err(Error::internal(format!(
                "the releases would spend epsilon {spent} of {} (delta {} of {}, {:?}): {:?}; nothing was written",
                self.epsilon,
                self.spent_delta(),
                self.delta,
                self.accountant,
                self.spends
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

    #[test]
    fn deltas_add_up_under_basic_composition() {
        let mut budget = Budget::approximate(1.0, 1e-5);
        budget.spend_approximate("a", 0.5, 0.5e-5);
        budget.spend_approximate("b", 0.5, 0.5e-5);
        assert!(budget.check().is_ok());
        budget.spend_approximate("c", 0.0, 1e-12);
        assert!(budget.check().is_err());
        let mut pure = Budget::new(1.0);
        pure.spend_approximate("a", 0.1, 1e-9);
        assert!(pure.check().is_err(), "a pure budget has δ = 0");
    }

    #[test]
    fn zcdp_spends_are_converted_once() {
        let (epsilon, delta) = (1.0, 1e-4);
        let rho = zcdp::rho_for(epsilon, delta).unwrap();
        let mut budget = Budget::zcdp(epsilon, delta);
        for step in 0..10 {
            budget.spend_rho(format!("step {step}"), rho / 10.0 * (1.0 - 1e-9));
        }
        let spent = budget.check().unwrap();
        assert!(spent <= epsilon && spent > 0.99 * epsilon);
        budget.spend_rho("one more", rho * 1e-3);
        assert!(budget.check().is_err());
        let mut mixed = Budget::zcdp(epsilon, delta);
        mixed.spend("pure", 0.1);
        assert!(mixed.check().is_err(), "an ε spend has no place in a zCDP budget");
    }
}
