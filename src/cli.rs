//! The `dpsynth` command line (SPEC §6). Names here are a stable interface: scripts depend on them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::binner::NullPolicy;
use crate::bounds::ColumnBounds;
use crate::consistency::ConsistencyRule;
use crate::error::{Error, Result, EXIT_INTERNAL, EXIT_OK};
use crate::eval::EvalOptions;
use crate::generate::{
    bounds_toml, write_table, Compression, GenerateSpec, Law, DEFAULT_ROW_GROUP_ROWS,
};
use crate::options::{
    bounds_for_columns, ConfigFile, DeviceChoice, InnerMechanism, Mechanism, SynthOptions, TargetDim,
};
use crate::privacy::Neighbours;
use crate::progress::Progress;
use crate::sampler::Placement;
use crate::synth::{synthesize, OutputPaths};

#[derive(Parser, Debug)]
#[command(
    name = "dpsynth",
    version,
    about = "Differentially private synthetic tables close to the original in Wasserstein distance"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Make an ε-DP synthetic copy of numeric Parquet columns.
    Synth(SynthArgs),
    /// Compare a synthetic table with the real one: W1 and friends (owner only: reads the real data).
    Eval(EvalArgs),
    /// Show a Parquet file's schema, row count and row groups (nothing about its values).
    Inspect { input: PathBuf },
    /// Write a synthetic test table (not private data: a generator for tests and benchmarks).
    Generate(GenerateArgs),
}

#[derive(Args, Debug)]
struct SynthArgs {
    /// The sensitive input table.
    input: PathBuf,
    /// Where the synthetic table goes (written atomically).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Privacy budget ε (> 0).
    #[arg(long, allow_negative_numbers = true)]
    epsilon: Option<f64>,
    /// Columns to use (default: every column given public bounds).
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Public bounds COLUMN=LO:HI, repeatable. Never derived from the data.
    #[arg(long = "bounds", value_name = "COLUMN=LO:HI")]
    bounds: Vec<ColumnBounds>,
    /// A TOML file with any of these options (the command line wins).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Mechanism [default: pmm].
    #[arg(long, value_enum)]
    mechanism: Option<Mechanism>,
    /// psmm: number of equal cubes m [default: about εn as in the paper, at most 10^6].
    #[arg(long)]
    cells: Option<u64>,
    /// lowdim: subspace dimension d', or `auto` to choose it privately from the noisy spectrum [default: auto].
    #[arg(long, value_name = "D|auto")]
    target_dim: Option<TargetDim>,
    /// lowdim: mechanism run on the projected coordinates [default: pmm].
    #[arg(long, value_enum)]
    inner_mechanism: Option<InnerMechanism>,
    /// lowdim under add-remove: share of ε spent on a noisy row count (required there).
    #[arg(long, allow_negative_numbers = true)]
    noisy_n_share: Option<f64>,
    /// Neighbouring relation of the guarantee [default: add-remove].
    #[arg(long, value_enum)]
    neighbours: Option<Neighbours>,
    /// Leaf depth r (default: chosen to minimise the accuracy bound).
    #[arg(long)]
    depth: Option<u32>,
    /// Share of ε spent on the noisy row count that fixes the depth under add-remove [default: 1/16].
    #[arg(long, allow_negative_numbers = true)]
    root_share: Option<f64>,
    /// Output rows (default: the released row count).
    #[arg(long)]
    rows: Option<u64>,
    /// Reproducible run; the report then says it is not fit for release.
    #[arg(long)]
    seed: Option<u64>,
    /// Rows with null/NaN/inf values: error or drop [default: error].
    #[arg(long, value_enum)]
    nulls: Option<NullPolicy>,
    /// Consistency rule [default: uniform].
    #[arg(long, value_enum)]
    consistency: Option<ConsistencyRule>,
    /// Where points go in their leaf cell [default: uniform].
    #[arg(long, value_enum)]
    placement: Option<Placement>,
    /// Binning device [default: auto].
    #[arg(long, value_enum)]
    device: Option<DeviceChoice>,
    /// Worker threads [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Memory the cell arrays may use, in MiB [default: half the machine].
    #[arg(long = "memory-limit-mib")]
    memory_limit_mib: Option<u64>,
    /// Publishable run report (JSON).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Owner-only diagnostics (JSON; NOT private).
    #[arg(long)]
    diagnostics: Option<PathBuf>,
    /// No progress bars or summaries.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct EvalArgs {
    /// The real (sensitive) table.
    #[arg(long)]
    real: PathBuf,
    /// The synthetic table; repeat to compare several side by side (the same real subsamples for each).
    #[arg(long, required = true)]
    synth: Vec<PathBuf>,
    /// The `synth --report` of the run that made a synthetic table, shown beside it; the k-th describes
    /// the k-th --synth (tables after the last have none).
    #[arg(long = "run-report")]
    run_report: Vec<PathBuf>,
    /// Rows per subsample of the exact-transport estimate (at most 2048) [default: 1000].
    #[arg(long = "subsample-rows")]
    subsample_rows: Option<usize>,
    /// Repeats of the exact-transport estimate; 0 leaves it out [default: 5].
    #[arg(long = "subsample-repeats")]
    subsample_repeats: Option<usize>,
    /// Seed of the subsample draws [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    /// Columns to compare (default: every column given public bounds).
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Public bounds COLUMN=LO:HI, repeatable; the same for both tables.
    #[arg(long = "bounds", value_name = "COLUMN=LO:HI")]
    bounds: Vec<ColumnBounds>,
    /// A synth config file: its `columns`, `[bounds]`, `nulls`, `threads` and `quiet` apply (the command
    /// line wins); its other keys are ignored.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Write every number as JSON here (atomically) instead of printing a summary.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a report page with plots here (index.html, index.md, SVGs, eval.json).
    #[arg(long = "report-dir")]
    report_dir: Option<PathBuf>,
    /// Side of the grid W1 estimate (computed even when an exact method applies) [default: the finest
    /// grid within a budget of about 10^6 arcs, used only when no exact method fits].
    #[arg(long = "grid-side")]
    grid_side: Option<usize>,
    /// Rows with null/NaN/inf values: error or drop [default: error].
    #[arg(long, value_enum)]
    nulls: Option<NullPolicy>,
    /// Worker threads [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// No notes on stderr.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct GenerateArgs {
    output: PathBuf,
    #[arg(long)]
    rows: u64,
    #[arg(long)]
    dims: usize,
    /// uniform, mixture, skewed or subspace:K.
    #[arg(long, default_value = "mixture")]
    law: Law,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// none, snappy or zstd.
    #[arg(long, default_value = "none")]
    compression: Compression,
    #[arg(long, default_value_t = DEFAULT_ROW_GROUP_ROWS)]
    row_group_rows: usize,
    /// Also write the table's public bounds as a config file here.
    #[arg(long)]
    schema: Option<PathBuf>,
}

/// Runs the CLI and returns the process exit code. Panics are caught and reported as internal errors.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return error.exit_code();
        }
    };
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => EXIT_OK,
        Ok(Err(error)) => {
            eprintln!("error: {error}");
            error.exit_code()
        }
        Err(_) => {
            eprintln!("error: internal error (a bug in dpsynth); nothing was written");
            EXIT_INTERNAL
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Synth(args) => run_synth(args),
        Command::Inspect { input } => {
            print!("{}", crate::inspect::describe(&input)?);
            Ok(())
        }
        Command::Eval(args) => run_eval(args),
        Command::Generate(args) => run_generate(args),
    }
}

fn run_synth(args: SynthArgs) -> Result<()> {
    let config = match &args.config {
        Some(path) => ConfigFile::load(path)?,
        None => ConfigFile::default(),
    };
    let mut bounds = match &args.config {
        Some(path) => config.bounds_list(path)?,
        None => Vec::new(),
    };
    for given in args.bounds {
        bounds.retain(|existing| existing.column != given.column);
        bounds.push(given);
    }
    let columns = args.columns.or(config.columns);
    let epsilon = args
        .epsilon
        .or(config.epsilon)
        .ok_or_else(|| Error::bad_input("--epsilon is required"))?;
    let mut options = SynthOptions::new(epsilon, bounds_for_columns(columns.as_deref(), &bounds)?);
    options.mechanism = args
        .mechanism
        .or(config.mechanism)
        .unwrap_or(options.mechanism);
    options.cells = args.cells.or(config.cells);
    options.target_dim = args.target_dim.or(config.target_dim);
    options.inner_mechanism = args
        .inner_mechanism
        .or(config.inner_mechanism)
        .unwrap_or(options.inner_mechanism);
    options.noisy_n_share = args.noisy_n_share.or(config.noisy_n_share);
    options.neighbours = args
        .neighbours
        .or(config.neighbours)
        .unwrap_or(options.neighbours);
    options.depth = args.depth.or(config.depth);
    options.root_share = args
        .root_share
        .or(config.root_share)
        .unwrap_or(options.root_share);
    options.rows = args.rows.or(config.rows);
    options.seed = args.seed.or(config.seed);
    options.nulls = args.nulls.or(config.nulls).unwrap_or(options.nulls);
    options.consistency = args
        .consistency
        .or(config.consistency)
        .unwrap_or(options.consistency);
    options.placement = args
        .placement
        .or(config.placement)
        .unwrap_or(options.placement);
    options.device = args.device.or(config.device).unwrap_or(options.device);
    options.threads = args.threads.or(config.threads);
    options.memory_limit = args
        .memory_limit_mib
        .map(|mib| mib << 20)
        .or(config.memory_limit);
    let outputs = OutputPaths {
        table: args
            .output
            .or(config.output)
            .ok_or_else(|| Error::bad_input("--output is required"))?,
        report: args.report.or(config.report),
        diagnostics: args.diagnostics.or(config.diagnostics),
    };
    let quiet = args.quiet || config.quiet.unwrap_or(false);
    let progress = Progress::for_terminal(quiet);
    let outcome = synthesize(&args.input, &outputs, &options, &progress)?;
    if !quiet {
        let report = &outcome.report;
        let bound = report.accuracy.expected_w1_bound;
        // W1 ≤ diam [0,1]^d = 1 always: a larger theorem value says nothing, and the line says so.
        let accuracy = if bound < 1.0 {
            format!("expected W1 ≤ {bound:.4} normalised")
        } else {
            format!("the proven W1 bound ({bound:.2}) is vacuous at this size")
        };
        eprintln!(
            "wrote {} synthetic rows to {} (ε = {}, {}, {}, {accuracy}){}",
            report.release.synthetic_rows,
            outputs.table.display(),
            report.guarantee.epsilon,
            options.neighbours.describe().split(':').next().unwrap_or_default(),
            report.parameters.summary(),
            if report.guarantee.fit_for_release { "" } else { "; seeded run: NOT fit for release" },
        );
        let diagnostics = &outcome.diagnostics;
        eprintln!(
            "NOT PRIVATE (owner only): {} rows binned, {} dropped, {} clamped; {:.2}s",
            diagnostics.true_rows,
            diagnostics.rows_dropped,
            diagnostics.rows_clamped,
            diagnostics
                .timings_seconds
                .iter()
                .map(|timing| timing.seconds)
                .sum::<f64>(),
        );
    }
    Ok(())
}

fn run_eval(args: EvalArgs) -> Result<()> {
    let config = match &args.config {
        Some(path) => ConfigFile::load(path)?,
        None => ConfigFile::default(),
    };
    let mut bounds = match &args.config {
        Some(path) => config.bounds_list(path)?,
        None => Vec::new(),
    };
    for given in args.bounds {
        bounds.retain(|existing| existing.column != given.column);
        bounds.push(given);
    }
    let columns = args.columns.or(config.columns);
    let mut options = EvalOptions::new(bounds_for_columns(columns.as_deref(), &bounds)?);
    if options.bounds.is_empty() {
        return Err(Error::bad_input(
            "no columns to compare: give --bounds COLUMN=LO:HI for each (or a config file with [bounds])",
        ));
    }
    options.nulls = args.nulls.or(config.nulls).unwrap_or(options.nulls);
    if args.grid_side == Some(0) {
        return Err(Error::bad_input("--grid-side must be at least 1"));
    }
    options.grid_side = args.grid_side;
    let threads = args
        .threads
        .or(config.threads)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    if threads == 0 {
        return Err(Error::bad_input("--threads must be at least 1"));
    }
    let quiet = args.quiet || config.quiet.unwrap_or(false);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|error| Error::internal(format!("cannot start {threads} threads: {error}")))?;
    let subsample = &mut options.subsample;
    subsample.rows = args.subsample_rows.unwrap_or(subsample.rows);
    subsample.repeats = args.subsample_repeats.unwrap_or(subsample.repeats);
    subsample.seed = args.seed.unwrap_or(subsample.seed);
    let request = crate::eval::command::EvalRequest {
        real: args.real,
        synths: args.synth,
        run_reports: args.run_report,
        json: args.json,
        report_dir: args.report_dir,
        options,
    };
    pool.install(|| {
        let done = crate::eval::command::run(&request)?;
        if let Some(text) = done.stdout {
            print!("{text}");
        }
        if !quiet {
            for warning in done.output.comparisons.iter().flat_map(|report| &report.warnings) {
                eprintln!("warning: {warning}");
            }
            eprintln!("NOT PRIVATE (owner only): these numbers are computed from the real data");
        }
        Ok(())
    })
}

fn run_generate(args: GenerateArgs) -> Result<()> {
    let spec = GenerateSpec {
        rows: args.rows,
        dims: args.dims,
        law: args.law,
        seed: args.seed,
        compression: args.compression,
        row_group_rows: args.row_group_rows,
    };
    write_table(&args.output, &spec).map_err(|error| Error::bad_input(error.to_string()))?;
    if let Some(schema) = &args.schema {
        crate::sink::write_file_atomically(schema, bounds_toml(&spec).as_bytes())?;
    }
    Ok(())
}
