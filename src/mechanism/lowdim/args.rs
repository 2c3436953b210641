//! lowdim's flags (`--mechanism lowdim`), each a config key of the same name: refused where lowdim does not
//! run, resolved into [`LowdimOptions`] around its inner mechanism's where it does.

use clap::Args;

use super::options::{InnerMechanism, InnerOptions, LowdimOptions, TargetDim};
use crate::error::Result;
use crate::mechanism::args::{refuse_first, CommonFlags, Mechanism};

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "lowdim (--mechanism lowdim)")]
pub struct LowdimArgs {
    /// lowdim: subspace dimension d', or `auto` to choose it privately from the noisy spectrum [default: auto].
    #[arg(long, value_name = "D|auto")]
    pub target_dim: Option<TargetDim>,
    /// lowdim: mechanism run on the projected coordinates [default: pmm].
    #[arg(long, value_enum)]
    pub inner_mechanism: Option<InnerMechanism>,
}

impl LowdimArgs {
    /// Refuses lowdim's flags where lowdim does not run.
    pub fn check(&self, common: &CommonFlags) -> Result<()> {
        refuse_first(&[(
            (self.target_dim.is_some() || self.inner_mechanism.is_some()) && common.chosen.runs != Mechanism::Lowdim,
            "--target-dim and --inner-mechanism apply to --mechanism lowdim only",
        )])
    }

    /// lowdim's options for this run around `inner`, the options of its inner mechanism
    /// ([`crate::mechanism::args::ChosenMechanism::inner`]).
    pub fn options(self, common: &CommonFlags, inner: InnerOptions) -> LowdimOptions {
        LowdimOptions { target_dim: self.target_dim.unwrap_or(TargetDim::Auto), noisy_n_share: common.root_share, inner }
    }
}
