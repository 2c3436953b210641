//! The settings of a `synth` run.
//!
//! [`SynthArgs`] declares every option once: each field is a command-line flag, and a config-file key of
//! the same name (`--root-share` is `root-share`; see [`crate::config`]), with its doc and its default
//! beside it. [`SynthArgs::resolve`] turns them into the typed [`SynthOptions`] that the library runs,
//! where each mechanism has its own options ([`MechanismOptions`]): an option that does not apply to the
//! chosen mechanism is refused there, by name.

use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;

// The types an option names, re-exported: a library user builds `SynthOptions` from this module alone.
pub use crate::binner::device::DeviceChoice;
pub use crate::binner::NullPolicy;
pub use crate::encoding::{BinCount, CategoryList, EncodingSpec, Unlisted};
pub use crate::geometry::bounds::ColumnBounds;
pub use crate::mechanism::covloss::{CellsFrom, CovlossSettings, Damping};
pub use crate::mechanism::pe::{PeDomain, PeInit, PeVariant};
pub use crate::mechanism::pmm::consistency::ConsistencyRule;
pub use crate::mechanism::pmm::marginals::Partition;
pub use crate::privacy::Neighbours;
pub use crate::sampler::Placement;

use crate::error::{Error, Result};
use crate::io::paths::OutputPaths;
pub use crate::mechanism::pmm::averaging::BottomUp;
use crate::mechanism::pmm::averaging::{AUTO_BOTTOM_UP, PMM_BOTTOM_UP};
use crate::mechanism::pmm::consistency::{Consistency, DEFAULT_CONSISTENCY, DEFAULT_PRUNE_SIGMAS};
use crate::mechanism::pmm::marginals::DEFAULT_QUANTILE_MARGINAL_SHARE;
use crate::privacy::{check_epsilon, DEFAULT_NOISY_N_SHARE};

/// The name the command line uses for an option's value (for messages and reports).
pub fn value_name<T: clap::ValueEnum>(value: &T) -> String {
    value.to_possible_value().map_or_else(String::new, |possible| possible.get_name().to_string())
}

/// The mechanisms `--mechanism` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Private Measure Mechanism: noisy counts on a dyadic tree, as the dissertation gives it (with the
    /// calibration flags you give).
    Pmm,
    /// Private Signed Measure Mechanism: noisy counts on m equal cubes, projected to a probability measure.
    Psmm,
    /// Private PCA down to d' dimensions, then PMM (or PSMM) there.
    Lowdim,
    /// Private Evolution: noisy nearest-neighbour votes that move public points towards the data
    /// ((ε, δ)-DP, --neighbours replace only).
    Pe,
    /// Spectral microaggregation of Boolean/one-hot encoded columns: (n/k)-anonymous, NOT differentially private.
    Microagg,
    /// Damped covariance-loss microaggregation of Boolean/one-hot encoded columns: ε-DP under replace.
    Covloss,
    /// The default: PMM with the settings measured best at the table's width: plain at d ≤ 2,
    /// --partition quantile with --marginal-share 0.45 at d ≥ 3, which from ε·n̂ = 3e4 on becomes
    /// --marginal-share 0.3 on midpoint cells at d = 3 and adds --pair-share 0.2 at d ≥ 4; plain at d = 3–5
    /// on tables too small for the marginals (the report's `parameters.auto` says which and why). Where
    /// --marginal-share or --partition is given, PMM with those.
    Auto,
}

/// What a run without `--mechanism` (or `mechanism` in its config) runs.
pub const DEFAULT_MECHANISM: Mechanism = Mechanism::Auto;

impl Mechanism {
    /// Whether the mechanism reads Boolean encodings of the columns (bits, categories, bins).
    pub fn is_encoded(self) -> bool {
        matches!(self, Mechanism::Microagg | Mechanism::Covloss)
    }
}

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

/// `dpsynth synth`: every option, declared once (flag and config key).
#[derive(Args, Debug, Clone, Default)]
pub struct SynthArgs {
    /// The sensitive input: a Parquet file, a directory of them (recursively, in path order) or a glob.
    pub input: PathBuf,
    /// A directory input's Hive-style key=value folders become columns after the files' own.
    #[arg(long = "hive-columns")]
    pub hive_columns: bool,
    /// Where the synthetic table goes (written atomically).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Privacy budget ε (> 0).
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// Columns to use (default: every column given public bounds).
    #[arg(long, value_delimiter = ',')]
    pub columns: Option<Vec<String>>,
    /// Public bounds COLUMN=LO:HI, repeatable. Never derived from the data.
    #[arg(long = "bounds", value_name = "COLUMN=LO:HI")]
    pub bounds: Vec<ColumnBounds>,
    /// A TOML file with any of these options, each under its flag's name (the command line wins).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Mechanism [default: auto, which is PMM with settings chosen from the number of columns and, at
    /// three or more, from ε·n̂ (ε·n under replace)].
    #[arg(long, value_enum)]
    pub mechanism: Option<Mechanism>,
    /// psmm: number of equal cubes m [default: about εn as in the paper, at most 10^6].
    #[arg(long)]
    pub cells: Option<u64>,
    /// lowdim: subspace dimension d', or `auto` to choose it privately from the noisy spectrum [default: auto].
    #[arg(long, value_name = "D|auto")]
    pub target_dim: Option<TargetDim>,
    /// lowdim: mechanism run on the projected coordinates [default: pmm].
    #[arg(long, value_enum)]
    pub inner_mechanism: Option<InnerMechanism>,
    /// The former name of --root-share for lowdim: still accepted, with a warning.
    #[arg(long, allow_negative_numbers = true, hide = true)]
    pub noisy_n_share: Option<f64>,
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
    /// Neighbouring relation of the guarantee [default: add-remove].
    #[arg(long, value_enum)]
    pub neighbours: Option<Neighbours>,
    /// pmm: leaf depth r [default: from the public n or the released n̂: ⌈log2(εn)⌉ − 1 for d ≥ 2, the
    /// depth minimising the Theorem 3.9 bound for d = 1; either capped by memory and at ⌈log2 n⌉ + 4].
    #[arg(long)]
    pub depth: Option<u32>,
    /// Under add-remove, the share of ε spent on the noisy row count n̂ that fixes pmm's depth, psmm's
    /// grid or lowdim's noise scales [default: 1/16 for pmm and psmm; required for lowdim].
    #[arg(long, allow_negative_numbers = true)]
    pub root_share: Option<f64>,
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
    /// Output rows, at most 10^12 (default: the released row count).
    #[arg(long)]
    pub rows: Option<u64>,
    /// Reproducible run; the report then says it is not fit for release.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Rows with null/NaN/inf values: error or drop [default: error].
    #[arg(long, value_enum)]
    pub nulls: Option<NullPolicy>,
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
    /// Where points go in their cell [default: uniform].
    #[arg(long, value_enum)]
    pub placement: Option<Placement>,
    /// pmm: binning device; pe: where the nearest-neighbour counts run [default: auto].
    #[arg(long, value_enum)]
    pub device: Option<DeviceChoice>,
    /// Worker threads, at most 1024 and 64 per core [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Memory the cell arrays may use, in MiB [default: half the machine].
    #[arg(long = "memory-limit-mib")]
    pub memory_limit_mib: Option<u64>,
    /// Publishable run report (JSON).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Owner-only diagnostics (JSON; NOT private).
    #[arg(long)]
    pub diagnostics: Option<PathBuf>,
    /// No progress bars or summaries.
    #[arg(long)]
    pub quiet: bool,
    /// microagg: number of groups k; each released centroid averages at least ⌊n/k⌋ rows.
    #[arg(long)]
    pub k: Option<u64>,
    /// microagg: the net's cell budget, ⌊√k⌋ as the proof needs or k as the printed algorithm [default: sqrt-k].
    #[arg(long, value_enum)]
    pub cells_from: Option<CellsFrom>,
    /// covloss and microagg: public category list of a column, COLUMN=V1,V2,... (repeatable; or a
    /// `[categories]` table in the config). Never read from the data.
    #[arg(long = "categories", value_name = "COLUMN=V1,V2,...")]
    pub categories: Vec<CategoryList>,
    /// covloss and microagg: one-hot a numeric column over K equal bins of its public --bounds (repeatable).
    #[arg(long = "bins", value_name = "COLUMN=K")]
    pub bins: Vec<BinCount>,
    /// covloss and microagg: a value outside its category list is an error, or goes to an 'other' bit [default: error].
    #[arg(long, value_enum)]
    pub unlisted: Option<Unlisted>,
    /// covloss: mesh α of the lattice net [default: (ln n)^(-1/4)].
    #[arg(long)]
    pub covloss_alpha: Option<f64>,
    /// covloss: dimension t of the spectral subspace [default: ⌊ln √n / ln(7/α)⌋, at most p].
    #[arg(long)]
    pub covloss_t: Option<usize>,
    /// covloss: damping threshold b, `paper` ((p√n/ε)^(1/2)), `cells` (n/(2s)) or a number [default: paper].
    #[arg(long, value_name = "paper|cells|B")]
    pub damping: Option<Damping>,
    /// covloss: relative ε shares of the second moment, the weights and the centroids [default: 1,1,1].
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub covloss_shares: Option<Vec<f64>>,
}

/// Everything a `synth` run needs besides its input and output paths, typed per mechanism.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub epsilon: f64,
    /// Public bounds, one per column used; the columns are those named here.
    pub bounds: Vec<ColumnBounds>,
    pub neighbours: Neighbours,
    pub mechanism: MechanismOptions,
    /// Output rows; `None` gives the released (consistent) root count.
    pub rows: Option<u64>,
    /// Makes the run reproducible and therefore unfit for release.
    pub seed: Option<u64>,
    pub nulls: NullPolicy,
    pub placement: Placement,
    /// Worker threads; `None` uses every core.
    pub threads: Option<usize>,
    /// Bytes the cell arrays may use; `None` is half the machine's memory.
    pub memory_limit: Option<u64>,
    /// Read a directory input's Hive-style key=value folders as columns.
    pub hive_columns: bool,
}

/// The chosen mechanism with its own options.
#[derive(Clone, Debug, PartialEq)]
pub enum MechanismOptions {
    Pmm(PmmOptions),
    Psmm(PsmmOptions),
    Lowdim(LowdimOptions),
    Pe(PeOptions),
    Microagg(MicroaggOptions),
    Covloss(CovlossOptions),
}

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
fn plain_below(dims: usize) -> Option<(u32, &'static str)> {
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
}

#[derive(Clone, Debug, PartialEq)]
pub struct PsmmOptions {
    /// The number of equal cubes m (rounded to a whole number per axis); `None` takes the paper's m ≈ εn.
    pub cells: Option<u64>,
    /// Share of ε spent on n̂ when the grid is chosen under add-remove.
    pub noisy_n_share: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LowdimOptions {
    pub target_dim: TargetDim,
    /// Under add-remove, the share of ε spent on n̂ (required there: lowdim has no default).
    pub noisy_n_share: Option<f64>,
    /// The mechanism in d' dimensions; its n̂ share is unused (lowdim releases n̂ itself).
    pub inner: InnerOptions,
}

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

#[derive(Clone, Debug, PartialEq)]
pub enum InnerOptions {
    Pmm(PmmOptions),
    Psmm(PsmmOptions),
}

impl MechanismOptions {
    /// The mechanism's name in reports and messages.
    pub fn name(&self) -> &'static str {
        match self {
            MechanismOptions::Pmm(_) => "pmm",
            MechanismOptions::Psmm(_) => "psmm",
            MechanismOptions::Lowdim(_) => "lowdim",
            MechanismOptions::Pe(_) => "pe",
            MechanismOptions::Microagg(_) => "microagg",
            MechanismOptions::Covloss(_) => "covloss",
        }
    }
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
        chosen_by: None,
        larger_table: None,
        largest_table: None,
        smaller_table: None,
    };

    /// The tree's consistency step: the bottom-up pass, the rule and the pruning these options ask for.
    pub fn consistency_step(&self) -> Consistency {
        Consistency { bottom_up: self.bottom_up, rule: self.consistency, prune_sigmas: self.prune_sigmas }
    }
}

impl SynthOptions {
    /// PMM as `--mechanism pmm` runs it (no calibration), every default, for ε and the public bounds.
    pub fn new(epsilon: f64, bounds: Vec<ColumnBounds>) -> Self {
        SynthOptions {
            epsilon,
            bounds,
            neighbours: Neighbours::DEFAULT,
            mechanism: MechanismOptions::Pmm(PmmOptions::DEFAULT),
            rows: None,
            seed: None,
            nulls: NullPolicy::DEFAULT,
            placement: Placement::DEFAULT,
            threads: None,
            memory_limit: None,
            hive_columns: false,
        }
    }

    /// The checks that need no data.
    pub fn validate(&self) -> Result<()> {
        if let MechanismOptions::Microagg(_) = self.mechanism {
            return self.validate_encoded();
        }
        check_epsilon(self.epsilon)?;
        if let MechanismOptions::Covloss(covloss) = &self.mechanism {
            if self.neighbours != Neighbours::Replace {
                return Err(Error::privacy(
                    "--mechanism covloss needs --neighbours replace: its parameters (alpha, t, the damping b) and its \
                     sensitivities use the row count n, which is public only under replace (SPEC §1); the paper does \
                     not cover add-remove",
                ));
            }
            let shares = covloss.settings.shares;
            if shares.iter().any(|share| !(share.is_finite() && *share > 0.0)) {
                return Err(Error::bad_input(format!(
                    "--covloss-shares must be three finite numbers > 0, got {shares:?}"
                )));
            }
            if let Some(alpha) = covloss.settings.alpha {
                if !(alpha > 0.0 && alpha <= 1.0) {
                    return Err(Error::bad_input(format!("--covloss-alpha must be in (0, 1], got {alpha}")));
                }
            }
            return self.validate_encoded();
        }
        if self.bounds.is_empty() {
            return Err(Error::bad_input(
                "no columns: give --columns with --bounds for each (or a config file with [bounds])",
            ));
        }
        let check_share = |flag: &str, share: f64| {
            if share > 0.0 && share < 1.0 {
                Ok(())
            } else {
                Err(Error::bad_input(format!("{flag} must be strictly between 0 and 1, got {share}")))
            }
        };
        let check_cells = |options: &PsmmOptions| match options.cells {
            Some(0) => Err(Error::bad_input("--cells must be at least 1")),
            _ => Ok(()),
        };
        match &self.mechanism {
            MechanismOptions::Pmm(pmm) => {
                check_share("--root-share", pmm.noisy_n_share)?;
                if pmm.partition == Partition::Quantile && pmm.marginal_share == 0.0 {
                    return Err(Error::bad_input(
                        "--partition quantile cuts the axes at the released marginals' quantiles: it needs --marginal-share above 0 (0.3 when not given)",
                    ));
                }
                if pmm.refine_share != 0.0 {
                    check_share("--refine-share", pmm.refine_share)?;
                }
                for (share, flag) in [(pmm.marginal_share, "--marginal-share"), (pmm.pair_share, "--pair-share")] {
                    if share == 0.0 {
                        continue;
                    }
                    check_share(flag, share)?;
                    if self.placement == Placement::Centre {
                        return Err(Error::bad_input(format!(
                            "{flag} maps points spread uniformly in their cells onto released marginals; \
                             --placement centre puts them on cell centres, which the map cannot spread (use the \
                             default placement)"
                        )));
                    }
                }
            }
            MechanismOptions::Psmm(psmm) => {
                check_share("--root-share", psmm.noisy_n_share)?;
                check_cells(psmm)?;
            }
            MechanismOptions::Lowdim(lowdim) => {
                if let Some(share) = lowdim.noisy_n_share {
                    check_share("--root-share", share)?;
                }
                if let InnerOptions::Psmm(psmm) = &lowdim.inner {
                    check_cells(psmm)?;
                }
            }
            MechanismOptions::Pe(_) => {}
            // Checked by validate_encoded above.
            MechanismOptions::Microagg(_) | MechanismOptions::Covloss(_) => {}
        }
        if let Some(threads) = self.threads {
            check_threads(threads)?;
        }
        check_output_rows("--rows", self.rows)?;
        if self.neighbours == Neighbours::Replace && self.nulls == NullPolicy::Drop {
            return Err(Error::privacy(
                "--nulls drop cannot be used with --neighbours replace: dropping rows makes n depend on the data, \
                 while replace treats n as public; use --neighbours add-remove, or clean the file first",
            ));
        }
        Ok(())
    }
}

impl SynthOptions {
    /// The checks of the encoded mechanisms that need no data.
    fn validate_encoded(&self) -> Result<()> {
        if self.threads == Some(0) {
            return Err(Error::bad_input("--threads must be at least 1"));
        }
        if self.nulls == NullPolicy::Drop {
            return Err(Error::bad_input(
                "--nulls drop does not apply to --mechanism covloss or microagg: a null is an error (give it a \
                 category of its own before the run)",
            ));
        }
        Ok(())
    }
}

/// What a resolved command line asks for: the input, where the outputs go, the run's options and
/// whether to stay quiet.
#[derive(Debug)]
pub struct SynthRequest {
    pub input: PathBuf,
    pub outputs: OutputPaths,
    pub options: SynthOptions,
    pub quiet: bool,
}

impl SynthArgs {
    /// The typed options, with every default applied and every option checked against the mechanism
    /// it belongs to.
    pub fn resolve(mut self) -> Result<SynthRequest> {
        let input = std::mem::take(&mut self.input);
        let (table, report, diagnostics) = (self.output.take(), self.report.take(), self.diagnostics.take());
        let quiet = self.quiet;
        let options = self.resolve_options()?;
        Ok(SynthRequest {
            input,
            outputs: OutputPaths {
                table: table.ok_or_else(|| Error::bad_input("--output is required"))?,
                report,
                diagnostics,
            },
            options,
            quiet,
        })
    }

    /// The typed options alone (input and outputs aside): what a library caller with its own input and
    /// outputs runs.
    pub fn resolve_options(self) -> Result<SynthOptions> {
        let requested = self.mechanism.unwrap_or(DEFAULT_MECHANISM);
        let mechanism = match requested {
            Mechanism::Auto => Mechanism::Pmm,
            other => other,
        };
        let root_share = match (self.root_share, self.noisy_n_share) {
            (Some(_), Some(_)) => {
                return Err(Error::bad_input(
                    "--noisy-n-share is the former name of --root-share: give --root-share only",
                ))
            }
            (None, Some(share)) => {
                eprintln!("warning: --noisy-n-share is deprecated; use --root-share (the same share of ε for n̂)");
                Some(share)
            }
            (root_share, None) => root_share,
        };
        let epsilon = match (mechanism, self.epsilon) {
            (Mechanism::Microagg, Some(_)) => {
                return Err(Error::bad_input(
                    "--epsilon does not apply to --mechanism microagg: it is (n/k)-anonymous, NOT differentially \
                     private (use --mechanism covloss for an epsilon-DP release)",
                ))
            }
            // No ε: the report's epsilon is null (serialised from infinity) and its guarantee says why.
            (Mechanism::Microagg, None) => f64::INFINITY,
            (_, epsilon) => epsilon.ok_or_else(|| Error::bad_input("--epsilon is required"))?,
        };
        let all_bounds = last_bounds_per_column(self.bounds);
        let bounds = if mechanism.is_encoded() {
            all_bounds.clone()
        } else {
            bounds_for_columns(self.columns.as_deref(), &all_bounds)?
        };
        let inner = self.inner_mechanism.unwrap_or(InnerMechanism::Pmm);
        let uses_pmm =
            |mechanism| mechanism == Mechanism::Pmm || (mechanism == Mechanism::Lowdim && inner == InnerMechanism::Pmm);
        let uses_psmm = |mechanism| {
            mechanism == Mechanism::Psmm || (mechanism == Mechanism::Lowdim && inner == InnerMechanism::Psmm)
        };
        // Each mechanism-specific option, whether it was given, and whether it applies.
        let refusals = [
            (
                self.cells.is_some() && !uses_psmm(mechanism),
                "--cells applies to --mechanism psmm (or lowdim with --inner-mechanism psmm) only",
            ),
            (
                (self.target_dim.is_some() || self.inner_mechanism.is_some()) && mechanism != Mechanism::Lowdim,
                "--target-dim and --inner-mechanism apply to --mechanism lowdim only",
            ),
            (
                (self.marginal_share.is_some() || self.partition.is_some()) && mechanism != Mechanism::Pmm,
                "--marginal-share and --partition apply to --mechanism pmm only",
            ),
            (
                self.pair_share.is_some() && mechanism != Mechanism::Pmm,
                "--pair-share applies to --mechanism pmm or auto only",
            ),
            (
                self.refine_share.is_some() && mechanism != Mechanism::Pmm,
                "--refine-share applies to --mechanism pmm or auto only",
            ),
            (
                self.depth.is_some() && mechanism == Mechanism::Psmm,
                "--depth applies to --mechanism pmm; psmm's partition is set by --cells (default about εn cells)",
            ),
            (
                self.depth.is_some() && !uses_pmm(mechanism),
                "--depth applies to the inner PMM; the inner psmm's grid is set by --cells (default about ε_s n cells)",
            ),
            (
                (self.consistency.is_some() || self.prune_sigmas.is_some()) && !uses_pmm(mechanism),
                "--consistency and --prune-sigmas apply to PMM's tree (--mechanism pmm, or lowdim with the inner pmm) only",
            ),
            (
                self.bottom_up.is_some() && mechanism != Mechanism::Pmm,
                "--bottom-up applies to --mechanism pmm and auto (lowdim's inner pmm keeps the textbook pass)",
            ),
            (
                self.device == Some(DeviceChoice::Gpu) && mechanism == Mechanism::Psmm,
                "--device gpu applies to --mechanism pmm; psmm bins its regular grid on the CPU (its cost is the projection)",
            ),
            (
                self.device == Some(DeviceChoice::Gpu) && uses_psmm(mechanism),
                "--device gpu applies to the inner PMM; the inner psmm bins its regular grid on the CPU",
            ),
            (
                self.device == Some(DeviceChoice::Gpu) && mechanism.is_encoded(),
                "--device gpu applies to --mechanism pmm, lowdim and pe; covloss and microagg run on the CPU",
            ),
            (
                (self.k.is_some() || self.cells_from.is_some()) && mechanism != Mechanism::Microagg,
                "--k and --cells-from apply to --mechanism microagg only",
            ),
            (
                self.k.is_none() && mechanism == Mechanism::Microagg,
                "--mechanism microagg needs --k K, the number of groups (each of at least n/k rows)",
            ),
            (
                (self.covloss_alpha.is_some()
                    || self.covloss_t.is_some()
                    || self.damping.is_some()
                    || self.covloss_shares.is_some())
                    && mechanism != Mechanism::Covloss,
                "--covloss-alpha, --covloss-t, --damping and --covloss-shares apply to --mechanism covloss only",
            ),
            (
                (!self.categories.is_empty() || !self.bins.is_empty() || self.unlisted.is_some())
                    && !mechanism.is_encoded(),
                "--categories, --bins and --unlisted apply to --mechanism covloss and microagg only",
            ),
            (
                root_share.is_some() && mechanism.is_encoded(),
                "--root-share applies to --mechanism pmm, psmm and lowdim; covloss runs under replace (n public) and microagg releases no noise",
            ),
            (
                self.columns.is_none() && mechanism.is_encoded(),
                "--mechanism covloss and microagg need --columns (bits, categorical columns with --categories, \
                 numeric columns with --bins and --bounds)",
            ),
        ];
        let pe_flags = self.pe_variant.is_some()
            || self.pe_steps.is_some()
            || self.pe_samples.is_some()
            || self.pe_init.is_some()
            || self.pe_threshold.is_some()
            || self.pe_domain.is_some();
        let pe_refusals = [
            (
                self.delta.is_some() && mechanism != Mechanism::Pe,
                "--delta applies to --mechanism pe; pmm, psmm and lowdim are pure epsilon-DP (delta = 0)",
            ),
            (
                pe_flags && mechanism != Mechanism::Pe,
                "--pe-variant, --pe-steps, --pe-samples, --pe-init, --pe-threshold and --pe-domain apply to --mechanism pe only",
            ),
            (
                self.delta.is_none() && mechanism == Mechanism::Pe,
                "--mechanism pe needs --delta (its guarantee is (epsilon, delta)-DP), e.g. --delta 1e-6",
            ),
            (
                mechanism == Mechanism::Pe
                    && (self.depth.is_some() || root_share.is_some() || self.consistency.is_some()),
                "--depth, --root-share and --consistency do not apply to --mechanism pe",
            ),
        ];
        if let Some((_, message)) = refusals.iter().chain(&pe_refusals).find(|(refused, _)| *refused) {
            return Err(Error::bad_input(*message));
        }
        if let Some(sigmas) = self.prune_sigmas.filter(|sigmas| !(sigmas.is_finite() && *sigmas >= 0.0)) {
            return Err(Error::bad_input(format!(
                "--prune-sigmas must be a finite number of at least 0, got {sigmas}"
            )));
        }
        // PMM's calibration as given (or defaulted): what `--mechanism pmm` runs, and what auto runs when
        // either flag is given; auto chooses only for runs that leave both unset.
        let given = AutoChoice::given(
            self.marginal_share.unwrap_or(match self.partition {
                Some(Partition::Quantile) => DEFAULT_QUANTILE_MARGINAL_SHARE,
                _ => 0.0,
            }),
            self.partition.unwrap_or(Partition::Midpoint),
        );
        let (neighbours, placement) =
            (self.neighbours.unwrap_or(Neighbours::DEFAULT), self.placement.unwrap_or(Placement::DEFAULT));
        let calibration_given = self.marginal_share.is_some() || self.partition.is_some();
        let auto = (requested == Mechanism::Auto).then(|| {
            if calibration_given {
                given
            } else if placement == Placement::Centre {
                AutoChoice::CENTRED
            } else if self.depth.is_some() && neighbours == Neighbours::AddRemove {
                AutoChoice::FIXED_DEPTH
            } else {
                AutoChoice::for_columns(bounds.len(), self.pair_share.is_some_and(|share| share > 0.0))
            }
        });
        let calibration = auto.unwrap_or(given);
        let pmm = PmmOptions {
            depth: self.depth,
            bottom_up: self.bottom_up.unwrap_or(match requested {
                Mechanism::Auto => AUTO_BOTTOM_UP,
                _ => PMM_BOTTOM_UP,
            }),
            consistency: self.consistency.unwrap_or(DEFAULT_CONSISTENCY),
            prune_sigmas: self.prune_sigmas.unwrap_or(DEFAULT_PRUNE_SIGMAS),
            noisy_n_share: root_share.unwrap_or(DEFAULT_NOISY_N_SHARE),
            device: self.device.unwrap_or(DeviceChoice::Auto),
            marginal_share: calibration.marginal_share,
            partition: calibration.partition,
            pair_share: self.pair_share.unwrap_or(0.0),
            refine_share: self.refine_share.unwrap_or(0.0),
            chosen_by: auto.map(|auto| auto.reason),
            larger_table: None,
            largest_table: None,
            smaller_table: None,
        };
        // An explicit `--pair-share` (0 too) keeps auto's settings on every table.
        let switches = auto.filter(|_| self.pair_share.is_none());
        let switch_from = |from_epsilon_n, larger: LargerSettings| {
            Box::new(LargerTable {
                from_epsilon_n,
                options: PmmOptions {
                    marginal_share: larger.marginal_share,
                    partition: larger.partition,
                    pair_share: larger.pair_share,
                    refine_share: self.refine_share.unwrap_or(larger.refine_share),
                    chosen_by: Some(larger.reason),
                    ..pmm.clone()
                },
            })
        };
        let larger_table = (switches.and_then(|auto| auto.larger_table))
            .map(|larger| switch_from(AUTO_LARGER_TABLE_FROM_EPSILON_N, larger));
        let largest_table = (switches.and_then(|auto| auto.largest_table))
            .map(|largest| switch_from(AUTO_LARGEST_TABLE_FROM_EPSILON_N, largest));
        let smaller_table = switches.and_then(|auto| auto.smaller_table).map(|(below_marginal_depth, reason)| {
            Box::new(SmallerTable {
                below_marginal_depth,
                options: PmmOptions {
                    marginal_share: 0.0,
                    partition: Partition::Midpoint,
                    chosen_by: Some(reason),
                    ..pmm.clone()
                },
            })
        });
        let pmm = PmmOptions { larger_table, largest_table, smaller_table, ..pmm };
        let psmm = PsmmOptions { cells: self.cells, noisy_n_share: root_share.unwrap_or(DEFAULT_NOISY_N_SHARE) };
        let mechanism = match mechanism {
            // `auto` is PMM with the settings chosen above.
            Mechanism::Pmm | Mechanism::Auto => MechanismOptions::Pmm(pmm),
            Mechanism::Psmm => MechanismOptions::Psmm(psmm),
            Mechanism::Pe => MechanismOptions::Pe(PeOptions {
                delta: self.delta.expect("required above"),
                variant: self.pe_variant.unwrap_or(PeVariant::Threshold),
                steps: self.pe_steps,
                samples: self.pe_samples,
                init: self.pe_init.unwrap_or(PeInit::Uniform),
                threshold: self.pe_threshold,
                domain: self.pe_domain.unwrap_or(PeDomain::Box),
                device: self.device.unwrap_or(DeviceChoice::Auto),
            }),
            Mechanism::Lowdim => MechanismOptions::Lowdim(LowdimOptions {
                target_dim: self.target_dim.unwrap_or(TargetDim::Auto),
                noisy_n_share: root_share,
                inner: match inner {
                    InnerMechanism::Pmm => InnerOptions::Pmm(pmm),
                    InnerMechanism::Psmm => InnerOptions::Psmm(psmm),
                },
            }),
            Mechanism::Microagg | Mechanism::Covloss => {
                let encoding = EncodingSpec {
                    columns: self.columns.clone().unwrap_or_default(),
                    categories: self.categories.clone(),
                    bins: self.bins.clone(),
                    bounds: all_bounds,
                    unlisted: self.unlisted.unwrap_or(Unlisted::Error),
                };
                if mechanism == Mechanism::Microagg {
                    MechanismOptions::Microagg(MicroaggOptions {
                        encoding,
                        groups: self.k.expect("refused above without --k"),
                        cells_from: self.cells_from.unwrap_or(CellsFrom::SqrtK),
                    })
                } else {
                    let shares = match self.covloss_shares.as_deref() {
                        None => CovlossSettings::DEFAULT.shares,
                        Some(&[a, b, c]) => [a, b, c],
                        Some(other) => {
                            return Err(Error::bad_input(format!(
                            "--covloss-shares needs three numbers (second moment, weights, centroids), got {other:?}"
                        )))
                        }
                    };
                    MechanismOptions::Covloss(CovlossOptions {
                        encoding,
                        settings: CovlossSettings {
                            alpha: self.covloss_alpha,
                            t: self.covloss_t,
                            damping: self.damping.unwrap_or(Damping::Paper),
                            shares,
                        },
                    })
                }
            }
        };
        let memory_limit = match self.memory_limit_mib {
            Some(mib) => Some(
                mib.checked_mul(1 << 20)
                    .ok_or_else(|| Error::bad_input(format!("--memory-limit-mib {mib} is too large")))?,
            ),
            None => None,
        };
        Ok(SynthOptions {
            epsilon,
            bounds,
            neighbours,
            mechanism,
            rows: self.rows,
            seed: self.seed,
            nulls: self.nulls.unwrap_or(NullPolicy::DEFAULT),
            placement,
            threads: self.threads,
            memory_limit,
            hive_columns: self.hive_columns,
        })
    }
}

/// The most worker threads a run starts: more only add scheduling and per-thread histograms
/// (4000 threads on 1000 rows ran for over a minute).
pub const MAX_THREADS: usize = 1024;
/// And at most this many per core of the machine.
pub const MAX_THREADS_PER_CORE: usize = 64;

/// Refuses 0 threads, and more than [`MAX_THREADS`] or [`MAX_THREADS_PER_CORE`] × the machine's cores.
pub fn check_threads(threads: usize) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let limit = MAX_THREADS.min(MAX_THREADS_PER_CORE.saturating_mul(cores));
    if threads == 0 {
        return Err(Error::bad_input("--threads must be at least 1"));
    }
    if threads > limit {
        return Err(Error::bad_input(format!(
            "--threads {threads} is above the limit of {limit} (at most {MAX_THREADS}, and at most \
             {MAX_THREADS_PER_CORE} per core on this machine's {cores})"
        )));
    }
    Ok(())
}

/// The most rows `synth --rows` and `generate --rows` write (10^12). dpsynth does not check free disk
/// space: a table this size takes terabytes, and the file system's own error stops a run that does not fit.
pub const MAX_OUTPUT_ROWS: u64 = 1_000_000_000_000;

pub fn check_output_rows(flag: &str, rows: Option<u64>) -> Result<()> {
    match rows {
        Some(rows) if rows > MAX_OUTPUT_ROWS => {
            Err(Error::bad_input(format!("{flag} {rows} is above the limit of 10^12 rows")))
        }
        _ => Ok(()),
    }
}

/// Bounds given more than once for a column (a config file's, then the command line's): the last wins.
pub fn last_bounds_per_column(given: Vec<ColumnBounds>) -> Vec<ColumnBounds> {
    let mut bounds: Vec<ColumnBounds> = Vec::new();
    for next in given {
        bounds.retain(|existing| existing.column != next.column);
        bounds.push(next);
    }
    bounds
}

/// Chooses the bounds of the columns used: the `--columns` list (or every column with bounds when it
/// is absent), each of which must have public bounds.
pub fn bounds_for_columns(columns: Option<&[String]>, bounds: &[ColumnBounds]) -> Result<Vec<ColumnBounds>> {
    let Some(columns) = columns else {
        return Ok(bounds.to_vec());
    };
    columns
        .iter()
        .map(|column| {
            bounds.iter().find(|bounds| &bounds.column == column).cloned().ok_or_else(|| {
                Error::bad_input(format!(
                    "column '{column}' has no public bounds: give --bounds {column}=LO:HI (bounds are never taken from the data)"
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> SynthArgs {
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: SynthArgs,
        }
        let mut argv = vec!["synth", "in.parquet", "--output", "out.parquet", "--epsilon", "1"];
        argv.extend_from_slice(extra);
        <Wrapper as clap::Parser>::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn each_mechanism_gets_its_own_options_with_their_defaults() {
        let request = args(&["--bounds", "a=0:1", "--mechanism", "pmm"]).resolve().unwrap();
        assert_eq!(request.options.mechanism, MechanismOptions::Pmm(PmmOptions::DEFAULT));
        let MechanismOptions::Pmm(auto) = args(&["--bounds", "a=0:1"]).resolve().unwrap().options.mechanism else {
            panic!("the default runs pmm");
        };
        assert_eq!(auto.bottom_up, AUTO_BOTTOM_UP);
        assert_eq!(PmmOptions { chosen_by: None, bottom_up: PMM_BOTTOM_UP, ..auto }, PmmOptions::DEFAULT);
        for (mechanism, given, bottom_up) in [
            ("pmm", "average", BottomUp::Average),
            ("auto", "none", BottomUp::None),
            ("auto", "average", BottomUp::Average),
        ] {
            let words = ["--bounds", "a=0:1", "--mechanism", mechanism, "--bottom-up", given];
            let MechanismOptions::Pmm(pmm) = args(&words).resolve().unwrap().options.mechanism else {
                panic!("{mechanism} runs pmm");
            };
            assert_eq!(pmm.bottom_up, bottom_up, "{words:?}");
        }
        let request = args(&["--bounds", "a=0:1", "--mechanism", "psmm", "--cells", "64"]).resolve().unwrap();
        assert_eq!(
            request.options.mechanism,
            MechanismOptions::Psmm(PsmmOptions { cells: Some(64), noisy_n_share: DEFAULT_NOISY_N_SHARE })
        );
        let request =
            args(&["--bounds", "a=0:1", "--mechanism", "lowdim", "--inner-mechanism", "psmm"]).resolve().unwrap();
        let MechanismOptions::Lowdim(lowdim) = request.options.mechanism else {
            panic!("lowdim expected");
        };
        assert_eq!(lowdim.target_dim, TargetDim::Auto);
        assert!(matches!(lowdim.inner, InnerOptions::Psmm(_)));
    }

    #[test]
    fn an_option_of_another_mechanism_is_refused_by_name() {
        for (extra, flag) in [
            (&["--cells", "8"][..], "--cells"),
            (&["--target-dim", "2"][..], "--target-dim"),
            (&["--mechanism", "psmm", "--depth", "3"][..], "--depth"),
            (&["--mechanism", "psmm", "--consistency", "uniform"][..], "--consistency"),
            (&["--mechanism", "psmm", "--prune-sigmas", "1"][..], "--prune-sigmas"),
            (&["--mechanism", "psmm", "--bottom-up", "average"][..], "--bottom-up"),
            (&["--mechanism", "lowdim", "--root-share", "0.1", "--bottom-up", "average"][..], "--bottom-up"),
            (&["--prune-sigmas", "-1"][..], "--prune-sigmas must be a finite number of at least 0, got -1"),
            (&["--prune-sigmas", "NaN"][..], "--prune-sigmas must be a finite number"),
            (&["--mechanism", "psmm", "--device", "gpu"][..], "--device gpu"),
            (&["--mechanism", "lowdim", "--inner-mechanism", "psmm", "--device", "gpu"][..], "--device gpu"),
            (&["--mechanism", "covloss", "--device", "gpu"][..], "--device gpu"),
            (&["--delta", "1e-6"][..], "--delta"),
            (&["--pe-steps", "3"][..], "--pe-steps"),
            (&["--mechanism", "pe"][..], "--delta"),
            (&["--mechanism", "pe", "--delta", "1e-6", "--depth", "3"][..], "--depth"),
        ] {
            let mut all = vec!["--bounds", "a=0:1"];
            all.extend_from_slice(extra);
            let error = args(&all).resolve().unwrap_err().to_string();
            assert!(error.contains(flag), "{extra:?}: {error}");
        }
    }

    #[test]
    fn pe_takes_the_device_of_its_nearest_neighbour_counts() {
        let resolved =
            args(&["--mechanism", "pe", "--delta", "1e-6", "--device", "cpu", "--bounds", "a=0:1"]).resolve().unwrap();
        let MechanismOptions::Pe(pe) = resolved.options.mechanism else { panic!("not pe") };
        assert_eq!(pe.device, DeviceChoice::Cpu);
    }

    #[test]
    fn lowdim_takes_root_share_and_its_former_name() {
        let share = |extra: &[&str]| {
            let mut all = vec!["--mechanism", "lowdim", "--bounds", "a=0:1"];
            all.extend_from_slice(extra);
            match args(&all).resolve_options().map(|options| options.mechanism) {
                Ok(MechanismOptions::Lowdim(lowdim)) => Ok(lowdim.noisy_n_share),
                Ok(other) => panic!("{other:?}"),
                Err(error) => Err(error.to_string()),
            }
        };
        assert_eq!(share(&["--root-share", "0.1"]), Ok(Some(0.1)));
        assert_eq!(share(&["--noisy-n-share", "0.1"]), Ok(Some(0.1)), "the former name still works");
        assert_eq!(share(&[]), Ok(None));
        assert!(share(&["--root-share", "0.1", "--noisy-n-share", "0.2"])
            .unwrap_err()
            .contains("give --root-share only"));
    }

    #[test]
    fn auto_chooses_pmm_settings_from_the_number_of_columns() {
        let bounds = ["--bounds", "a=0:1", "--bounds", "b=0:1", "--bounds", "c=0:1", "--bounds", "d=0:1"];
        for (columns, pairs, share, partition) in [
            ("a", &[][..], 0.0, Partition::Midpoint),
            ("a,b", &[][..], 0.0, Partition::Midpoint),
            ("a,b,c", &[][..], 0.45, Partition::Quantile),
            ("a,b,c", &["--pair-share", "0.2"][..], 0.3, Partition::Midpoint),
            ("a,b,c,d", &[][..], 0.45, Partition::Quantile),
            ("a,b,c,d", &["--pair-share", "0.2"][..], 0.45, Partition::Quantile),
        ] {
            let mut all = vec!["--mechanism", "auto", "--columns", columns];
            all.extend_from_slice(&bounds);
            all.extend_from_slice(pairs);
            let MechanismOptions::Pmm(pmm) = args(&all).resolve_options().unwrap().mechanism else {
                panic!("auto runs pmm")
            };
            assert_eq!((pmm.marginal_share, pmm.partition), (share, partition), "{columns} {pairs:?}");
            let d = columns.split(',').count();
            assert!(pmm.chosen_by.unwrap().contains(&format!(
                "d {} ",
                if d <= 2 {
                    "<="
                } else if d == 3 {
                    "="
                } else {
                    ">="
                }
            )));
        }
        let pmm = |words: &[&str]| match args(words).resolve_options().unwrap().mechanism {
            MechanismOptions::Pmm(pmm) => pmm,
            other => panic!("{words:?} runs {other:?}"),
        };
        let four = [
            "--columns",
            "a,b,c,d",
            "--bounds",
            "a=0:1",
            "--bounds",
            "b=0:1",
            "--bounds",
            "c=0:1",
            "--bounds",
            "d=0:1",
        ];
        // No --mechanism: auto's choice, and the report says so.
        let default = pmm(&four);
        assert_eq!((default.marginal_share, default.partition), (0.45, Partition::Quantile));
        assert!(default.chosen_by.unwrap().contains("d >= 4"));
        // --mechanism pmm: the textbook tree, nothing chosen.
        let plain = pmm(&[&["--mechanism", "pmm"][..], &four].concat());
        assert_eq!((plain.marginal_share, plain.partition, plain.chosen_by), (0.0, Partition::Midpoint, None));
        // Centre placement cannot be mapped, and --depth under add-remove releases no n̂ to size the
        // marginals by: auto runs the plain tree (under replace, --depth keeps auto's choice).
        for plain in [&["--placement", "centre"][..], &["--depth", "9"][..]] {
            let run = pmm(&[plain, &four].concat());
            assert_eq!((run.marginal_share, run.partition), (0.0, Partition::Midpoint), "{plain:?}");
            assert!(run.chosen_by.unwrap().contains(&plain[0][2..]), "{plain:?}");
        }
        let replace = pmm(&[&["--depth", "9", "--neighbours", "replace"][..], &four].concat());
        assert_eq!((replace.marginal_share, replace.partition), (0.45, Partition::Quantile));
        // At d ≥ 4 auto switches to the pairs and the larger marginal share from ε·n = 3·10^4 on, the rest
        // as given; a given --pair-share (0 too) means no switch.
        let larger = default.larger_table.clone().expect("auto at d >= 4 switches on larger tables");
        assert_eq!(larger.from_epsilon_n, AUTO_LARGER_TABLE_FROM_EPSILON_N);
        let switched = larger.options;
        assert_eq!((switched.marginal_share, switched.partition), (AUTO_QUANTILE_MARGINAL_SHARE, Partition::Quantile));
        assert_eq!((switched.pair_share, switched.larger_table.is_none()), (0.2, true));
        assert!(switched.chosen_by.unwrap().contains("at least 3e4"));
        // From ε·n = 5·10^7 on, the pairs and the marginals at smaller shares, the rest as the larger table's.
        let largest = default.largest_table.clone().expect("auto at d >= 4 switches on the largest tables");
        assert_eq!(largest.from_epsilon_n, AUTO_LARGEST_TABLE_FROM_EPSILON_N);
        let reduced = largest.options;
        assert_eq!((reduced.marginal_share, reduced.partition, reduced.pair_share), (0.2, Partition::Quantile, 0.1));
        assert!(reduced.chosen_by.unwrap().contains("at least 5e7"));
        let as_larger = PmmOptions { marginal_share: 0.45, pair_share: 0.2, chosen_by: switched.chosen_by, ..reduced };
        assert_eq!(as_larger, switched);
        let unswitched =
            PmmOptions { larger_table: None, largest_table: None, smaller_table: None, chosen_by: None, ..default };
        assert_eq!(PmmOptions { pair_share: 0.0, chosen_by: None, ..switched }, unswitched);
        let given_prune = pmm(&[&["--prune-sigmas", "1"][..], &four].concat());
        assert_eq!(given_prune.larger_table.unwrap().options.prune_sigmas, 1.0);
        assert_eq!(given_prune.largest_table.unwrap().options.prune_sigmas, 1.0);
        for share in ["0", "0.2"] {
            let given = pmm(&[&["--pair-share", share][..], &four].concat());
            assert_eq!((given.larger_table, given.largest_table), (None, None), "{share}");
        }
        for fewer in ["a", "a,b"] {
            let narrow = pmm(&[&["--columns", fewer][..], &bounds].concat());
            assert_eq!((narrow.larger_table, narrow.largest_table), (None, None), "{fewer}");
        }
        // At d = 3 the larger table's settings are midpoint cells with the share 0.3 (no pairs) and the dense
        // leaves cut finer, from the same ε·n̂ on; a given --refine-share (0 too) is kept.
        let three = pmm(&[&["--columns", "a,b,c"][..], &bounds].concat());
        assert_eq!(three.largest_table, None, "no third setting at d = 3");
        let larger = three.larger_table.clone().expect("auto at d = 3 switches on larger tables");
        assert_eq!(larger.from_epsilon_n, AUTO_LARGER_TABLE_FROM_EPSILON_N);
        let midpoints = larger.options;
        let settings = (midpoints.marginal_share, midpoints.partition, midpoints.pair_share, midpoints.refine_share);
        assert_eq!(settings, (0.3, Partition::Midpoint, 0.0, AUTO_REFINE_SHARE));
        let reason = midpoints.chosen_by.unwrap();
        assert!(reason.contains("d = 3") && reason.contains("at least 3e4"), "{reason}");
        assert_eq!((three.refine_share, three.smaller_table.as_ref().unwrap().options.refine_share), (0.0, 0.0));
        let unswitched = PmmOptions { larger_table: None, smaller_table: None, chosen_by: None, ..three };
        let as_own = PmmOptions {
            marginal_share: 0.45,
            partition: Partition::Quantile,
            refine_share: 0.0,
            chosen_by: None,
            ..midpoints
        };
        assert_eq!(as_own, unswitched);
        for given in ["0", "0.1"] {
            let refined = pmm(&[&["--columns", "a,b,c", "--refine-share", given][..], &bounds].concat());
            let share: f64 = given.parse().unwrap();
            assert_eq!(refined.larger_table.unwrap().options.refine_share, share, "--refine-share {given}");
            assert_eq!(refined.smaller_table.unwrap().options.refine_share, share, "--refine-share {given}");
        }
        let wide = pmm(&[&["--columns", "a,b,c,d"][..], &bounds].concat());
        assert_eq!(wide.larger_table.unwrap().options.refine_share, 0.0, "no refinement at d = 4");
        // At d = 3–5 auto runs plain PMM while its marginals would be too shallow, the rest as given; not at
        // d ≤ 2 or d ≥ 6, and not when --pair-share is given.
        let wider = |columns: &'static str| {
            let extra = ["--bounds", "e=0:1", "--bounds", "f=0:1"];
            [&["--columns", columns][..], &extra, &bounds].concat()
        };
        let below = |dims| plain_below(dims).map(|(below, _)| below);
        for (words, below) in [
            (&[&["--columns", "a,b,c"][..], &bounds].concat(), below(3)),
            (&four.to_vec(), below(4)),
            (&[&["--prune-sigmas", "1"][..], &four].concat(), below(4)),
            (&wider("a,b,c,d,e"), below(5)),
            (&[&["--columns", "a,b"][..], &bounds].concat(), None),
            (&wider("a,b,c,d,e,f"), None),
            (&[&["--pair-share", "0"][..], &four].concat(), None),
            (&[&["--mechanism", "pmm"][..], &four].concat(), None),
        ] {
            let run = pmm(words);
            assert_eq!(run.smaller_table.as_ref().map(|smaller| smaller.below_marginal_depth), below, "{words:?}");
            if let Some(smaller) = run.smaller_table {
                let plain = smaller.options;
                assert_eq!((plain.marginal_share, plain.partition, plain.pair_share), (0.0, Partition::Midpoint, 0.0));
                assert!(plain.chosen_by.unwrap().contains("plain PMM"), "{words:?}");
                assert_eq!((plain.larger_table, plain.largest_table, plain.smaller_table), (None, None, None));
                assert_eq!(plain.prune_sigmas, run.prune_sigmas, "{words:?}");
            }
        }
        // A calibration given keeps its meaning with or without --mechanism: auto chooses nothing else.
        for mechanism in [&[][..], &["--mechanism", "auto"][..], &["--mechanism", "pmm"][..]] {
            for (given, share, partition) in [
                (&["--marginal-share", "0.1"][..], 0.1, Partition::Midpoint),
                (&["--partition", "midpoint"][..], 0.0, Partition::Midpoint),
                (&["--partition", "quantile"][..], 0.3, Partition::Quantile),
            ] {
                let run = pmm(&[mechanism, given, &four].concat());
                assert_eq!((run.marginal_share, run.partition), (share, partition), "{mechanism:?} {given:?}");
                assert_eq!(run.chosen_by.is_some(), mechanism.is_empty() || mechanism[1] == "auto");
            }
        }
    }

    #[test]
    fn later_bounds_win_and_columns_need_bounds() {
        let bounds = last_bounds_per_column(vec![
            ColumnBounds::new("a", 0.0, 1.0).unwrap(),
            ColumnBounds::new("b", 0.0, 1.0).unwrap(),
            ColumnBounds::new("a", -1.0, 2.0).unwrap(),
        ]);
        assert_eq!(bounds, vec![ColumnBounds::new("b", 0.0, 1.0).unwrap(), ColumnBounds::new("a", -1.0, 2.0).unwrap()]);
        let error = bounds_for_columns(Some(&["a".into(), "c".into()]), &bounds).unwrap_err();
        assert!(error.to_string().contains("'c' has no public bounds"));
    }

    #[test]
    fn a_memory_limit_that_overflows_is_refused() {
        let error = args(&["--bounds", "a=0:1", "--memory-limit-mib", "18446744073709551615"]).resolve().err().unwrap();
        assert!(error.to_string().contains("too large"));
    }
}
