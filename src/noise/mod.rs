//! Exact noise samplers on integer values (discrete Laplace, discrete Gaussian, the exponential mechanism on
//! integer utilities). Which stream a draw comes from is the business of
//! [`crate::privacy`] (the run's key and the registry of streams).

pub mod discrete_gaussian;
pub mod discrete_laplace;
pub mod exceedance;
pub mod exponential_mechanism;
pub mod laplace_table;
#[cfg(test)]
mod law_checks;
