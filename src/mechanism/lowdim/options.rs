//! lowdim's typed options, with the checks that need no data; the flags that set them are
//! [`super::args::LowdimArgs`].

use serde::Deserialize;

use crate::error::Result;
use crate::mechanism::options::check_share;
use crate::mechanism::pmm::PmmOptions;
use crate::mechanism::psmm::PsmmOptions;

/// The mechanism `lowdim` runs on the projected coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum InnerMechanism {
    Pmm,
    Psmm,
}

/// The subspace dimension d' of `lowdim`: given, or chosen privately from the noisy spectrum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetDim {
    Fixed(usize),
    Auto,
}

impl std::str::FromStr for TargetDim {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        if text == "auto" {
            return Ok(TargetDim::Auto);
        }
        match text.parse::<usize>() {
            Ok(dims) if dims >= 1 => Ok(TargetDim::Fixed(dims)),
            _ => Err(format!("target dimension must be a positive integer or 'auto', got '{text}'")),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct LowdimOptions {
    pub target_dim: TargetDim,
    /// Under add-remove, the share of ε spent on n̂ (required there: lowdim has no default).
    pub noisy_n_share: Option<f64>,
    /// The mechanism in d' dimensions; its n̂ share is unused (lowdim releases n̂ itself).
    pub inner: InnerOptions,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InnerOptions {
    Pmm(PmmOptions),
    Psmm(PsmmOptions),
}

impl LowdimOptions {
    /// The checks that need no data.
    pub fn validate(&self) -> Result<()> {
        if let Some(share) = self.noisy_n_share {
            check_share("--root-share", share)?;
        }
        if let InnerOptions::Psmm(psmm) = &self.inner {
            psmm.check_cells()?;
        }
        Ok(())
    }
}
