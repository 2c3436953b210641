//! dpsynth: differentially private synthetic tables, provably close to the original in the
//! 1-Wasserstein distance.
//!
//! A run is a chain of phases, each a module you can use and test alone (docs/design.md):
//!
//! | phase | module |
//! |---|---|
//! | read Parquet files and datasets (positioned reads, projected, row groups in parallel); write Parquet atomically | [`io`] |
//! | public bounds and [0,1]^d, dyadic cell codes, the regular grid, the tree of counts | [`geometry`] |
//! | leaf histograms (CPU, or GPU with the `gpu` feature); the data pass mechanisms read through | [`binner`] |
//! | Boolean / one-hot / binned encoding of columns for the covariance-loss mechanisms | [`encoding`] |
//! | exact noise samplers | [`noise`] |
//! | relations, scale rounding, budget composition, noise streams, seeds, the n̂ release | [`privacy`] |
//! | the mechanisms, each a plan from public inputs and a release: PMM (with marginal calibration), PSMM, private-PCA lowdim, Private Evolution, covloss and microagg | [`mechanism`] |
//! | exact min-cost flow (PSMM's projection, eval's W1) | [`transport`] |
//! | synthetic points from released cell counts | [`sampler`] |
//! | the driver (plan → release → budget check → sample → write → commit) and the reports | [`synth`] |
//! | continual release over a growing table, resumable (`dpsynth stream`) | [`stream`] |
//! | PMM across ranks (MPI with the `mpi` feature, threads in tests), bit-identical to one machine | [`cluster`] |
//! | owner-side evaluation: W1 estimates, moments, marginals, plots (`dpsynth eval`) | [`eval`] |
//! | options declared once, config files, the CLI | [`options`], [`config`], [`cli`] |
//!
//! [`synth::synthesize`] runs them all; the `dpsynth` binary is a thin CLI over it.

pub mod binner;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod encoding;
pub mod error;
pub mod eval;
pub mod generate;
pub mod geometry;
pub mod inspect;
pub mod io;
pub mod mechanism;
pub mod noise;
pub mod options;
pub mod privacy;
pub mod progress;
pub mod sampler;
pub mod stream;
pub mod synth;
pub mod transport;

pub use error::{Error, Result};
pub use options::SynthOptions;
pub use synth::{synthesize, OutputPaths, SynthOutcome};
