//! PMM's flags (`--mechanism pmm` and `auto`, and lowdim's inner PMM), each a config key of the same name:
//! refused where PMM's tree does not run, resolved into [`PmmOptions`] with auto's choice where auto runs.

use clap::Args;

use super::auto::{AutoChoice, AUTO_BOTTOM_UP};
use super::averaging::{BottomUp, PMM_BOTTOM_UP};
use super::consistency::{ConsistencyRule, DEFAULT_CONSISTENCY, DEFAULT_PRUNE_SIGMAS};
use super::marginals::{Partition, DEFAULT_QUANTILE_MARGINAL_SHARE};
use super::options::PmmOptions;
use crate::binner::device::DeviceChoice;
use crate::error::{Error, Result};
use crate::mechanism::args::{refuse_first, CommonFlags, Mechanism};
use crate::privacy::DEFAULT_NOISY_N_SHARE;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "PMM (--mechanism pmm and auto; lowdim's inner pmm)")]
pub struct PmmArgs {
    /// pmm: leaf depth r [default: from the public n or the released n̂: ⌈log2(εn)⌉ − 1 for d ≥ 2, the
    /// depth minimising the Theorem 3.9 bound for d = 1; either capped by memory and at ⌈log2 n⌉ + 4].
    #[arg(long)]
    pub depth: Option<u32>,
    /// pmm: share of ε spent on a fine 1-D marginal of each column (ε × share / d each), onto which each
    /// synthetic column is then mapped monotonically (post-processing; the joint keeps its ranks)
    /// [default: 0, off; the default `--mechanism auto` chooses it from the number of columns unless this
    /// or --partition is given].
    #[arg(long, allow_negative_numbers = true)]
    pub marginal_share: Option<f64>,
    /// pmm and auto: share S of ε spent on the 2-way marginals of d − 1 column pairs (32 × 32 cells,
    /// 0.9 × ε × S / (d − 1) each, the pairs chosen by noisy scores from the other tenth; the rest of the
    /// run gets (1 − S)·ε), onto which the pairs the joint release gets wrong are then mapped
    /// (post-processing; docs/accuracy.md, "2-way marginals") [default: 0, off; the default
    /// `--mechanism auto` takes 0.2 at d ≥ 4 once ε·n̂ reaches 3·10^4, unless this is given].
    #[arg(long, allow_negative_numbers = true)]
    pub pair_share: Option<f64>,
    /// pmm and auto: share of ε (after any pair share) spent on cutting the joint tree's dense leaves finer,
    /// taken from the tree's: a leaf whose released count could fill 2^k sub-cells (k ≤ 6) with 4 noise
    /// scales each gets its sub-cells' counts released, and its rows are drawn in them (docs/mechanisms/pmm.md,
    /// "Dense leaves cut finer") [default: 0, off; the default `--mechanism auto` takes 0.05 at d = 3 once
    /// ε·n̂ reaches 3·10^4, unless this is given].
    #[arg(long, allow_negative_numbers = true)]
    pub refine_share: Option<f64>,
    /// pmm: where the tree cuts each axis: `midpoint` halves the public bounds, `quantile` cuts at the
    /// quantiles of the released 1-D marginals mixed half and half with equal widths (--marginal-share,
    /// 0.3 unless given) [default: midpoint; `--mechanism auto` chooses it unless this or --marginal-share
    /// is given].
    #[arg(long, value_enum)]
    pub partition: Option<Partition>,
    /// pmm: consistency rule [default: uniform].
    #[arg(long, value_enum)]
    pub consistency: Option<ConsistencyRule>,
    /// pmm: noisy counts below K times their level's noise scale are taken as empty before consistency,
    /// and get nothing beside a kept sibling (post-processing; helps clustered tables, hurts smooth ones:
    /// docs/accuracy.md, "Pruning") [default: 0, none].
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    pub prune_sigmas: Option<f64>,
    /// pmm: before the top-down splits, average each cell's noisy count with its children's by inverse
    /// variance, from the leaves up (post-processing: docs/mechanisms/pmm.md, "Averaging the levels
    /// bottom-up") [default: average under --mechanism auto, none under pmm].
    #[arg(long, value_enum)]
    pub bottom_up: Option<BottomUp>,
}

impl PmmArgs {
    /// Refuses PMM's flags where PMM's tree does not run, and its calibration where PMM does not run
    /// as itself (lowdim's inner PMM keeps the textbook tree).
    pub fn check(&self, common: &CommonFlags) -> Result<()> {
        let (runs_pmm, uses_pmm) = (common.chosen.runs == Mechanism::Pmm, common.chosen.uses_pmm());
        refuse_first(&[
            (
                (self.marginal_share.is_some() || self.partition.is_some()) && !runs_pmm,
                "--marginal-share and --partition apply to --mechanism pmm only",
            ),
            (self.pair_share.is_some() && !runs_pmm, "--pair-share applies to --mechanism pmm or auto only"),
            (self.refine_share.is_some() && !runs_pmm, "--refine-share applies to --mechanism pmm or auto only"),
            (
                self.depth.is_some() && !uses_pmm,
                "--depth applies to the inner PMM; the inner psmm's grid is set by --cells (default about ε_s n cells)",
            ),
            (
                (self.consistency.is_some() || self.prune_sigmas.is_some()) && !uses_pmm,
                "--consistency and --prune-sigmas apply to PMM's tree (--mechanism pmm, or lowdim with the inner pmm) only",
            ),
            (
                self.bottom_up.is_some() && !runs_pmm,
                "--bottom-up applies to --mechanism pmm and auto (lowdim's inner pmm keeps the textbook pass)",
            ),
        ])
    }

    /// Whether `--marginal-share` or `--partition` is given: auto then runs the calibration given.
    pub(super) fn calibration_given(&self) -> bool {
        self.marginal_share.is_some() || self.partition.is_some()
    }

    /// The calibration as given (or defaulted), what `--mechanism pmm` runs: the marginal share (0.3 with
    /// `--partition quantile`, else 0) and the partition (midpoint).
    pub(super) fn calibration(&self) -> (f64, Partition) {
        let marginal_share = self.marginal_share.unwrap_or(match self.partition {
            Some(Partition::Quantile) => DEFAULT_QUANTILE_MARGINAL_SHARE,
            _ => 0.0,
        });
        (marginal_share, self.partition.unwrap_or(Partition::Midpoint))
    }

    /// PMM's options for this run, every default applied: under `--mechanism auto`, with the settings auto
    /// chooses for the flags and the table ([`AutoChoice`]).
    pub fn options(self, common: &CommonFlags) -> Result<PmmOptions> {
        if let Some(sigmas) = self.prune_sigmas.filter(|sigmas| !(sigmas.is_finite() && *sigmas >= 0.0)) {
            return Err(Error::bad_input(format!(
                "--prune-sigmas must be a finite number of at least 0, got {sigmas}"
            )));
        }
        let auto = (common.chosen.requested == Mechanism::Auto).then(|| AutoChoice::for_flags(&self, common));
        let (marginal_share, partition) =
            auto.map_or_else(|| self.calibration(), |auto| (auto.marginal_share, auto.partition));
        let pmm = PmmOptions {
            depth: self.depth,
            bottom_up: self.bottom_up.unwrap_or(if auto.is_some() { AUTO_BOTTOM_UP } else { PMM_BOTTOM_UP }),
            consistency: self.consistency.unwrap_or(DEFAULT_CONSISTENCY),
            prune_sigmas: self.prune_sigmas.unwrap_or(DEFAULT_PRUNE_SIGMAS),
            noisy_n_share: common.root_share.unwrap_or(DEFAULT_NOISY_N_SHARE),
            device: common.device.unwrap_or(DeviceChoice::Auto),
            marginal_share,
            partition,
            pair_share: self.pair_share.unwrap_or(0.0),
            refine_share: self.refine_share.unwrap_or(0.0),
            marginal_codes: Vec::new(),
            null_bands: Vec::new(),
            chosen_by: auto.map(|auto| auto.reason),
            larger_table: None,
            largest_table: None,
            smaller_table: None,
        };
        // An explicit `--pair-share` (0 too) keeps auto's settings on every table.
        Ok(match auto.filter(|_| self.pair_share.is_none()) {
            Some(auto) => auto.with_switches(pmm, self.refine_share),
            None => pmm,
        })
    }
}
