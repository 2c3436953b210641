//! PE's flags (`--mechanism pe`), each a config key of the same name: refused where PE does not run,
//! resolved into [`PeOptions`] where it does.

use clap::Args;

use super::options::PeOptions;
use super::{PeDomain, PeInit, PeVariant};
use crate::binner::device::DeviceChoice;
use crate::error::Result;
use crate::mechanism::args::{refuse_first, CommonFlags, Mechanism};

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Private Evolution (--mechanism pe)")]
pub struct PeArgs {
    /// pe: the δ of its (ε, δ) guarantee, strictly between 0 and 1 (required there; the other
    /// mechanisms are pure ε-DP).
    #[arg(long, allow_negative_numbers = true)]
    pub delta: Option<f64>,
    /// pe: how the noisy histogram becomes weights [default: threshold (the paper's simulated PE)].
    #[arg(long, value_enum)]
    pub pe_variant: Option<PeVariant>,
    /// pe: number of steps T [default: round(2 ln(n epsilon)), the paper's simulations].
    #[arg(long)]
    pub pe_steps: Option<u32>,
    /// pe: synthetic points n_s per step [default: ceil(1/(sigma v^(1-1/max(d,2)))), Theorem 4.1].
    #[arg(long)]
    pub pe_samples: Option<u64>,
    /// pe: the initial points: uniform, centre, or a PUBLIC Parquet table with the same columns
    /// [default: uniform].
    #[arg(long, value_name = "uniform|centre|FILE")]
    pub pe_init: Option<PeInit>,
    /// pe with --pe-variant threshold: the threshold H on the noisy frequencies [default: 0].
    #[arg(long, allow_negative_numbers = true)]
    pub pe_threshold: Option<f64>,
    /// pe: the domain and metric: box ([0,1]^d, l-infinity) or ball (the inscribed ball, l2) [default: box].
    #[arg(long, value_enum)]
    pub pe_domain: Option<PeDomain>,
}

impl PeArgs {
    /// Refuses PE's flags where PE does not run, and where it does a missing `--delta` and `--root-share`
    /// (PE releases no n̂; PMM's `--depth` and `--consistency` are refused with PMM's flags, before these).
    pub fn check(&self, common: &CommonFlags) -> Result<()> {
        let runs_pe = common.chosen.runs == Mechanism::Pe;
        let pe_flags = self.pe_variant.is_some()
            || self.pe_steps.is_some()
            || self.pe_samples.is_some()
            || self.pe_init.is_some()
            || self.pe_threshold.is_some()
            || self.pe_domain.is_some();
        refuse_first(&[
            (
                self.delta.is_some() && !runs_pe,
                "--delta applies to --mechanism pe; pmm, psmm and lowdim are pure epsilon-DP (delta = 0)",
            ),
            (
                pe_flags && !runs_pe,
                "--pe-variant, --pe-steps, --pe-samples, --pe-init, --pe-threshold and --pe-domain apply to --mechanism pe only",
            ),
            (
                self.delta.is_none() && runs_pe,
                "--mechanism pe needs --delta (its guarantee is (epsilon, delta)-DP), e.g. --delta 1e-6",
            ),
            (
                runs_pe && common.root_share.is_some(),
                "--depth, --root-share and --consistency do not apply to --mechanism pe",
            ),
        ])
    }

    /// PE's options for this run, every default applied (after [`Self::check`], which requires `--delta`).
    pub fn options(self, common: &CommonFlags) -> PeOptions {
        PeOptions {
            delta: self.delta.expect("required by check"),
            variant: self.pe_variant.unwrap_or(PeVariant::Threshold),
            steps: self.pe_steps,
            samples: self.pe_samples,
            init: self.pe_init.unwrap_or(PeInit::Uniform),
            threshold: self.pe_threshold,
            domain: self.pe_domain.unwrap_or(PeDomain::Box),
            device: common.device.unwrap_or(DeviceChoice::Auto),
        }
    }
}
