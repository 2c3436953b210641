//! The settings of a `synth` run: the common layer over each mechanism's own.
//!
//! [`SynthArgs`] declares every option once: each field is a command-line flag, and a config-file key of
//! the same name (`--root-share` is `root-share`; see [`crate::config`]), with its doc and its default
//! beside it. The flags every run shares are declared here; each mechanism's own are declared in its folder
//! (`mechanism/pmm/args.rs`, …) under its own help heading, and flattened in. [`SynthArgs::resolve`] turns
//! them into the typed [`SynthOptions`] that the library runs, where each mechanism has its own options
//! ([`MechanismOptions`]): each mechanism's flags are refused, by name, where it does not run.

use std::path::PathBuf;

use clap::Args;

// The types an option names, re-exported: a library user builds `SynthOptions` from this module alone.
pub use crate::binner::device::DeviceChoice;
pub use crate::binner::NullPolicy;
pub use crate::encoding::{BinCount, CategoryList, EncodingSpec, Unlisted};
pub use crate::geometry::bounds::ColumnBounds;
pub use crate::mechanism::args::{Mechanism, DEFAULT_MECHANISM};
pub use crate::mechanism::covloss::{CellsFrom, CovlossOptions, CovlossSettings, Damping, MicroaggOptions};
pub use crate::mechanism::lowdim::options::{InnerMechanism, InnerOptions, LowdimOptions, TargetDim};
pub use crate::mechanism::options::{value_name, MechanismOptions};
pub use crate::mechanism::pe::{PeDomain, PeInit, PeOptions, PeVariant};
pub use crate::mechanism::pmm::averaging::BottomUp;
pub use crate::mechanism::pmm::consistency::ConsistencyRule;
pub use crate::mechanism::pmm::marginals::Partition;
pub use crate::mechanism::pmm::options::{LargerTable, PmmOptions, SmallerTable};
pub use crate::mechanism::psmm::PsmmOptions;
pub use crate::privacy::Neighbours;
pub use crate::sampler::{Placement, RowOrder};

// Each mechanism's flags (the fields of `SynthArgs` that flatten them), and auto's choice with its constants.
pub use crate::mechanism::covloss::args::{CovlossArgs, EncodingArgs, MicroaggArgs};
pub use crate::mechanism::lowdim::args::LowdimArgs;
pub use crate::mechanism::pe::args::PeArgs;
pub use crate::mechanism::pmm::args::PmmArgs;
pub use crate::mechanism::pmm::auto::{
    AutoChoice, LargerSettings, AUTO_LARGER_TABLE_FROM_EPSILON_N, AUTO_LARGEST_TABLE_FROM_EPSILON_N, AUTO_PAIR_SHARE,
    AUTO_PLAIN_BELOW_MARGINAL_DEPTH, AUTO_QUANTILE_MARGINAL_SHARE, AUTO_REFINE_SHARE,
};
pub use crate::mechanism::psmm::args::PsmmArgs;

use crate::error::{Error, Result};
use crate::io::paths::{check_parquet_extension, OutputPaths};
use crate::io::source::{no_such_column, Source};
use crate::mechanism::args::{ChosenMechanism, CommonFlags};
use crate::privacy::check_epsilon;

/// `dpsynth synth`: every option, declared once (flag and config key); each mechanism's own under its
/// heading.
#[derive(Args, Debug, Clone, Default)]
pub struct SynthArgs {
    /// The sensitive input: a Parquet file, a directory of them (recursively, in path order) or a glob.
    pub input: PathBuf,
    /// A directory input's Hive-style key=value folders become columns after the files' own.
    #[arg(help_heading = "Input", long = "hive-columns")]
    pub hive_columns: bool,
    /// Columns to use [default: every column of the input, each of which needs a public domain].
    #[arg(help_heading = "Input", long, value_delimiter = ',')]
    pub columns: Option<Vec<String>>,
    /// Columns to leave out on purpose (the report lists them); instead of --columns.
    #[arg(help_heading = "Input", long, value_delimiter = ',', value_name = "COLUMN,...")]
    pub exclude: Vec<String>,
    /// `columns` came from the input's schema ([`SynthArgs::default_columns`]), not the command line.
    #[arg(skip)]
    pub columns_from_input: bool,
    /// Public bounds COLUMN=LO:HI of a number, date or timestamp column (day=2024-01-01:2025-01-01),
    /// repeatable. Never derived from the data.
    #[arg(help_heading = "Input", long = "bounds", value_name = "COLUMN=LO:HI")]
    pub bounds: Vec<ColumnBounds>,
    /// Release the bounds of every used number, date or timestamp column without --bounds from this share
    /// of ε (0 < SHARE < 1; the mechanism spends the rest), by the exponential mechanism over a public
    /// log-scale grid; values outside them are clamped. Columns with --bounds keep them and cost nothing.
    #[arg(help_heading = "Input", long = "private-bounds", value_name = "SHARE", allow_negative_numbers = true)]
    pub private_bounds: Option<f64>,
    /// Public category list of a categorical column (string, dictionary or integer), COLUMN=V1,V2,...
    /// (repeatable; or a `[categories]` table in the config). Never read from the data. Boolean columns need
    /// no domain.
    #[arg(help_heading = "Input", long = "categories", value_name = "COLUMN=V1,V2,...")]
    pub categories: Vec<CategoryList>,
    /// A value outside its column's category list: an error, or one more category, 'other', which comes
    /// back as null [default: error].
    #[arg(help_heading = "Input", long, value_enum)]
    pub unlisted: Option<Unlisted>,
    /// Null values: keep (null is a value of each nullable column's domain, its share released like any
    /// cell's), error or drop the row (NaN and infinities: error or drop) [default: keep for auto, pmm and
    /// psmm; error for the others].
    #[arg(help_heading = "Input", long, value_enum)]
    pub nulls: Option<NullPolicy>,
    /// A TOML file with any of these options, each under its flag's name (the command line wins).
    #[arg(help_heading = "Input", long)]
    pub config: Option<PathBuf>,
    /// Privacy budget ε (> 0).
    #[arg(help_heading = "Privacy", long, allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// Mechanism [default: auto, which is PMM with settings chosen from the number of columns and, at
    /// three or more, from ε·n̂ (ε·n under replace)].
    #[arg(help_heading = "Privacy", long, value_enum)]
    pub mechanism: Option<Mechanism>,
    /// Neighbouring relation of the guarantee [default: add-remove].
    #[arg(help_heading = "Privacy", long, value_enum)]
    pub neighbours: Option<Neighbours>,
    /// Under add-remove, the share of ε spent on the noisy row count n̂ that fixes pmm's depth, psmm's
    /// grid or lowdim's noise scales [default: 1/16 for pmm and psmm; required for lowdim].
    #[arg(help_heading = "Privacy", long, allow_negative_numbers = true)]
    pub root_share: Option<f64>,
    /// The former name of --root-share for lowdim: still accepted, with a warning.
    #[arg(help_heading = "Privacy", long, allow_negative_numbers = true, hide = true)]
    pub noisy_n_share: Option<f64>,
    /// Reproducible run; the report then says it is not fit for release.
    #[arg(help_heading = "Privacy", long)]
    pub seed: Option<u64>,
    /// Where the synthetic table goes (written atomically).
    #[arg(help_heading = "Output", long, short)]
    pub output: Option<PathBuf>,
    /// Output rows, at most 10^12 (default: the released row count).
    #[arg(help_heading = "Output", long)]
    pub rows: Option<u64>,
    /// Where points go in their cell [default: uniform].
    #[arg(help_heading = "Output", long, value_enum)]
    pub placement: Option<Placement>,
    /// Order of the output rows: random (a seeded permutation, so that every prefix of the table is a
    /// uniform sample of it) or cells (cell by cell, a prefix covering a corner of the space; faster: half
    /// random's sampling time, 0.65–0.74× its wall time for pmm and 0.86–0.90× for auto on 10^7 rows, d = 4).
    /// covloss and microagg draw each row independently: both orders are the same there [default: random].
    #[arg(help_heading = "Output", long, value_enum)]
    pub row_order: Option<RowOrder>,
    /// Publishable run report (JSON).
    #[arg(help_heading = "Output", long)]
    pub report: Option<PathBuf>,
    /// Owner-only diagnostics (JSON; NOT private).
    #[arg(help_heading = "Output", long)]
    pub diagnostics: Option<PathBuf>,
    /// Also save the release here (docs/release-format.md: the released measure, the columns' public
    /// domains and the report; never data), written with the table: `dpsynth sample` draws more tables
    /// from it without the data and without spending budget.
    #[arg(help_heading = "Output", long = "save-release", value_name = "FILE")]
    pub save_release: Option<PathBuf>,
    /// No progress bars or summaries.
    #[arg(help_heading = "Output", long)]
    pub quiet: bool,
    /// Print the owner-only line (the true row count, dropped and clamped rows: NOT private) on stderr
    /// [default: only when stderr is a terminal, so that it stays out of batch-job logs].
    #[arg(help_heading = "Output", long = "owner-summary")]
    pub owner_summary: bool,
    /// pmm: binning device; pe: where the nearest-neighbour counts run [default: auto].
    #[arg(help_heading = "Performance", long, value_enum)]
    pub device: Option<DeviceChoice>,
    /// Worker threads, at most 1024 and 64 per core [default: all cores].
    #[arg(help_heading = "Performance", long)]
    pub threads: Option<usize>,
    /// Memory the cell arrays may use, in MiB [default: half the machine].
    #[arg(help_heading = "Performance", long = "memory-limit-mib")]
    pub memory_limit_mib: Option<u64>,
    #[command(flatten)]
    pub pmm: PmmArgs,
    #[command(flatten)]
    pub psmm: PsmmArgs,
    #[command(flatten)]
    pub lowdim: LowdimArgs,
    #[command(flatten)]
    pub pe: PeArgs,
    #[command(flatten)]
    pub encoding: EncodingArgs,
    #[command(flatten)]
    pub microagg: MicroaggArgs,
    #[command(flatten)]
    pub covloss: CovlossArgs,
}

/// Everything a `synth` run needs besides its input and output paths, typed per mechanism.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub epsilon: f64,
    /// The input columns used (the output keeps the input's order); `None`: every column of the input but
    /// `exclude`. Each needs a public domain: bounds, a category list, or a Boolean type.
    pub columns: Option<Vec<String>>,
    /// Columns left out on purpose, named in the report.
    pub exclude: Vec<String>,
    /// Public bounds (of the used columns that are numbers, dates or timestamps; others are not read).
    pub bounds: Vec<ColumnBounds>,
    /// The share of ε that releases the bounds of the used numeric columns without public ones
    /// (`--private-bounds`); `None`: every such column needs public bounds.
    pub private_bounds: Option<f64>,
    /// Public category lists.
    pub categories: Vec<CategoryList>,
    pub unlisted: Unlisted,
    pub neighbours: Neighbours,
    pub mechanism: MechanismOptions,
    /// Output rows; `None` gives the released (consistent) root count.
    pub rows: Option<u64>,
    /// Makes the run reproducible and therefore unfit for release.
    pub seed: Option<u64>,
    pub nulls: NullPolicy,
    pub placement: Placement,
    pub row_order: RowOrder,
    /// Worker threads; `None` uses every core.
    pub threads: Option<usize>,
    /// Bytes the cell arrays may use; `None` is half the machine's memory.
    pub memory_limit: Option<u64>,
    /// Read a directory input's Hive-style key=value folders as columns.
    pub hive_columns: bool,
}

impl SynthOptions {
    /// PMM as `--mechanism pmm` runs it (no calibration), every default, on the columns of the public bounds.
    /// Nulls are kept (a mechanism that reads numbers only reads `keep` as `error`).
    pub fn new(epsilon: f64, bounds: Vec<ColumnBounds>) -> Self {
        SynthOptions {
            epsilon,
            columns: Some(bounds.iter().map(|bounds| bounds.column.clone()).collect()),
            exclude: Vec::new(),
            bounds,
            private_bounds: None,
            categories: Vec::new(),
            unlisted: Unlisted::DEFAULT,
            neighbours: Neighbours::DEFAULT,
            mechanism: MechanismOptions::Pmm(PmmOptions::DEFAULT),
            rows: None,
            seed: None,
            nulls: NullPolicy::Keep,
            placement: Placement::DEFAULT,
            row_order: RowOrder::DEFAULT,
            threads: None,
            memory_limit: None,
            hive_columns: false,
        }
    }

    /// Whether null is a value of the nullable columns' domains: `--nulls keep` with a mechanism that reads
    /// coded columns (the others read keep as error).
    pub fn keeps_nulls(&self) -> bool {
        self.nulls == NullPolicy::Keep && self.mechanism.reads_mixed_columns()
    }

    /// The checks that need no data: the mechanism's own ([`MechanismOptions::validate`]) and the run's.
    pub fn validate(&self) -> Result<()> {
        // microagg adds no noise: it has no ε to check.
        if !matches!(self.mechanism, MechanismOptions::Microagg(_)) {
            check_epsilon(self.epsilon)?;
        }
        if let Some(share) = self.private_bounds {
            self.check_private_bounds(share)?;
        }
        if self.mechanism.encoding().is_some() {
            self.mechanism.validate(self.neighbours, self.placement)?;
            return self.validate_encoded();
        }
        if self.columns.as_ref().is_some_and(Vec::is_empty) {
            return Err(Error::bad_input(
                "no columns: give --columns, each with a public domain (--bounds, --categories, or a Boolean type)",
            ));
        }
        self.mechanism.validate(self.neighbours, self.placement)?;
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

    /// `--private-bounds`: a share strictly between 0 and 1, for a mechanism whose budget is pure ε on
    /// numeric axes.
    fn check_private_bounds(&self, share: f64) -> Result<()> {
        if !(share > 0.0 && share < 1.0) {
            return Err(Error::privacy(format!(
                "--private-bounds must be a share of epsilon strictly between 0 and 1, got {}",
                crate::error::compact_number(share)
            )));
        }
        match self.mechanism {
            MechanismOptions::Pmm(_) | MechanismOptions::Psmm(_) | MechanismOptions::Lowdim(_) => Ok(()),
            _ => Err(Error::bad_input(format!(
                "--private-bounds applies to --mechanism auto, pmm, psmm and lowdim, not {} (pe composes by zCDP; \
                 covloss and microagg bin numbers on public bins): give the columns public --bounds",
                self.mechanism.name()
            ))),
        }
    }

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
    /// Where to save the release (`--save-release`), if anywhere.
    pub save_release: Option<PathBuf>,
    pub options: SynthOptions,
    pub quiet: bool,
    /// `--owner-summary`: print the owner-only line even when stderr is not a terminal.
    pub owner_summary: bool,
}

impl SynthArgs {
    /// The typed options, with every default applied and every option checked against the mechanism
    /// it belongs to.
    pub fn resolve(mut self) -> Result<SynthRequest> {
        let input = std::mem::take(&mut self.input);
        // An input that cannot be opened is reported where the run opens it, after the options' own checks.
        if let (None, Ok(source)) = (&self.columns, Source::open_with(&input, self.hive_columns)) {
            let names: Vec<String> = source.schema().fields().iter().map(|field| field.name().clone()).collect();
            self.default_columns(&names)?;
        }
        let (table, report, diagnostics) = (self.output.take(), self.report.take(), self.diagnostics.take());
        let save_release = self.save_release.take();
        let (quiet, owner_summary) = (self.quiet, self.owner_summary);
        let options = self.resolve_options()?;
        let table = table.ok_or_else(|| Error::bad_input("--output is required"))?;
        check_parquet_extension(&table, "--output")?;
        Ok(SynthRequest {
            input,
            outputs: OutputPaths { table, report, diagnostics },
            save_release,
            options,
            quiet,
            owner_summary,
        })
    }

    /// `--columns` from the input's columns (`input_columns`, in schema order) where it is not given: every
    /// one but `--exclude`'s. The mechanism's settings (auto's choice among them) then know how many columns
    /// run; without it, the columns with a domain on the command line are counted.
    pub fn default_columns(&mut self, input_columns: &[String]) -> Result<()> {
        if self.columns.is_some() {
            return Ok(());
        }
        if let Some(unknown) = self.exclude.iter().find(|name| !input_columns.contains(name)) {
            let why = " (named by --exclude)";
            return Err(Error::bad_input(format!(
                "column '{unknown}': {}",
                no_such_column(unknown, input_columns, why)
            )));
        }
        self.columns = Some(input_columns.iter().filter(|name| !self.exclude.contains(name)).cloned().collect());
        self.columns_from_input = true;
        Ok(())
    }

    /// The typed options alone (input and outputs aside): what a library caller with its own input and
    /// outputs runs.
    pub fn resolve_options(self) -> Result<SynthOptions> {
        let chosen = ChosenMechanism::new(self.mechanism, self.lowdim.inner_mechanism);
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
        let epsilon = match (chosen.runs, self.epsilon) {
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
        let bounds = last_bounds_per_column(self.bounds);
        let categories = last_list_per_column(self.categories);
        if self.columns.is_some() && !self.columns_from_input && !self.exclude.is_empty() {
            return Err(Error::bad_input(
                "--exclude leaves columns out of every input column: give --columns or --exclude, not both",
            ));
        }
        let dims = self.columns.as_ref().map_or(bounds.len() + categories.len(), Vec::len);
        let (neighbours, placement) =
            (self.neighbours.unwrap_or(Neighbours::DEFAULT), self.placement.unwrap_or(Placement::DEFAULT));
        let common = CommonFlags {
            chosen,
            root_share,
            device: self.device,
            neighbours,
            placement,
            columns: self.columns.as_deref(),
            bounds: &bounds,
            dims,
        };
        // Each mechanism's part of the refusal table, all before any mechanism's options: a flag of a
        // mechanism that does not run is refused by name, and so is a common flag the running one cannot use.
        self.psmm.check(&common, self.pmm.depth.is_some())?;
        self.lowdim.check(&common)?;
        self.pmm.check(&common)?;
        self.microagg.check(&common)?;
        self.covloss.check(&common)?;
        self.encoding.check(&common)?;
        self.pe.check(&common)?;
        let unlisted = self.unlisted.unwrap_or(Unlisted::DEFAULT);
        let mechanism = match chosen.runs {
            // `auto` is PMM with the settings auto chooses.
            Mechanism::Pmm | Mechanism::Auto => MechanismOptions::Pmm(self.pmm.options(&common)?),
            Mechanism::Psmm => MechanismOptions::Psmm(self.psmm.options(&common)),
            Mechanism::Lowdim => {
                let inner = match chosen.inner {
                    InnerMechanism::Pmm => InnerOptions::Pmm(self.pmm.options(&common)?),
                    InnerMechanism::Psmm => InnerOptions::Psmm(self.psmm.options(&common)),
                };
                MechanismOptions::Lowdim(self.lowdim.options(&common, inner))
            }
            Mechanism::Pe => MechanismOptions::Pe(self.pe.options(&common)),
            Mechanism::Microagg => {
                MechanismOptions::Microagg(self.microagg.options(self.encoding.options(&common, &categories, unlisted)))
            }
            Mechanism::Covloss => MechanismOptions::Covloss(self.covloss.options(self.encoding.options(
                &common,
                &categories,
                unlisted,
            ))?),
        };
        let memory_limit = match self.memory_limit_mib {
            Some(mib) => Some(
                mib.checked_mul(1 << 20)
                    .ok_or_else(|| Error::bad_input(format!("--memory-limit-mib {mib} is too large")))?,
            ),
            None => None,
        };
        if self.nulls == Some(NullPolicy::Keep) && !mechanism.reads_mixed_columns() {
            return Err(Error::bad_input(format!(
                "--nulls keep applies to --mechanism auto, pmm and psmm; {} reads numbers only: give --nulls error \
                 or drop",
                mechanism.name()
            )));
        }
        // keep is read as error by the mechanisms that read numbers only (a library caller's default).
        let nulls = self.nulls.unwrap_or(NullPolicy::Keep);
        Ok(SynthOptions {
            epsilon,
            columns: self.columns,
            exclude: self.exclude,
            bounds,
            private_bounds: self.private_bounds,
            categories,
            unlisted,
            neighbours,
            mechanism,
            rows: self.rows,
            seed: self.seed,
            nulls,
            placement,
            row_order: self.row_order.unwrap_or(RowOrder::DEFAULT),
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

/// The pool of `threads` workers a run computes on. The OS refusing them is the environment's limit (`ulimit
/// -u`, `ulimit -v`, a control group), not a defect: exit 2, saying so.
pub fn worker_pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|error| {
        Error::bad_input(format!(
            "cannot start {threads} worker threads ({error}): the process's limits (ulimit -u, ulimit -v or its \
             control group) leave too little; raise them or give fewer --threads"
        ))
    })
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
    last_per_column(given, |bounds| &bounds.column)
}

/// Category lists given more than once for a column, as [`last_bounds_per_column`]: the last wins.
pub fn last_list_per_column(given: Vec<CategoryList>) -> Vec<CategoryList> {
    last_per_column(given, |list| &list.column)
}

fn last_per_column<T>(given: Vec<T>, column: impl Fn(&T) -> &String) -> Vec<T> {
    let mut kept: Vec<T> = Vec::new();
    for next in given {
        kept.retain(|existing| column(existing) != column(&next));
        kept.push(next);
    }
    kept
}

/// Names as a message lists them: 'a', 'b' and 'c'.
pub fn quoted_list(names: &[impl AsRef<str>]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("'{}'", name.as_ref())).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Chooses the bounds of the columns `eval` and `stream` use (they read numbers only): the `--columns`
/// list (or every column with bounds when it is absent), each of which must have public bounds in the
/// column's own unit.
pub fn bounds_for_columns(columns: Option<&[String]>, bounds: &[ColumnBounds]) -> Result<Vec<ColumnBounds>> {
    if let Some(dated) = bounds.iter().find(|bounds| bounds.instants) {
        return Err(Error::bad_input(format!(
            "--bounds {}: dates and timestamps in bounds apply to synth; here give them in the column's stored unit \
             (days for a date32 column, the timestamp's unit since 1970-01-01)",
            dated.column
        )));
    }
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
    use crate::mechanism::pmm::auto::{plain_below, AUTO_BOTTOM_UP};
    use crate::mechanism::pmm::averaging::PMM_BOTTOM_UP;
    use crate::privacy::DEFAULT_NOISY_N_SHARE;

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

    /// Every flag is declared once: no two share a name, and each mechanism's own are config keys too.
    #[test]
    fn each_mechanism_s_flags_are_config_keys() {
        use clap::CommandFactory;
        crate::cli::Cli::command().debug_assert();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("run.toml");
        std::fs::write(
            &config,
            "depth = 5\nbottom-up = \"average\"\ncells = 8\ntarget-dim = \"2\"\ndelta = 1e-6\npe-steps = 3\n\
             k = 4\ncells-from = \"k\"\nunlisted = \"other\"\ndamping = \"cells\"\ncovloss-shares = [\"1\", \"2\", \"3\"]\n\
             [categories]\na = [\"x\", \"y\"]\n",
        )
        .unwrap();
        let words = ["in.parquet", "--config", config.to_str().unwrap()].map(std::ffi::OsString::from);
        let args = crate::cli::parse_synth(words.to_vec()).unwrap();
        assert_eq!((args.pmm.depth, args.pmm.bottom_up), (Some(5), Some(BottomUp::Average)));
        assert_eq!((args.psmm.cells, args.lowdim.target_dim), (Some(8), Some(TargetDim::Fixed(2))));
        assert_eq!((args.pe.delta, args.pe.pe_steps), (Some(1e-6), Some(3)));
        assert_eq!((args.microagg.k, args.microagg.cells_from), (Some(4), Some(CellsFrom::K)));
        assert_eq!(
            (args.covloss.damping, args.covloss.covloss_shares),
            (Some(Damping::Cells), Some(vec![1.0, 2.0, 3.0]))
        );
        assert_eq!((args.categories.len(), args.unlisted), (1, Some(Unlisted::Other)));
    }

    /// `dpsynth synth --help` shows the common flags first, then each mechanism's under its heading.
    #[test]
    fn help_shows_each_mechanism_under_its_heading() {
        use clap::CommandFactory;
        let mut cli = crate::cli::Cli::command();
        let help = cli.find_subcommand_mut("synth").unwrap().render_help().to_string();
        let at = |text: &str| help.find(text).unwrap_or_else(|| panic!("{text} missing from {help}"));
        let order = [
            "--epsilon",
            "--categories",
            "--root-share",
            "PMM (",
            "--depth",
            "--bottom-up",
            "PSMM (",
            "--cells",
            "lowdim (",
            "--target-dim",
            "Private Evolution (",
            "--delta",
            "Encoded columns (",
            "--bins",
            "microagg (",
            "--k ",
            "covloss (",
            "--covloss-shares",
        ];
        for pair in order.windows(2) {
            assert!(at(pair[0]) < at(pair[1]), "{} before {} in {help}", pair[0], pair[1]);
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
        // eval and stream read a date column in its stored unit only.
        let dated: ColumnBounds = "day=2024-01-01:2025-01-01".parse().unwrap();
        let error = bounds_for_columns(None, &[dated]).unwrap_err();
        assert!(error.to_string().contains("stored unit"), "{error}");
    }

    #[test]
    fn a_memory_limit_that_overflows_is_refused() {
        let error = args(&["--bounds", "a=0:1", "--memory-limit-mib", "18446744073709551615"]).resolve().err().unwrap();
        assert!(error.to_string().contains("too large"));
    }
}
