//! PMM's typed options ([`PmmOptions`]), with their defaults and the checks that need no data; the flags
//! that set them are [`super::args::PmmArgs`], and `--mechanism auto`'s choice of them [`super::auto`].

use super::averaging::{BottomUp, PMM_BOTTOM_UP};
use super::consistency::{Consistency, ConsistencyRule, DEFAULT_CONSISTENCY, DEFAULT_PRUNE_SIGMAS};
use super::marginals::Partition;
use crate::binner::device::DeviceChoice;
use crate::error::{Error, Result};
use crate::mechanism::options::check_share;
use crate::privacy::DEFAULT_NOISY_N_SHARE;
use crate::sampler::Placement;

#[derive(Clone, Debug, PartialEq)]
pub struct PmmOptions {
    /// Leaf depth r; `None` chooses it (from the public n, or from a released n̂).
    pub depth: Option<u32>,
    pub bottom_up: BottomUp,
    pub consistency: ConsistencyRule,
    /// k: noisy counts below k·σ of their level are taken as empty before consistency (0: none).
    pub prune_sigmas: f64,
    /// Share of ε spent on n̂ when the depth is chosen under add-remove.
    pub noisy_n_share: f64,
    pub device: DeviceChoice,
    /// Share of ε spent on each column's fine 1-D marginal (0: no calibration).
    pub marginal_share: f64,
    /// Where the tree cuts the axes (the quantile partition needs the marginals).
    pub partition: Partition,
    /// Share of ε spent on the pair histograms (0: no pair maps), taken before every other share.
    pub pair_share: f64,
    /// Share of ε spent on the dense leaves' sub-cells (0: none), taken from the tree's.
    pub refine_share: f64,
    /// Per column, the code slots on a categorical or Boolean column's axis (null and "other" included), 0
    /// for a number (empty: every column a number): a coded column's 1-D marginal is a histogram with a
    /// cell per code ([`super::marginals::CodedMarginal`]). Set by the run from its columns' public
    /// domains, not a flag.
    pub marginal_codes: Vec<usize>,
    /// Per column, the share of a nullable number's axis its null band takes, 0 for none (empty: none has):
    /// its pair cells give null a cell of its own ([`super::pair_axis::PairAxis::NullBand`]). Set by the
    /// run from its columns' public domains, not a flag.
    pub null_bands: Vec<f64>,
    /// `--mechanism auto`: the rule that chose these settings, for the report.
    pub chosen_by: Option<&'static str>,
    /// `--mechanism auto` at d ≥ 3: the settings it runs instead on a table large enough for them.
    pub larger_table: Option<Box<LargerTable>>,
    /// `--mechanism auto` at d ≥ 4: the settings it runs instead of the larger table's on a larger one still.
    pub largest_table: Option<Box<LargerTable>>,
    /// `--mechanism auto` at d = 3–5: the settings it runs instead on a table too small for the marginals.
    pub smaller_table: Option<Box<SmallerTable>>,
}

/// What `--mechanism auto` runs at d ≥ 3 instead of its own settings once ε·n reaches `from_epsilon_n`
/// (n is n̂ under add-remove, released before the choice: docs/mechanisms/pmm.md, "auto on larger tables").
#[derive(Clone, Debug, PartialEq)]
pub struct LargerTable {
    pub from_epsilon_n: f64,
    pub options: PmmOptions,
}

/// What `--mechanism auto` at d = 3–5 runs instead of its own settings while ε·n is too small for
/// `below_marginal_depth` levels in each column's released marginal (n̂ under add-remove, released before
/// the choice, as for [`LargerTable`]): plain PMM.
#[derive(Clone, Debug, PartialEq)]
pub struct SmallerTable {
    pub below_marginal_depth: u32,
    pub options: PmmOptions,
}

impl PmmOptions {
    pub const DEFAULT: PmmOptions = PmmOptions {
        depth: None,
        bottom_up: PMM_BOTTOM_UP,
        consistency: DEFAULT_CONSISTENCY,
        prune_sigmas: DEFAULT_PRUNE_SIGMAS,
        noisy_n_share: DEFAULT_NOISY_N_SHARE,
        device: DeviceChoice::Auto,
        marginal_share: 0.0,
        partition: Partition::Midpoint,
        pair_share: 0.0,
        refine_share: 0.0,
        marginal_codes: Vec::new(),
        null_bands: Vec::new(),
        chosen_by: None,
        larger_table: None,
        largest_table: None,
        smaller_table: None,
    };

    /// These options, and the ones auto switches to, for a run whose columns have these code slots (0 for a
    /// number) and null bands: their 1-D marginals get a cell per code ([`Self::marginal_codes`]), their
    /// pairs a cell for null ([`Self::null_bands`]).
    pub fn for_columns(&self, (codes, null_bands): (&[usize], &[f64])) -> PmmOptions {
        let with = |options: &PmmOptions| PmmOptions {
            marginal_codes: codes.to_vec(),
            null_bands: null_bands.to_vec(),
            ..options.clone()
        };
        let mut options = with(self);
        for larger in [&mut options.larger_table, &mut options.largest_table].into_iter().flatten() {
            larger.options = with(&larger.options);
        }
        if let Some(smaller) = &mut options.smaller_table {
            smaller.options = with(&smaller.options);
        }
        options
    }

    /// The tree's consistency step: the bottom-up pass, the rule and the pruning these options ask for.
    pub fn consistency_step(&self) -> Consistency {
        Consistency { bottom_up: self.bottom_up, rule: self.consistency, prune_sigmas: self.prune_sigmas }
    }

    /// The checks that need no data; `placement`: where the run puts points in their cells.
    pub fn validate(&self, placement: Placement) -> Result<()> {
        check_share("--root-share", self.noisy_n_share)?;
        if self.partition == Partition::Quantile && self.marginal_share == 0.0 {
            return Err(Error::bad_input(
                "--partition quantile cuts the axes at the released marginals' quantiles: it needs --marginal-share above 0 (0.3 when not given)",
            ));
        }
        if self.refine_share != 0.0 {
            check_share("--refine-share", self.refine_share)?;
        }
        for (share, flag) in [(self.marginal_share, "--marginal-share"), (self.pair_share, "--pair-share")] {
            if share == 0.0 {
                continue;
            }
            check_share(flag, share)?;
            if placement == Placement::Centre {
                return Err(Error::bad_input(format!(
                    "{flag} maps points spread uniformly in their cells onto released marginals; \
                     --placement centre puts them on cell centres, which the map cannot spread (use the \
                     default placement)"
                )));
            }
        }
        Ok(())
    }
}
