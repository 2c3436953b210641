//! `--mechanism auto`, the default: PMM with the settings measured best at the table's width, and the
//! tables' sizes (ε·n̂) at which it switches to others. The whole rule is here: the choice from the public
//! column count and the flags given ([`AutoChoice`]), its constants with the figures that chose them, and
//! which settings run at a released ε·n̂ ([`AutoPick`]; the plan releases n̂ first and asks).
//!
//! The figures: docs/accuracy.md, "`--mechanism auto`, the default" and "2-way marginals"; docs/mechanisms/pmm.md,
//! "`--mechanism auto`" and its sections (auto on larger, largest and smaller tables, auto's marginal share at
//! d ≥ 4, auto at d = 3), "Dense leaves cut finer" and "Averaging the levels bottom-up".

use super::args::PmmArgs;
use super::averaging::BottomUp;
use super::marginals::{Partition, DEFAULT_QUANTILE_MARGINAL_SHARE};
use super::options::{LargerTable, PmmOptions, SmallerTable};
use super::report::AutoThresholds;
use crate::mechanism::args::CommonFlags;
use crate::privacy::Neighbours;
use crate::sampler::Placement;

/// `--mechanism auto`'s pass. Measured against none (docs/mechanisms/pmm.md, "Averaging the
/// levels bottom-up"): the pairwise 2-D W1, the 2-way TV and the correlation error all fell.
pub const AUTO_BOTTOM_UP: BottomUp = BottomUp::Average;

/// `--mechanism auto` at d = 3, 4 and 5 runs plain PMM ([`SmallerTable`]) while each column's released
/// marginal would have fewer levels than these, with the report's words. The marginals get 0.45·ε/d each,
/// and on smaller tables they place the rows worse than the joint tree's own marginals (generated mixture,
/// skewed and heavy-tailed tables, n = 10^4 and 10^3; docs/accuracy.md, "`--mechanism auto`, the default"; the figures
/// at d = 4, 5 were taken with the share 0.3):
/// - d = 3: at depth 2 the quantile partition cost the joint W1 up to 2.2× (1.25× on average at ε·n = 600);
///   at depth 3 it was 0.93× plain PMM's on average but up to 1.54× (skewed, ε·n = 800), from depth 4 on
///   0.71–0.93× (1.06× at worst). (Midpoint cells at d = 3, which auto ran before, also paid from
///   depth 4 on.)
/// - d = 4, 5: at depth 1 a marginal is one noisy median, and the axis is cut there. That cost up to 2.1×;
///   from depth 2 on it was 0.64–0.90× on average.
/// - From d = 6 on the joint tree is as coarse as a median: at depth 1 the calibration was level with
///   plain PMM at d = 6 (1.02×) and 4% ahead at d = 8, so auto keeps its settings.
///
/// The depth follows each column's share of ε and n (n̂ under add-remove): under add-remove depth 4 at
/// d = 3 comes at ε·n ≈ 2100, and depth 2 at ε·n ≈ 75·d; under replace it takes twice as much.
pub const AUTO_PLAIN_BELOW_MARGINAL_DEPTH: [(usize, u32, &str); 3] = [
    (
        3,
        4,
        "--mechanism auto, d = 3, epsilon * n-hat (n under replace) too small for 16 cells (depth 4) in each \
         column's released marginal: plain PMM (on generated tables the quantile partition on coarser marginals \
         cost the joint W1 up to 2.2x there)",
    ),
    (
        4,
        2,
        "--mechanism auto, d = 4, epsilon * n-hat (n under replace) too small for 4 cells (depth 2) in each \
         column's released marginal: plain PMM (on generated tables the quantile partition on one noisy median \
         per column cost the joint W1 up to 2x there)",
    ),
    (
        5,
        2,
        "--mechanism auto, d = 5, epsilon * n-hat (n under replace) too small for 4 cells (depth 2) in each \
         column's released marginal: plain PMM (on generated tables the quantile partition on one noisy median \
         per column cost the joint W1 up to 1.8x there)",
    ),
];

/// [`AUTO_PLAIN_BELOW_MARGINAL_DEPTH`]'s depth and words at `dims` columns, if it has them.
pub fn plain_below(dims: usize) -> Option<(u32, &'static str)> {
    AUTO_PLAIN_BELOW_MARGINAL_DEPTH.iter().find(|(at, ..)| *at == dims).map(|&(_, below, reason)| (below, reason))
}

/// From this ε·n on, `--mechanism auto` runs its larger table's settings ([`LargerSettings`]):
/// - d ≥ 4: the pair maps are added (`AUTO_PAIR_SHARE`, with the marginal share `AUTO_QUANTILE_MARGINAL_SHARE`).
///   Below it the pair histograms are mostly noise and their share is missed by the rest of the run
///   (generated mixtures at ε·n = 10^4 and 2·10^4: joint W1 +4-7%); from it on they pay on flights and cost
///   a few per cent at most elsewhere (docs/accuracy.md, "`--mechanism auto`, the default").
/// - d = 3: midpoint cells with the share 0.3 instead of the quantile partition. Flights
///   (ε·n̂ from 3.3·10^4 on) did 1–10% better with them; generated tables at n = 10^5 would have gained 5–7%
///   from the quantile partition there (docs/mechanisms/pmm.md, "auto at d = 3").
pub const AUTO_LARGER_TABLE_FROM_EPSILON_N: f64 = 3e4;

/// From this ε·n on, `--mechanism auto` at d ≥ 4 runs its largest table's settings: smaller shares for the
/// pairs and the marginals (`--pair-share 0.1 --marginal-share 0.2`). There the joint tree's own marginals are
/// fine enough that the larger shares cost it more than they give: on generated tables at n = 10^7 (d = 4,
/// three seeds) at ε·n = 10^8 the uniform table's pairwise 2-D W1, 2-way TV and correlation error went from
/// 1.28x, 1.59x and 1.87x plain PMM's to 1.04x, 1.06x, 1.20x and the mixture's pairwise W1 from 0.42x to
/// 0.35x; at ε·n = 10^7 the larger shares did better (1.12x in the geometric mean over laws and scores), at
/// 3·10^7 about as well (docs/mechanisms/pmm.md, "auto on the largest tables").
pub const AUTO_LARGEST_TABLE_FROM_EPSILON_N: f64 = 5e7;

/// `--mechanism auto`'s pair share on larger tables: the measured `--pair-share` (docs/accuracy.md, "2-way marginals").
pub const AUTO_PAIR_SHARE: f64 = 0.2;

/// What `--mechanism auto` runs: PMM, with the calibration and partition that did best at this number of
/// columns on the bundled flights table (docs/accuracy.md, "`--mechanism auto`, the default", measured by
/// scripts/accuracy_ablation.py), chosen from the public column count and from whether `--pair-share` is
/// given; at d ≥ 3 it also switches on larger tables and at d = 3–5 on smaller ones, which the plan decides
/// from ε·n̂ ([`LargerTable`], [`SmallerTable`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoChoice {
    pub marginal_share: f64,
    pub partition: Partition,
    pub reason: &'static str,
    /// The settings it switches to from [`AUTO_LARGER_TABLE_FROM_EPSILON_N`] on ([`LargerTable`]).
    pub larger_table: Option<LargerSettings>,
    /// The settings it switches to from [`AUTO_LARGEST_TABLE_FROM_EPSILON_N`] on.
    pub largest_table: Option<LargerSettings>,
    /// Below which depth of the released marginals it switches to [`SmallerTable`]'s settings, with the
    /// report's words.
    pub smaller_table: Option<(u32, &'static str)>,
}

/// `--mechanism auto`'s marginal share at d ≥ 4 (the quantile partition), with the pair maps or without.
/// - With `--pair-share`: the pair maps put each mapped child back onto its released marginal, so finer
///   marginals pay twice. On flights (d = 4, 5, five seeds, `--prune-sigmas 2`) 0.45 against 0.3 cut the
///   joint W1 by 4–6% at ε = 0.1 (0.94–1.01× at ε = 1, 10), the largest 1-D W1 by 20–67% and the 2-way TV
///   by 10% at ε = 0.1 (docs/accuracy.md, "2-way marginals").
/// - Without (0.3 before; CHANGELOG.md): on generated tables (n = 10^4, mixture, skewed, heavy-tailed,
///   two or three seeds) 0.45 against 0.3 gave 0.95×, 0.96× and 0.87× the joint W1 at d = 4, 5, 6 over
///   ε·n = 2000–2·10^4 (the mixture 2% worse, the heavy-tailed law 20% better). Just above the switch to
///   plain PMM, where each marginal is a few noisy quartiles, it took the skewed law from 1.24× plain PMM's
///   joint W1 to 0.95× (d = 4, ε·n = 500), and its marginals reach depth 2 at a third less ε·n, so the
///   switch moved down (docs/mechanisms/pmm.md, "auto's marginal share at d ≥ 4").
pub const AUTO_QUANTILE_MARGINAL_SHARE: f64 = 0.45;

/// What `--mechanism auto` runs on a larger table (from [`AUTO_LARGER_TABLE_FROM_EPSILON_N`] on), with the
/// report's words.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LargerSettings {
    pub marginal_share: f64,
    pub partition: Partition,
    pub pair_share: f64,
    /// `--refine-share` (unless given).
    pub refine_share: f64,
    pub reason: &'static str,
}

/// `--mechanism auto`'s `--refine-share` on larger tables at d = 3: the dense leaves cut
/// finer. On flights at d = 3 (two column sets, ε = 0.1, 1, 10, three seeds) it gave 0.17–0.71× the rank
/// correlation error and 0.59–0.94× the pairwise 2-D W1 at 0.99× the joint W1, every score below plain PMM's;
/// a heavy-tailed table 0.06–0.23× the rank error. Independent or uniform columns pay about 5% of the pairwise
/// W1 and the 2-way TV. 0.1 and 0.2 cut the rank error further but cost the TV 10% and 22–26% (with the unplaced
/// rows spread evenly); taken from the marginals instead of the tree, it did worse on flights (docs/mechanisms/pmm.md,
/// "Dense leaves cut finer").
pub const AUTO_REFINE_SHARE: f64 = 0.05;

/// d ≥ 4: the pair maps, with the marginal share they go with.
const LARGER_TABLE_WITH_PAIRS: LargerSettings = LargerSettings {
    marginal_share: AUTO_QUANTILE_MARGINAL_SHARE,
    partition: Partition::Quantile,
    pair_share: AUTO_PAIR_SHARE,
    refine_share: 0.0,
    reason: "--mechanism auto, d >= 4, epsilon * n-hat (n under replace) at least 3e4: PMM with --partition \
             quantile --marginal-share 0.45 --pair-share 0.2 (on flights at d = 4-6, epsilon = 0.1 and 1, the 2-way \
             marginals cut the joint W1 by 7-20% and the 2-way TV by 27-59%; below 3e4 their share cost generated \
             tables up to 7%)",
};

/// d ≥ 4 from [`AUTO_LARGEST_TABLE_FROM_EPSILON_N`] on: the pair maps and the marginals at smaller shares.
const LARGEST_TABLE_WITH_PAIRS: LargerSettings = LargerSettings {
    marginal_share: 0.2,
    partition: Partition::Quantile,
    pair_share: 0.1,
    refine_share: 0.0,
    reason: "--mechanism auto, d >= 4, epsilon * n-hat (n under replace) at least 5e7: PMM with --partition \
             quantile --marginal-share 0.2 --pair-share 0.1 (on generated tables at n = 1e7 and epsilon * n = 1e8 \
             the shares 0.45 and 0.2 cost the uniform table's pairwise 2-D W1 1.28x plain PMM's, these 1.04x)",
};

/// d = 3: midpoint cells with the marginal share 0.3, what flights did best with, and the dense leaves cut finer.
const LARGER_TABLE_AT_THREE_COLUMNS: LargerSettings = LargerSettings {
    marginal_share: DEFAULT_QUANTILE_MARGINAL_SHARE,
    partition: Partition::Midpoint,
    pair_share: 0.0,
    refine_share: AUTO_REFINE_SHARE,
    reason: "--mechanism auto, d = 3, epsilon * n-hat (n under replace) at least 3e4: PMM with --marginal-share \
             0.3 --refine-share 0.05 (on flights at d = 3 the marginals cut the joint W1 by 12-25% and the largest \
             1-D W1 2-7x, the quantile partition was 1-10% worse; the refined leaves then cut the pairwise 2-D W1 \
             by 6-41% and the rank correlation error by 29-83%)",
};

impl AutoChoice {
    /// `--placement centre`: the maps need points spread inside their cells, so no calibration.
    const CENTRED: AutoChoice = AutoChoice {
        marginal_share: 0.0,
        partition: Partition::Midpoint,
        reason: "--mechanism auto with --placement centre: plain PMM (the marginal maps need points spread \
                 uniformly in their cells)",
        larger_table: None,
        largest_table: None,
        smaller_table: None,
    };

    /// `--depth` under add-remove: no n̂ is released, and the marginal trees' depths follow n̂.
    const FIXED_DEPTH: AutoChoice = AutoChoice {
        marginal_share: 0.0,
        partition: Partition::Midpoint,
        reason: "--mechanism auto with --depth under add-remove: plain PMM at that depth (the released marginals' \
                 depths follow the released n-hat, which --depth does without)",
        larger_table: None,
        largest_table: None,
        smaller_table: None,
    };

    /// What auto runs for these flags: PMM with the calibration given where `--marginal-share` or `--partition`
    /// is; plain PMM where the maps or the marginals cannot work ([`Self::CENTRED`], [`Self::FIXED_DEPTH`]);
    /// else the settings for the number of columns ([`Self::for_columns`]).
    pub fn for_flags(pmm: &PmmArgs, common: &CommonFlags) -> Self {
        if pmm.calibration_given() {
            let (marginal_share, partition) = pmm.calibration();
            Self::given(marginal_share, partition)
        } else if common.placement == Placement::Centre {
            Self::CENTRED
        } else if pmm.depth.is_some() && common.neighbours == Neighbours::AddRemove {
            Self::FIXED_DEPTH
        } else {
            Self::for_columns(common.dims, pmm.pair_share.is_some_and(|share| share > 0.0))
        }
    }

    /// `--marginal-share` or `--partition` given: PMM with those, as `--mechanism pmm --bottom-up average` would
    /// run.
    fn given(marginal_share: f64, partition: Partition) -> Self {
        AutoChoice {
            marginal_share,
            partition,
            reason: "--mechanism auto with --marginal-share or --partition given: PMM with the calibration given, \
                     as --mechanism pmm --bottom-up average",
            larger_table: None,
            largest_table: None,
            smaller_table: None,
        }
    }

    /// The settings for `dims` columns; `pairs`: the run releases 2-way marginals (`--pair-share`).
    pub fn for_columns(dims: usize, pairs: bool) -> Self {
        match dims {
            0..=2 => AutoChoice {
                marginal_share: 0.0,
                partition: Partition::Midpoint,
                reason: "--mechanism auto, d <= 2: plain PMM (on flights at d = 2 a marginal share or the \
                         quantile partition only cost budget)",
                larger_table: None,
                largest_table: None,
                smaller_table: None,
            },
            3 if pairs => AutoChoice {
                marginal_share: DEFAULT_QUANTILE_MARGINAL_SHARE,
                partition: Partition::Midpoint,
                reason: "--mechanism auto, d = 3 with --pair-share: PMM with --marginal-share 0.3 (on flights at d = \
                         3 it cut the joint W1 by 12-25% and the largest 1-D W1 2-7x; the quantile partition did no \
                         better)",
                larger_table: None,
                largest_table: None,
                smaller_table: None,
            },
            3 => AutoChoice {
                marginal_share: AUTO_QUANTILE_MARGINAL_SHARE,
                partition: Partition::Quantile,
                reason: "--mechanism auto, d = 3, epsilon * n-hat (n under replace) below 3e4: PMM with --partition \
                         quantile --marginal-share 0.45 (on generated tables it gave 0.86x the joint W1 of \
                         --marginal-share 0.3 on midpoint cells, 0.78x plain PMM's)",
                larger_table: Some(LARGER_TABLE_AT_THREE_COLUMNS),
                largest_table: None,
                smaller_table: plain_below(dims),
            },
            _ if pairs => AutoChoice {
                marginal_share: AUTO_QUANTILE_MARGINAL_SHARE,
                partition: Partition::Quantile,
                reason: "--mechanism auto, d >= 4 with --pair-share: PMM with --partition quantile \
                         --marginal-share 0.45 (the pair maps end on the released marginals: on flights at d = 4, \
                         5 the larger share cut the joint W1 by 4-6% and the 1-D W1 by a third at epsilon = 0.1)",
                larger_table: None,
                largest_table: None,
                smaller_table: None,
            },
            _ => AutoChoice {
                marginal_share: AUTO_QUANTILE_MARGINAL_SHARE,
                partition: Partition::Quantile,
                reason: "--mechanism auto, d >= 4, epsilon * n-hat (n under replace) below 3e4: PMM with \
                         --partition quantile --marginal-share 0.45 (on flights at d = 4, 5 the quantile partition \
                         cut the joint W1 by 23-38% against plain PMM; on generated tables the share 0.45 gave \
                         0.87-0.96x the joint W1 of 0.3)",
                larger_table: Some(LARGER_TABLE_WITH_PAIRS),
                largest_table: Some(LARGEST_TABLE_WITH_PAIRS),
                smaller_table: plain_below(dims),
            },
        }
    }

    /// `own`, PMM's options with this choice, with the settings auto switches to on larger and smaller
    /// tables; `refine_share`: `--refine-share` as given, which every table keeps.
    pub fn with_switches(self, own: PmmOptions, refine_share: Option<f64>) -> PmmOptions {
        let switch_from = |from_epsilon_n, larger: LargerSettings| {
            Box::new(LargerTable {
                from_epsilon_n,
                options: PmmOptions {
                    marginal_share: larger.marginal_share,
                    partition: larger.partition,
                    pair_share: larger.pair_share,
                    refine_share: refine_share.unwrap_or(larger.refine_share),
                    chosen_by: Some(larger.reason),
                    ..own.clone()
                },
            })
        };
        let larger_table = self.larger_table.map(|larger| switch_from(AUTO_LARGER_TABLE_FROM_EPSILON_N, larger));
        let largest_table = self.largest_table.map(|largest| switch_from(AUTO_LARGEST_TABLE_FROM_EPSILON_N, largest));
        let smaller_table = self.smaller_table.map(|(below_marginal_depth, reason)| {
            Box::new(SmallerTable {
                below_marginal_depth,
                options: PmmOptions {
                    marginal_share: 0.0,
                    partition: Partition::Midpoint,
                    chosen_by: Some(reason),
                    ..own.clone()
                },
            })
        });
        PmmOptions { larger_table, largest_table, smaller_table, ..own }
    }
}

/// Which of `--mechanism auto`'s settings run at an ε·n.
#[derive(Clone, Copy, Debug)]
pub enum AutoPick {
    Smaller,
    Own,
    Larger,
    Largest,
}

impl AutoThresholds {
    /// The settings that run at `epsilon_n` (n is n̂ under add-remove, the public n under replace).
    pub fn pick(&self, epsilon_n: f64) -> AutoPick {
        let reaches = |from: Option<f64>| from.is_some_and(|from| epsilon_n >= from);
        match self.plain_below_epsilon_n {
            Some(below) if epsilon_n < below => AutoPick::Smaller,
            _ if reaches(self.largest_table_from_epsilon_n) => AutoPick::Largest,
            _ if reaches(self.larger_table_from_epsilon_n) => AutoPick::Larger,
            _ => AutoPick::Own,
        }
    }
}
