//! The typed options of covloss and microagg, each with the public encoding of its columns, and covloss's
//! checks that need no data; the flags that set them are in [`super::args`].

use super::{CellsFrom, CovlossSettings};
use crate::encoding::EncodingSpec;
use crate::error::{Error, Result};
use crate::privacy::Neighbours;

#[derive(Clone, Debug, PartialEq)]
pub struct MicroaggOptions {
    pub encoding: EncodingSpec,
    /// Number of groups k.
    pub groups: u64,
    pub cells_from: CellsFrom,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CovlossOptions {
    pub encoding: EncodingSpec,
    pub settings: CovlossSettings,
}

impl CovlossOptions {
    /// The checks that need no data, under the run's relation.
    pub fn validate(&self, neighbours: Neighbours) -> Result<()> {
        if neighbours != Neighbours::Replace {
            return Err(Error::privacy(
                "--mechanism covloss needs --neighbours replace: its parameters (alpha, t, the damping b) and its \
                 sensitivities use the row count n, which is public only under replace (SPEC §1); the paper does \
                 not cover add-remove",
            ));
        }
        let shares = self.settings.shares;
        if shares.iter().any(|share| !(share.is_finite() && *share > 0.0)) {
            return Err(Error::bad_input(format!("--covloss-shares must be three finite numbers > 0, got {shares:?}")));
        }
        if let Some(alpha) = self.settings.alpha {
            if !(alpha > 0.0 && alpha <= 1.0) {
                return Err(Error::bad_input(format!("--covloss-alpha must be in (0, 1], got {alpha}")));
            }
        }
        Ok(())
    }
}
