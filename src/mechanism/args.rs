//! The command line's side of the mechanisms: the names `--mechanism` takes ([`Mechanism`]), what a
//! command line runs ([`ChosenMechanism`]) and the common flags each mechanism's own flags are checked and
//! resolved with ([`CommonFlags`]). Each mechanism declares its flags in its folder's `args.rs`: a
//! `clap::Args` struct under its own help heading (flattened into `options::SynthArgs`), whose `check`
//! refuses them, by name, where the mechanism does not run, and whose `options` resolves them into the
//! mechanism's typed options.

use serde::Deserialize;

use super::lowdim::options::InnerMechanism;
use crate::binner::device::DeviceChoice;
use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::privacy::Neighbours;
use crate::sampler::Placement;

/// The mechanisms `--mechanism` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Private Measure Mechanism: noisy counts on a dyadic tree, as the dissertation gives it (with the
    /// calibration flags you give).
    Pmm,
    /// Private Signed Measure Mechanism: noisy counts on m equal cubes, projected to a probability measure.
    Psmm,
    /// Private PCA down to d' dimensions, then PMM (or PSMM) there.
    Lowdim,
    /// Private Evolution: noisy nearest-neighbour votes that move public points towards the data
    /// ((ε, δ)-DP, --neighbours replace only).
    Pe,
    /// Spectral microaggregation of Boolean/one-hot encoded columns: (n/k)-anonymous, NOT differentially private.
    Microagg,
    /// Damped covariance-loss microaggregation of Boolean/one-hot encoded columns: ε-DP under replace.
    Covloss,
    /// The default: PMM with the settings measured best at the table's width: plain at d ≤ 2,
    /// --partition quantile with --marginal-share 0.45 at d ≥ 3, which from ε·n̂ = 3e4 on becomes
    /// --marginal-share 0.3 on midpoint cells at d = 3 and adds --pair-share 0.2 at d ≥ 4; plain at d = 3–5
    /// on tables too small for the marginals (the report's `parameters.auto` says which and why). Where
    /// --marginal-share or --partition is given, PMM with those.
    Auto,
}

/// What a run without `--mechanism` (or `mechanism` in its config) runs.
pub const DEFAULT_MECHANISM: Mechanism = Mechanism::Auto;

impl Mechanism {
    /// Whether the mechanism reads Boolean encodings of the columns (bits, categories, bins).
    pub fn is_encoded(self) -> bool {
        matches!(self, Mechanism::Microagg | Mechanism::Covloss)
    }
}

/// What a command line runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChosenMechanism {
    /// The mechanism named (`--mechanism`, else [`DEFAULT_MECHANISM`]).
    pub requested: Mechanism,
    /// The mechanism that runs: `auto` is PMM (with the settings auto chooses), never [`Mechanism::Auto`].
    pub runs: Mechanism,
    /// lowdim's inner mechanism (`--inner-mechanism`, else PMM), which runs only inside lowdim.
    pub inner: InnerMechanism,
}

impl ChosenMechanism {
    /// From `--mechanism` and `--inner-mechanism`, as given.
    pub fn new(requested: Option<Mechanism>, inner: Option<InnerMechanism>) -> Self {
        let requested = requested.unwrap_or(DEFAULT_MECHANISM);
        let runs = match requested {
            Mechanism::Auto => Mechanism::Pmm,
            other => other,
        };
        ChosenMechanism { requested, runs, inner: inner.unwrap_or(InnerMechanism::Pmm) }
    }

    /// Whether PMM's tree runs: PMM (or auto), or lowdim's inner PMM.
    pub fn uses_pmm(self) -> bool {
        self.runs == Mechanism::Pmm || (self.runs == Mechanism::Lowdim && self.inner == InnerMechanism::Pmm)
    }

    /// Whether PSMM's grid runs: PSMM, or lowdim's inner PSMM.
    pub fn uses_psmm(self) -> bool {
        self.runs == Mechanism::Psmm || (self.runs == Mechanism::Lowdim && self.inner == InnerMechanism::Psmm)
    }
}

/// The flags every mechanism shares, resolved, with what the command line runs: what each mechanism's
/// own flags are checked and resolved with.
#[derive(Clone, Copy, Debug)]
pub struct CommonFlags<'a> {
    pub chosen: ChosenMechanism,
    /// `--root-share` (or its former name, `--noisy-n-share`), as given.
    pub root_share: Option<f64>,
    /// `--device`, as given.
    pub device: Option<DeviceChoice>,
    pub neighbours: Neighbours,
    pub placement: Placement,
    /// `--columns`, as given.
    pub columns: Option<&'a [String]>,
    /// Every column's given bounds (the used columns among them are numbers, dates or timestamps).
    pub bounds: &'a [ColumnBounds],
    /// How many columns the run uses: `--columns` (every input column by default), or where the input's
    /// columns are not known, the columns with a domain on the command line.
    pub dims: usize,
}

/// A mechanism's part of the refusal table: each (refused, why) in order; the first refused one is the
/// error.
pub fn refuse_first(refusals: &[(bool, &str)]) -> Result<()> {
    match refusals.iter().find(|(refused, _)| *refused) {
        Some((_, message)) => Err(Error::bad_input(*message)),
        None => Ok(()),
    }
}
