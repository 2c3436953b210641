//! The `dpsynth` command line (docs/design.md). Names here are a stable interface: scripts depend on them.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::binner::NullPolicy;
use crate::config::config_arguments;
use crate::encoding::{BinCount, CategoryList, Unlisted};
use crate::error::{compact_number, Error, Result, EXIT_INTERNAL, EXIT_OK};
use crate::eval::command::TableInput;
use crate::eval::run_report::published_bounds;
use crate::eval::{EvalOptions, PairSelection};
use crate::generate::{bounds_toml, stage_table, Compression, GenerateSpec, Law, DEFAULT_ROW_GROUP_ROWS};
use crate::geometry::bounds::ColumnBounds;
use crate::io::paths::{check_output_paths, check_parquet_extension, NamedPath};
use crate::io::staging::{commit_all, write_file_atomically, StagedFile};
use crate::mechanism::AccuracyBound;
use crate::options::{check_output_rows, check_threads, last_bounds_per_column, worker_pool, SynthArgs};
use crate::progress::Progress;
use crate::synth::saved::SavedRelease;
use crate::synth::{synthesize, synthesize_and_save};

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
    /// Make an ε-DP synthetic copy of a Parquet table: numbers, dates, timestamps, categories, Booleans, nulls.
    #[command(override_usage = "dpsynth synth <INPUT> --epsilon <EPSILON> --output <OUTPUT> [OPTIONS]\n       \
                                dpsynth synth <INPUT> --config <CONFIG> [OPTIONS]  (ε and the output in the file)")]
    Synth(SynthArgs),
    /// Draw a synthetic table from a release saved by `synth --save-release`: no data read, no ε spent.
    Sample(SampleArgs),
    /// Compare a synthetic table with the real one: W1 and friends (owner only: reads the real data).
    Eval(EvalArgs),
    /// Show a Parquet file's or dataset's schema, row count, files and row groups, and what a synthetic file
    /// says of itself (nothing about the values); or write a config template for its columns.
    Inspect(InspectArgs),
    /// Write a synthetic test table (not private data: a generator for tests and benchmarks).
    Generate(GenerateArgs),
    /// Continual ε-DP release over a growing table: synthetic copies at chosen times t, resumable.
    Stream(crate::stream::StreamArgs),
}

#[derive(Args, Debug)]
struct EvalArgs {
    /// The real (sensitive) table: a Parquet file, a directory of them or a glob, as for synth.
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
    /// Columns to compare, in report order; name Boolean columns here (default: every column given public
    /// bounds, then every one given a category list).
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Public bounds COLUMN=LO:HI, repeatable; the same for both tables.
    #[arg(long = "bounds", value_name = "COLUMN=LO:HI")]
    bounds: Vec<ColumnBounds>,
    /// Real rows that synthesis did not read (a Parquet file or dataset, the real table's columns): adds the
    /// owner-only disclosure-risk figures and is the utility score's test set.
    #[arg(long)]
    holdout: Option<PathBuf>,
    /// Validity rules checked on every table, comma-separated (`distance / air_time * 60 <= 700`); in a
    /// config file `rules = ["...", "..."]`. Numbers, dates, timestamps and Booleans by column name.
    #[arg(long, value_name = "RULE,...")]
    rules: Vec<String>,
    /// The column of the utility score: a model of it trained on synthetic rows, tested on real ones.
    #[arg(long)]
    target: Option<String>,
    /// Rows drawn from each table for the detection score (a classifier telling real from synthetic); 0
    /// leaves it out [default: 4000].
    #[arg(long = "detection-rows")]
    detection_rows: Option<usize>,
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
    /// Column pairs of the pairwise 2-D W1 (about 0.03 s of CPU each): none, sample:K (K pairs drawn
    /// with --seed) or all [default: all up to 190 pairs (d = 20), else sample:190].
    #[arg(long, value_name = "none|sample:K|all")]
    pairs: Option<PairSelection>,
    /// Side of the grid W1 estimate (computed even when an exact method applies) [default: the finest
    /// grid within a budget of about 10^6 arcs, used only when no exact method fits].
    #[arg(long = "grid-side")]
    grid_side: Option<usize>,
    /// Rows with null/NaN/inf values: error or drop [default: error].
    #[arg(long, value_enum)]
    nulls: Option<NullPolicy>,
    /// The --real directory's Hive-style key=value folders become columns (as synth --hive-columns).
    #[arg(long = "hive-columns")]
    hive_columns: bool,
    /// Worker threads [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// No notes on stderr.
    #[arg(long)]
    quiet: bool,
    /// Instead of W1: MSE_d of d-way marginals (d = 1, 2, 3) and their max error on the Boolean / one-hot
    /// encoding of --columns (as covloss and microagg encode them: --categories, --bins, --bounds).
    #[arg(long)]
    marginals: bool,
    /// Public category list COLUMN=V1,V2,... of a categorical column (repeatable; or [categories] in the
    /// config); a value outside it is counted, not refused.
    #[arg(long = "categories", value_name = "COLUMN=V1,V2,...")]
    categories: Vec<CategoryList>,
    /// --marginals: K equal bins of a numeric column's public --bounds (repeatable).
    #[arg(long = "bins", value_name = "COLUMN=K")]
    bins: Vec<BinCount>,
    /// --marginals: a value outside its category list is an error or an 'other' bit [default: error].
    #[arg(long, value_enum)]
    unlisted: Option<Unlisted>,
}

/// `dpsynth sample`: a table drawn from a saved release (post-processing).
#[derive(Args, Debug)]
struct SampleArgs {
    /// The release, a file written by `synth --save-release` (docs/release-format.md); refused if it is
    /// damaged, truncated, of another format version or not a saved release.
    release: PathBuf,
    /// Where the synthetic table goes (written atomically), with synth's columns, names and types.
    #[arg(long, short)]
    output: PathBuf,
    /// Output rows, at most 10^12 (default: the released row count).
    #[arg(long)]
    rows: Option<u64>,
    /// The placement coins of `synth --seed SEED`: with the synth run's own seed (and the same --rows and
    /// row order) the table is the one synth wrote. Without it the coins come from the OS: a new table
    /// each time. Either way the release's noise is not redrawn and no budget is spent.
    #[arg(long)]
    seed: Option<u64>,
    /// Order of the output rows: random or cells (see synth --row-order) [default: the synth run's].
    #[arg(long, value_enum)]
    row_order: Option<crate::sampler::RowOrder>,
    /// Publishable report of this table (JSON): the synth run's report, this table's rows, and a `sample`
    /// section saying it was drawn from the saved release and spent no ε.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Worker threads, at most 1024 and 64 per core [default: all cores]; the table is the same for any.
    #[arg(long)]
    threads: Option<usize>,
    /// No progress bars or summary.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct InspectArgs {
    /// A Parquet file, a directory of them or a glob, as for synth.
    input: PathBuf,
    /// A directory input's Hive-style key=value folders are listed as columns (as synth --hive-columns).
    #[arg(long = "hive-columns")]
    hive_columns: bool,
    /// Write a config file for synth here: every column with its type and a placeholder domain to fill in
    /// from public knowledge (from the schema alone, never the values).
    #[arg(long = "config-template", value_name = "FILE")]
    config_template: Option<PathBuf>,
    /// Replace an existing --config-template file (without it, an existing file is an error).
    #[arg(long)]
    force: bool,
}

#[derive(Args, Debug)]
struct GenerateArgs {
    /// The Parquet file to write (atomically).
    output: PathBuf,
    /// Rows of the table, at most 10^12.
    #[arg(long)]
    rows: u64,
    /// Float64 columns x0, x1, ... of the table, each with public bounds 0:1.
    #[arg(long)]
    dims: usize,
    /// The law of the rows: uniform, mixture, skewed, heavy-tailed, subspace:K, latent-class:K or ball:R
    /// (uniform in a ball of radius R/2 at the cube's centre).
    #[arg(long, default_value = "mixture")]
    law: Law,
    /// Seed of the rows (the same seed writes the same table).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Compression of the file: none, snappy or zstd.
    #[arg(long, default_value = "none")]
    compression: Compression,
    /// Rows per row group.
    #[arg(long, default_value_t = DEFAULT_ROW_GROUP_ROWS)]
    row_group_rows: usize,
    /// Also write the table's public bounds as a config file here.
    #[arg(long)]
    schema: Option<PathBuf>,
    /// Replace existing files at OUTPUT and --schema (without it, an existing file is an error).
    #[arg(long)]
    force: bool,
}

/// Runs the CLI and returns the process exit code. Panics are caught and reported as internal errors.
pub fn main() -> i32 {
    crate::io::source::silence_decoder_panics();
    if let Err(error) = crate::io::staging::remove_temporaries_on_signal() {
        eprintln!("error: {error}");
        return error.exit_code();
    }
    let cli = match parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(ParseFailure::Usage(error)) => {
            let _ = error.print();
            return error.exit_code();
        }
        Err(ParseFailure::Config(error)) => {
            eprintln!("error: {error}");
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

/// `synth`'s arguments from the words after `dpsynth synth`, a `--config` file's keys read as the command
/// line reads them: library callers (the Python package) parse their options here, so each keeps its
/// flag's name, checks and default.
pub fn parse_synth(words: Vec<OsString>) -> Result<SynthArgs> {
    match parse_subcommand("synth", words)? {
        Command::Synth(args) => Ok(args),
        _ => Err(Error::internal("parsed synth's arguments as another command")),
    }
}

/// `eval`'s request, worker threads and quietness from the words after `dpsynth eval`, as [`parse_synth`].
pub fn parse_eval(words: Vec<OsString>) -> Result<(crate::eval::command::EvalRequest, usize, bool)> {
    match parse_subcommand("eval", words)? {
        Command::Eval(args) if args.marginals => {
            Err(Error::bad_input("eval --marginals reads its tables from Parquet files: run it from the command line"))
        }
        Command::Eval(args) => eval_request(args, None),
        _ => Err(Error::internal("parsed eval's arguments as another command")),
    }
}

fn parse_subcommand(name: &str, words: Vec<OsString>) -> Result<Command> {
    let argv: Vec<OsString> = ["dpsynth", name].into_iter().map(OsString::from).chain(words).collect();
    match parse(argv) {
        Ok(cli) => Ok(cli.command),
        Err(ParseFailure::Config(error)) => Err(error),
        Err(ParseFailure::Usage(error)) => {
            let rendered = error.render().to_string();
            let reason = rendered.lines().next().unwrap_or_default();
            Err(Error::bad_input(reason.strip_prefix("error: ").unwrap_or(reason).to_string()))
        }
    }
}

enum ParseFailure {
    Usage(clap::Error),
    Config(Error),
}

/// Parses the command line; a `--config` file's keys are read as arguments placed before the command
/// line's own (see [`crate::config`]), and the whole is parsed again.
fn parse(argv: Vec<OsString>) -> std::result::Result<Cli, ParseFailure> {
    let mut command = Cli::command();
    let matches = command.try_get_matches_from_mut(&argv).map_err(ParseFailure::Usage)?;
    let config = matches.subcommand().and_then(|(name, given)| {
        let path = given.try_get_one::<PathBuf>("config").ok().flatten()?;
        Some((name.to_string(), path.clone(), given.clone()))
    });
    let Some((name, path, given)) = config else {
        return Cli::from_arg_matches(&matches).map_err(ParseFailure::Usage);
    };
    let target = command.find_subcommand(&name).expect("the parsed subcommand exists");
    // A config file serves synth and eval: each skips the other's keys (eval's `rules`, synth's `epsilon`).
    let other = if name == "synth" { "eval" } else { "synth" };
    let tolerated = command.find_subcommand(other);
    let extra = config_arguments(&path, target, &given, tolerated).map_err(ParseFailure::Config)?;
    // The subcommand is the first argument (dpsynth has no global options besides --help/--version).
    let mut full: Vec<OsString> = argv[..2].to_vec();
    full.extend(extra);
    full.extend_from_slice(&argv[2..]);
    Cli::try_parse_from(full).map_err(|error| {
        let rendered = error.render().to_string();
        let reason = rendered.lines().next().unwrap_or_default();
        let reason = reason.strip_prefix("error: ").unwrap_or(reason);
        ParseFailure::Config(Error::in_file(&path, format!("invalid config file: {reason}")))
    })
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Synth(args) => run_synth(args),
        Command::Sample(args) => run_sample(args),
        Command::Inspect(args) => run_inspect(args),
        Command::Eval(args) => run_eval(args),
        Command::Generate(args) => run_generate(args),
        Command::Stream(args) => crate::stream::run_command(args),
    }
}

fn run_synth(args: SynthArgs) -> Result<()> {
    let config = args.config.clone();
    let request = args.resolve()?;
    #[cfg(feature = "mpi")]
    if crate::cluster::mpi::launched_by_mpi() {
        if request.save_release.is_some() {
            return Err(Error::bad_input("--save-release runs on one machine: leave it out under mpirun"));
        }
        std::process::exit(crate::cluster::mpi::run_synth(request));
    }
    let (options, outputs, quiet) = (&request.options, &request.outputs, request.quiet);
    if let Some(config) = &config {
        check_output_paths(&[NamedPath::new("the --config file", config)], &outputs.named())?;
    }
    if let Some(warning) = crate::privacy::epsilon_warning(options.epsilon).filter(|_| !quiet) {
        eprintln!("warning: {warning}");
    }
    let progress = Progress::for_terminal(quiet);
    let outcome = match &request.save_release {
        None => synthesize(&request.input, outputs, options, &progress)?,
        Some(saved) => synthesize_and_save(&request.input, outputs, saved, options, &progress)?,
    };
    if quiet {
        return Ok(());
    }
    let report = &outcome.report;
    if report.guarantee.anonymity.is_some() {
        eprintln!(
            "wrote {} synthetic rows to {} ({}; anonymity, NOT differential privacy)",
            report.release.synthetic_rows,
            outputs.table.display(),
            report.parameters.summary(),
        );
    } else {
        eprintln!(
            "wrote {} synthetic rows to {} (ε = {}, {}, {}); {}{}",
            report.release.synthetic_rows,
            outputs.table.display(),
            compact_number(report.guarantee.epsilon),
            options.neighbours.describe().split(':').next().unwrap_or_default(),
            report.parameters.summary(),
            accuracy_statement(&report.accuracy),
            if report.guarantee.fit_for_release { "" } else { "; seeded run: NOT fit for release" },
        );
    }
    // The true row count is not private: it stays out of logs others read unless asked for.
    if request.owner_summary || std::io::stderr().is_terminal() {
        let diagnostics = &outcome.diagnostics;
        eprintln!(
            "NOT PRIVATE (owner only): {} rows binned, {} dropped, {} clamped; {:.2}s",
            diagnostics.true_rows,
            diagnostics.rows_dropped,
            diagnostics.rows_clamped,
            diagnostics.timings_seconds.iter().map(|timing| timing.seconds).sum::<f64>(),
        );
    }
    Ok(())
}

/// What the run's accuracy bound says of the table written, in a clause.
fn accuracy_statement(accuracy: &AccuracyBound) -> String {
    let bound = accuracy.expected_w1_bound;
    // W1 ≤ diam [0,1]^d = 1 always: a larger (or undefined) value says nothing.
    let meaningful = bound.is_finite() && bound < 1.0;
    match (accuracy.holds_for_table, meaningful) {
        (true, true) => format!("expected W1 ≤ {bound:.4} normalised"),
        (true, false) => "the proven W1 bound is vacuous at this size (≥ 1, the cube's diameter)".to_string(),
        (false, true) => format!(
            "no W1 bound is proven for this table (its columns were mapped onto released marginals); the joint tree \
             before the maps has expected W1 ≤ {bound:.4} normalised"
        ),
        (false, false) => {
            "no W1 bound is proven for this table (its columns were mapped onto released marginals)".to_string()
        }
    }
}

fn run_inspect(args: InspectArgs) -> Result<()> {
    let Some(template) = &args.config_template else {
        print!("{}", crate::inspect::describe(&args.input, args.hive_columns)?);
        return Ok(());
    };
    check_output_paths(&[NamedPath::new("the input", &args.input)], &[NamedPath::new("--config-template", template)])?;
    if !args.force && template.exists() {
        return Err(Error::in_file(template, "--config-template exists; pass --force to replace it"));
    }
    write_file_atomically(template, crate::inspect::config_template(&args.input, args.hive_columns)?.as_bytes())?;
    eprintln!(
        "wrote {}: fill in each domain from public knowledge, then pass it to synth --config",
        template.display()
    );
    Ok(())
}

fn run_sample(args: SampleArgs) -> Result<()> {
    check_output_rows("--rows", args.rows)?;
    check_parquet_extension(&args.output, "--output")?;
    if let Some(threads) = args.threads {
        check_threads(threads)?;
    }
    let outputs = crate::io::paths::OutputPaths { table: args.output, report: args.report, diagnostics: None };
    check_output_paths(&[NamedPath::new("the saved release", &args.release)], &outputs.named())?;
    let mut release = SavedRelease::load(&args.release, args.seed, args.threads)?;
    if let Some(order) = args.row_order {
        release.set_row_order(order);
    }
    let report = release.write(&outputs, args.rows, &Progress::for_terminal(args.quiet))?;
    if !args.quiet {
        eprintln!(
            "wrote {} synthetic rows to {} (drawn from the saved release {}: no data read, no ε spent)",
            report["release"]["synthetic_rows"],
            outputs.table.display(),
            args.release.display()
        );
    }
    Ok(())
}

fn run_eval(args: EvalArgs) -> Result<()> {
    if args.marginals {
        return run_eval_marginals(args);
    }
    // Without bounds, the run's own public domain: from its report, else the synthetic table's footer.
    let published = match args.bounds.is_empty() {
        true => published_bounds(&args.run_report, &args.synth)?,
        false => None,
    };
    if let Some(published) = published.as_ref().filter(|_| !args.quiet) {
        eprintln!("eval: the public bounds of {}", published.from);
        if !published.not_compared.is_empty() {
            eprintln!("eval: not compared (eval compares numbers): {}", published.not_compared.join(", "));
        }
    }
    let (request, threads, quiet) = eval_request(args, published.map(|published| published.bounds))?;
    let pool = worker_pool(threads)?;
    pool.install(|| {
        let done = crate::eval::command::run(&request, &Progress::for_terminal(quiet))?;
        if let Some(text) = &done.stdout {
            print!("{text}");
        }
        if !quiet {
            // The printed summary carries the warnings already; with --json they go to stderr.
            let printed = done.stdout.is_some();
            for warning in done.output.comparisons.iter().flat_map(|report| &report.warnings).filter(|_| !printed) {
                eprintln!("warning: {warning}");
            }
            eprintln!("NOT PRIVATE (owner only): these numbers are computed from the real data");
        }
        Ok(())
    })
}

/// The request of a W1 `eval`, its worker threads and whether it is quiet; `published`: the bounds of the
/// run, where it was given none of its own.
fn eval_request(
    args: EvalArgs,
    published: Option<Vec<ColumnBounds>>,
) -> Result<(crate::eval::command::EvalRequest, usize, bool)> {
    if !args.bins.is_empty() || args.unlisted.is_some() {
        return Err(Error::bad_input("--bins and --unlisted apply to eval --marginals only"));
    }
    let mut options = EvalOptions::new(last_bounds_per_column(published.unwrap_or(args.bounds)));
    options.categories = crate::options::last_list_per_column(args.categories);
    options.columns = args.columns;
    if options.domains().names().is_empty() {
        return Err(Error::bad_input(
            "no columns to compare: give --bounds COLUMN=LO:HI or --categories COLUMN=A,B,... for each (or a \
             config file with [bounds] and [categories]), or --run-report with the synth run's report",
        ));
    }
    options.nulls = args.nulls.unwrap_or(options.nulls);
    options.rules = args.rules.iter().flat_map(|rules| crate::eval::rules::split_rules(rules)).collect();
    options.target = args.target;
    options.detection_rows = args.detection_rows.unwrap_or(options.detection_rows);
    options.real_hive_columns = args.hive_columns;
    if args.grid_side == Some(0) {
        return Err(Error::bad_input("--grid-side must be at least 1"));
    }
    options.grid_side = args.grid_side;
    options.pairs = args.pairs;
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    check_threads(threads)?;
    let subsample = &mut options.subsample;
    subsample.rows = args.subsample_rows.unwrap_or(subsample.rows);
    subsample.repeats = args.subsample_repeats.unwrap_or(subsample.repeats);
    subsample.seed = args.seed.unwrap_or(subsample.seed);
    let request = crate::eval::command::EvalRequest {
        real: TableInput::File(args.real),
        synths: args.synth.into_iter().map(TableInput::File).collect(),
        run_reports: args.run_report,
        holdout: args.holdout.map(TableInput::File),
        json: args.json,
        report_dir: args.report_dir,
        options,
    };
    Ok((request, threads, args.quiet))
}

/// `eval --marginals`: the covariance-loss paper's MSE_d on the encoded columns of each synthetic table.
fn run_eval_marginals(args: EvalArgs) -> Result<()> {
    use crate::encoding::read::read_bits;
    use crate::encoding::{Encoding, EncodingSpec};
    let spec = EncodingSpec {
        columns: args.columns.clone().ok_or_else(|| Error::bad_input("eval --marginals needs --columns"))?,
        categories: args.categories.clone(),
        bins: args.bins.clone(),
        bounds: last_bounds_per_column(args.bounds.clone()),
        unlisted: args.unlisted.unwrap_or(Unlisted::Error),
    };
    if args.pairs.is_some() {
        return Err(Error::bad_input(
            "--pairs chooses the column pairs of the W1 comparison; eval --marginals compares the encoded \
             columns' marginals and has no pairs to choose",
        ));
    }
    if args.report_dir.is_some() {
        return Err(Error::bad_input(
            "--report-dir writes the page of the W1 comparison; eval --marginals writes its errors as JSON \
             (--json FILE, or standard output)",
        ));
    }
    let mut inputs = vec![NamedPath::new("the input --real", &args.real)];
    inputs.extend(args.synth.iter().map(|synth| NamedPath::new("the input --synth", synth)));
    inputs.extend(args.run_report.iter().map(|report| NamedPath::new("the input --run-report", report)));
    let outputs: Vec<NamedPath> = args.json.iter().map(|json| NamedPath::new("--json", json)).collect();
    check_output_paths(&inputs, &outputs)?;
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    check_threads(threads)?;
    let pool = worker_pool(threads)?;
    let progress = Progress::hidden();
    pool.install(|| {
        let read = |path: &std::path::Path, hive_columns: bool| -> Result<_> {
            let source = crate::io::source::Source::open_with(path, hive_columns)?;
            let encoding = Encoding::resolve(&source, &spec)?;
            read_bits(&source, &encoding, &progress)
        };
        let real = read(&args.real, args.hive_columns)?;
        let mut comparisons = Vec::new();
        for synth in &args.synth {
            let synthetic = read(synth, false)?;
            if synthetic.bits != real.bits {
                return Err(Error::in_file(synth, "encodes to another number of bits than the real table"));
            }
            let report = crate::eval::marginals::marginal_errors(&real, &synthetic, args.seed.unwrap_or(0));
            comparisons.push(serde_json::json!({ "synth": synth.display().to_string(), "marginals": report }));
        }
        let json = serde_json::json!({ "real": args.real.display().to_string(), "comparisons": comparisons });
        let text = serde_json::to_string_pretty(&json)
            .map_err(|error| Error::internal(format!("serialising the marginal errors: {error}")))?;
        match &args.json {
            Some(path) => write_file_atomically(path, text.as_bytes())?,
            None => println!("{text}"),
        }
        if !args.quiet {
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
    check_output_rows("--rows", Some(args.rows))?;
    check_parquet_extension(&args.output, "OUTPUT")?;
    let mut outputs = vec![NamedPath::new("OUTPUT", &args.output)];
    outputs.extend(args.schema.as_deref().map(|schema| NamedPath::new("--schema", schema)));
    check_output_paths(&[], &outputs)?;
    if !args.force {
        if let Some(existing) = outputs.iter().find(|output| output.path.exists()) {
            return Err(Error::in_file(existing.path, format!("{} exists; pass --force to replace it", existing.role)));
        }
    }
    // Both files are staged before either replaces what is there: a schema that cannot be written leaves
    // the old table in place.
    let schema = match &args.schema {
        Some(path) => Some(StagedFile::with_bytes(path, bounds_toml(&spec).as_bytes())?),
        None => None,
    };
    let (table, _) = stage_table(&args.output, &spec).map_err(|error| Error::bad_input(error.to_string()))?;
    commit_all([table].into_iter().chain(schema).collect())
}
