//! dpsynth: differentially private synthetic tables, provably close to the original in the
//! 1-Wasserstein distance.
//!
//! A run is a chain of phases, each a module you can use and test alone (SPEC §2):
//!
//! | phase | module |
//! |---|---|
//! | read Parquet columns (mmap, projected, row groups in parallel) | [`source`] |
//! | public bounds, normalisation to [0,1]^d | [`bounds`] |
//! | cell codes of the dyadic partition | [`partition`] |
//! | the regular grid of equal cubes (PSMM) | [`grid`] |
//! | leaf histogram (CPU, or GPU with the `gpu` feature) | [`binner`] |
//! | tree of counts | [`tree`] |
//! | privacy accounting: schedule, depth, bound | [`privacy`] |
//! | exact discrete Laplace noise | [`noise`] |
//! | top-down consistency | [`consistency`] |
//! | the mechanisms: PMM, PSMM (with its min-cost-flow projection), private-PCA lowdim | [`mechanism`] |
//! | exact min-cost flow (PSMM's projection, eval's W1) | [`transport`] |
//! | synthetic points from released cell counts | [`sampler`] |
//! | Parquet output, written atomically | [`sink`] |
//! | publishable report and owner-only diagnostics | [`report`] |
//! | owner-side evaluation: W1 estimates, moments, marginals, plots (`dpsynth eval`) | [`eval`] |
//!
//! [`synth::synthesize`] runs them all; the `dpsynth` binary is a thin CLI over it.

pub mod binner;
pub mod bounds;
pub mod cli;
pub mod consistency;
pub mod error;
pub mod eval;
pub mod generate;
pub mod grid;
pub mod inspect;
pub mod mechanism;
pub mod noise;
pub mod options;
pub mod partition;
pub mod privacy;
pub mod progress;
pub mod report;
pub mod sampler;
pub mod sink;
pub mod source;
pub mod synth;
pub mod transport;
pub mod tree;

pub use error::{Error, Result};
pub use options::SynthOptions;
pub use synth::{synthesize, OutputPaths, SynthOutcome};
