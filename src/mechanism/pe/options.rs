//! PE's typed options; the flags that set them are [`super::args::PeArgs`].

use super::{PeDomain, PeInit, PeVariant};
use crate::binner::device::DeviceChoice;

/// Private Evolution's options (docs/mechanisms/pe.md); `None` takes the paper's formula.
#[derive(Clone, Debug, PartialEq)]
pub struct PeOptions {
    pub delta: f64,
    pub variant: PeVariant,
    pub steps: Option<u32>,
    pub samples: Option<u64>,
    pub init: PeInit,
    /// H of the threshold variant (probability scale); `None` is 0.
    pub threshold: Option<f64>,
    pub domain: PeDomain,
    /// Where the nearest-neighbour counts run.
    pub device: DeviceChoice,
}

impl PeOptions {
    /// Every default, for a given δ.
    pub fn with_delta(delta: f64) -> Self {
        PeOptions {
            delta,
            variant: PeVariant::Threshold,
            steps: None,
            samples: None,
            init: PeInit::Uniform,
            threshold: None,
            domain: PeDomain::Box,
            device: DeviceChoice::Auto,
        }
    }
}
