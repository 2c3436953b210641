//! What a run asks of its mechanism, typed: [`MechanismOptions`], one variant per mechanism, each holding
//! the options its own folder declares (`pmm/options.rs`, `psmm/options.rs`, …) with their defaults and
//! their checks. The library runs these; the command line's flags resolve into them (each mechanism's
//! `args.rs`), and [`Plan::new`](super::Plan::new) dispatches on them.

use super::covloss::options::{CovlossOptions, MicroaggOptions};
use super::lowdim::options::LowdimOptions;
use super::pe::options::PeOptions;
use super::pmm::options::PmmOptions;
use super::psmm::options::PsmmOptions;
use crate::encoding::EncodingSpec;
use crate::error::{Error, Result};
use crate::privacy::Neighbours;
use crate::sampler::Placement;

/// The name the command line uses for an option's value (for messages and reports).
pub fn value_name<T: clap::ValueEnum>(value: &T) -> String {
    value.to_possible_value().map_or_else(String::new, |possible| possible.get_name().to_string())
}

/// The chosen mechanism with its own options.
#[derive(Clone, Debug, PartialEq)]
pub enum MechanismOptions {
    Pmm(PmmOptions),
    Psmm(PsmmOptions),
    Lowdim(LowdimOptions),
    Pe(PeOptions),
    Microagg(MicroaggOptions),
    Covloss(CovlossOptions),
}

impl MechanismOptions {
    /// The mechanism's name in reports and messages.
    pub fn name(&self) -> &'static str {
        match self {
            MechanismOptions::Pmm(_) => "pmm",
            MechanismOptions::Psmm(_) => "psmm",
            MechanismOptions::Lowdim(_) => "lowdim",
            MechanismOptions::Pe(_) => "pe",
            MechanismOptions::Microagg(_) => "microagg",
            MechanismOptions::Covloss(_) => "covloss",
        }
    }

    /// Whether the mechanism reads categorical, Boolean and null values coded on their axes (the partition
    /// mechanisms, whose cells hold any value; docs/mechanisms/pmm.md, "Mixed columns"). The others read
    /// numbers only.
    pub fn reads_mixed_columns(&self) -> bool {
        matches!(self, MechanismOptions::Pmm(_) | MechanismOptions::Psmm(_))
    }

    /// These options for a run whose columns have these code slots (0 for a number) and null bands (PMM's
    /// marginals then get a cell per code, its pairs a cell for null; the other mechanisms are as they are).
    pub fn for_columns(&self, columns: (&[usize], &[f64])) -> MechanismOptions {
        match self {
            MechanismOptions::Pmm(pmm) => MechanismOptions::Pmm(pmm.for_columns(columns)),
            other => other.clone(),
        }
    }

    /// The public encoding of the columns as bits, for the mechanisms that read one (covloss, microagg).
    pub fn encoding(&self) -> Option<&EncodingSpec> {
        match self {
            MechanismOptions::Covloss(covloss) => Some(&covloss.encoding),
            MechanismOptions::Microagg(microagg) => Some(&microagg.encoding),
            _ => None,
        }
    }

    /// The mechanism's own checks that need no data, under the run's relation and placement (the checks
    /// every run shares are `SynthOptions::validate`'s).
    pub fn validate(&self, neighbours: Neighbours, placement: Placement) -> Result<()> {
        match self {
            MechanismOptions::Pmm(pmm) => pmm.validate(placement),
            MechanismOptions::Psmm(psmm) => psmm.validate(),
            MechanismOptions::Lowdim(lowdim) => lowdim.validate(),
            MechanismOptions::Covloss(covloss) => covloss.validate(neighbours),
            // PE checks δ and the relation in its plan; microagg has no ε to share out.
            MechanismOptions::Pe(_) | MechanismOptions::Microagg(_) => Ok(()),
        }
    }
}

/// Refuses a share of ε that is not strictly between 0 and 1, by its flag's name.
pub fn check_share(flag: &str, share: f64) -> Result<()> {
    if share > 0.0 && share < 1.0 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{flag} must be strictly between 0 and 1, got {share}")))
    }
}
