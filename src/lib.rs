//! dpsynth: differentially private synthetic tables, provably close to the original in the
//! 1-Wasserstein distance.
//!
//! A run is a chain of phases, each a module tested alone (docs/design.md). The library's API is the
//! public modules (`synth`, `options`, `eval`, `generate`, `inspect`, `io`, `stream`, `cluster`, `cli`,
//! `config`, `progress`, `error`, and on Linux `out_of_memory`, the binary's allocator); the engine rooms
//! (`geometry`, `binner`, `encoding`, `noise`, `privacy`, `ranks`, `mechanism`, `transport`, `sampler`)
//! are crate-private, and `options` re-exports the types an option names. The crate's own tests and
//! benches reach the engine rooms through the `internals` feature, which carries no stability promise.
//!
//! | phase | module |
//! |---|---|
//! | read Parquet files and datasets (positioned reads, projected, row groups in parallel); write Parquet atomically | [`io`] |
//! | public bounds and [0,1]^d, dyadic cell codes, the regular grid, the tree of counts | `geometry` |
//! | leaf histograms (CPU, or GPU with the `gpu` feature); the data pass mechanisms read through | `binner` |
//! | Boolean / one-hot / binned encoding of columns for the covariance-loss mechanisms | `encoding` |
//! | exact noise samplers | `noise` |
//! | relations, scale rounding, budget composition, noise streams, seeds, the n̂ release | `privacy` |
//! | the mechanisms, each a plan from public inputs and a release: PMM (with marginal calibration), PSMM, private-PCA lowdim, Private Evolution, covloss and microagg | `mechanism` |
//! | exact min-cost flow (PSMM's projection, eval's W1) | `transport` |
//! | synthetic points from released cell counts | `sampler` |
//! | the driver (plan → release → budget check → sample → write → commit) and the reports | [`synth`] |
//! | continual release over a growing table, resumable (`dpsynth stream`) | [`stream`] |
//! | the ranks of a run as the engine sees them: sums over them, agreement, shares | `ranks` |
//! | PMM across ranks (MPI with the `mpi` feature, threads in tests), bit-identical to one machine | [`cluster`] |
//! | owner-side evaluation: W1 estimates, moments, marginals, plots (`dpsynth eval`) | [`eval`] |
//! | options declared once, config files, the CLI | [`options`], [`config`], [`cli`] |
//!
//! [`synth::synthesize`] runs them all; the `dpsynth` binary is a thin CLI over it.

// The library's API: what a program that runs, evaluates or generates tables calls and names.
pub mod cli;
pub mod cluster;
pub mod config;
pub mod error;
pub mod eval;
pub mod generate;
pub mod inspect;
pub mod io;
pub mod options;
#[cfg(target_os = "linux")]
pub mod out_of_memory;
pub mod progress;
pub mod stream;
pub mod synth;

/// Declares the engine rooms: crate-private, so the API above is all a user can depend on. The crate's
/// own integration tests and benches reach inside through the `internals` feature, which its
/// dev-dependency on itself turns on (Cargo.toml); that path carries no stability promise.
macro_rules! engine_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

engine_modules!(binner, encoding, geometry, mechanism, noise, privacy, ranks, sampler, transport);

#[cfg(test)]
mod testing;

pub use error::{Error, Result};
pub use options::SynthOptions;
pub use synth::{synthesize, OutputPaths, SynthOutcome};
