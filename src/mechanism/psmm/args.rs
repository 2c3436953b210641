//! PSMM's flag (`--mechanism psmm`, and lowdim's inner PSMM), a config key of the same name: refused where
//! PSMM does not run, resolved into [`PsmmOptions`] where it does.

use clap::Args;

use super::options::PsmmOptions;
use crate::binner::device::DeviceChoice;
use crate::error::Result;
use crate::mechanism::args::{refuse_first, CommonFlags, Mechanism};
use crate::privacy::DEFAULT_NOISY_N_SHARE;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "PSMM (--mechanism psmm; lowdim's inner psmm)")]
pub struct PsmmArgs {
    /// psmm: number of equal cubes m [default: about εn as in the paper, at most 10^6].
    #[arg(long)]
    pub cells: Option<u64>,
}

impl PsmmArgs {
    /// Refuses `--cells` where PSMM does not run, and where it does what it has no use for: PMM's `--depth`
    /// (`pmm_depth_given`; the grid is PSMM's partition) and `--device gpu` (it bins on the CPU).
    pub fn check(&self, common: &CommonFlags, pmm_depth_given: bool) -> Result<()> {
        let (runs_psmm, uses_psmm) = (common.chosen.runs == Mechanism::Psmm, common.chosen.uses_psmm());
        let gpu = common.device == Some(DeviceChoice::Gpu);
        refuse_first(&[
            (
                self.cells.is_some() && !uses_psmm,
                "--cells applies to --mechanism psmm (or lowdim with --inner-mechanism psmm) only",
            ),
            (
                pmm_depth_given && runs_psmm,
                "--depth applies to --mechanism pmm; psmm's partition is set by --cells (default about εn cells)",
            ),
            (
                gpu && runs_psmm,
                "--device gpu applies to --mechanism pmm, lowdim and pe; psmm bins its regular grid on the CPU only (its cost is \
                 the projection): give --device cpu or auto",
            ),
            (
                gpu && uses_psmm,
                "--device gpu applies to the inner PMM; the inner psmm bins its regular grid on the CPU only: give \
                 --device cpu or auto",
            ),
        ])
    }

    /// PSMM's options for this run, every default applied.
    pub fn options(self, common: &CommonFlags) -> PsmmOptions {
        PsmmOptions { cells: self.cells, noisy_n_share: common.root_share.unwrap_or(DEFAULT_NOISY_N_SHARE) }
    }
}
