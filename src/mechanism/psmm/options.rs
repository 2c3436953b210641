//! PSMM's typed options, with the checks that need no data; the flag that sets them is
//! [`super::args::PsmmArgs`].

use crate::error::{Error, Result};
use crate::mechanism::options::check_share;

#[derive(Clone, Debug, PartialEq)]
pub struct PsmmOptions {
    /// The number of equal cubes m (rounded to a whole number per axis); `None` takes the paper's m ≈ εn.
    pub cells: Option<u64>,
    /// Share of ε spent on n̂ when the grid is chosen under add-remove.
    pub noisy_n_share: f64,
}

impl PsmmOptions {
    /// The checks that need no data.
    pub fn validate(&self) -> Result<()> {
        check_share("--root-share", self.noisy_n_share)?;
        self.check_cells()
    }

    /// `--cells`, also as lowdim's inner PSMM (whose n̂ share is unused): at least one cube.
    pub fn check_cells(&self) -> Result<()> {
        match self.cells {
            Some(0) => Err(Error::bad_input("--cells must be at least 1")),
            _ => Ok(()),
        }
    }
}
