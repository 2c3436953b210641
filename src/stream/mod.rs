//! `dpsynth stream`: continual release over a growing table (docs/mechanisms/online.md).
//!
//! The inputs (files, directories read as their *.parquet files in path order, globs) are concatenated, rows in file
//! order: row i is the stream element x_i. They continue the stream held by `--state` (made on the first
//! run), and at each requested time t the run writes `release-t.parquet` (exactly t rows, the input's
//! column names and types) and its publishable report `release-t.json`. The state is saved atomically
//! after each input file; it is refused if the parameters differ or if an input was already read.

mod held_state;
pub mod report;

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use clap::Args;

use crate::binner::{quantize_values, AxisPlan, ROW_INVALID};
use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::geometry::partition::CellGeometry;
use crate::io::paths::{is_inside_directory, refuse_special_file, same_file};
use crate::io::sink::ParquetSink;
use crate::io::source::column::NumericValues;
use crate::io::source::dataset::expand_input;
use crate::io::source::{NumericColumn, Source};
use crate::io::staging::{commit_all, StagedFile};
use crate::mechanism::online::state::{
    fnv1a, FileFingerprint, OnlineState, StateColumn, StreamParameters, FOOTER_BYTES,
};
use crate::mechanism::online::{OnlinePlan, OnlineTree, MAX_ONLINE_DEPTH};
use crate::mechanism::ReleasedMeasure;
use crate::options::{bounds_for_columns, check_threads, last_bounds_per_column, worker_pool};
use crate::privacy::{check_epsilon, Budget, NoiseKey, RunSeeds};
use crate::progress::{Progress, Timings};
use crate::sampler::{Placement, RowOrder};
use crate::synth::report::{PublicDomain, TableMetadata};
use crate::synth::write_rows;
use held_state::HeldState;
use report::StreamReleaseReport;

/// Elements gathered (as cell codes, 4 bytes each) before they are fed to the tree: every feed looks at
/// every cell once, so fewer, larger feeds cost less at large t.
const FEED_ELEMENTS: usize = 1 << 20;

/// `dpsynth stream`: every option, declared once.
#[derive(Args, Debug, Clone, Default)]
pub struct StreamArgs {
    /// Parquet files, directories (their *.parquet files at any depth, in path order) or globs, in stream order.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The stream's state: made on the first run, continued by later ones. SENSITIVE (exact counts and
    /// the noise key): keep it as private as the data.
    #[arg(long)]
    pub state: PathBuf,
    /// Privacy budget ε (> 0) of the whole sequence of releases.
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// Columns to use (default: every column given public bounds).
    #[arg(long, value_delimiter = ',')]
    pub columns: Option<Vec<String>>,
    /// Public bounds COLUMN=LO:HI, repeatable. Never derived from the data.
    #[arg(long = "bounds", value_name = "COLUMN=LO:HI")]
    pub bounds: Vec<ColumnBounds>,
    /// Refused: a stream's bounds must be public before its first rows arrive (synth's --private-bounds
    /// releases them from the whole table).
    #[arg(long = "private-bounds", value_name = "SHARE", hide = true, allow_negative_numbers = true)]
    pub private_bounds: Option<f64>,
    /// Release at these times t (comma-separated stream positions).
    #[arg(long = "release-at", value_delimiter = ',')]
    pub release_at: Vec<u64>,
    /// Release at every multiple of K.
    #[arg(long = "release-every", value_name = "K")]
    pub release_every: Option<u64>,
    /// Release once the inputs are read.
    #[arg(long = "release-at-end")]
    pub release_at_end: bool,
    /// Where release-t.parquet goes.
    #[arg(long = "output-dir")]
    pub output_dir: Option<PathBuf>,
    /// Where release-t.json goes [default: the output directory].
    #[arg(long = "report-dir")]
    pub report_dir: Option<PathBuf>,
    /// Where points go in their cell [default: uniform].
    #[arg(long, value_enum)]
    pub placement: Option<Placement>,
    /// Reproducible stream (fixed when the state is made); its releases are not fit for release.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads [default: all cores]; the output does not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// No notes on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// A config file of these options (keys named as the flags, bounds in a `[bounds]` table); a synth
    /// config works too, its keys that stream lacks skipped. The command line wins.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// What a finished run did.
#[derive(Debug)]
pub struct StreamOutcome {
    /// The times released, in order.
    pub released: Vec<u64>,
    /// The stream position after the run.
    pub position: u64,
    /// Owner-only: rows read in this run and rows with a value clamped to the bounds.
    pub rows_read: u64,
    pub rows_clamped: u64,
    /// Requested times not released: already passed before this run, or not reached.
    pub passed: Vec<u64>,
    pub not_reached: Vec<u64>,
}

/// Runs the subcommand and prints its notes.
pub fn run_command(args: StreamArgs) -> Result<()> {
    let quiet = args.quiet;
    if let Some(warning) = args.epsilon.and_then(crate::privacy::epsilon_warning).filter(|_| !quiet) {
        eprintln!("warning: {warning}");
    }
    let threads = match args.threads {
        Some(threads) => {
            check_threads(threads)?;
            threads
        }
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let pool = worker_pool(threads)?;
    let state_path = args.state.clone();
    let release_at_end = args.release_at_end;
    let progress = Progress::for_terminal(quiet);
    let outcome = pool.install(|| run(args, &progress))?;
    if !quiet {
        if release_at_end && outcome.position == 0 {
            eprintln!("note: --release-at-end released nothing: the stream has no rows yet (t = 0)");
        }
        if !outcome.passed.is_empty() {
            eprintln!(
                "note: times {:?} were already passed before this run (the state is at a later t)",
                outcome.passed
            );
        }
        if !outcome.not_reached.is_empty() {
            eprintln!(
                "note: times {:?} are beyond t = {} and were not released: ask again when the stream reaches them",
                outcome.not_reached, outcome.position
            );
        }
        eprintln!(
            "NOT PRIVATE (owner only): read {} rows ({} clamped to the bounds); the stream is at t = {}; state {} (sensitive)",
            outcome.rows_read,
            outcome.rows_clamped,
            outcome.position,
            state_path.display()
        );
    }
    Ok(())
}

/// One input file, opened, with the columns the stream reads.
struct StreamInput {
    source: Source,
    columns: Vec<NumericColumn>,
    fingerprint: FileFingerprint,
}

/// The checked request: everything known before the first row is read.
struct StreamRequest {
    args: StreamArgs,
    plan: OnlinePlan,
    parameters: StreamParameters,
    bounds: Vec<ColumnBounds>,
    columns: Vec<NumericColumn>,
    inputs: Vec<StreamInput>,
    placement: Placement,
}

/// Reads the inputs into the stream held by `args.state`, releasing at the requested times.
pub fn run(args: StreamArgs, progress: &Progress) -> Result<StreamOutcome> {
    let request = check_request(args)?;
    let mut held = HeldState::lock(&request.args.state)?;
    let mut state = match held.load()? {
        Some(state) => {
            refuse_changes(&request, &state)?;
            state
        }
        None => {
            let seeds = RunSeeds::new(request.parameters.seed)?;
            let state = OnlineState {
                parameters: request.parameters.clone(),
                noise_key: seeds.noise.to_bytes(),
                consistency_seed: seeds.consistency(),
                placement_seed: seeds.placement(),
                consumed: Vec::new(),
                tree: OnlineTree::new(request.plan),
            };
            // Saved before anything is released: a release is always reproducible from a saved key,
            // so a run that fails half-way and is run again repeats the same noise, never new noise.
            held.save(&state)?;
            state
        }
    };
    let start = state.tree.position();
    let new_rows: u64 = request.inputs.iter().map(|input| input.fingerprint.rows).sum();
    let end = start + new_rows;
    request.plan.check_depth(end)?;
    let schedule = ReleaseSchedule::new(&request.args, start, end);
    if !schedule.times.is_empty() {
        let directory = request.args.output_dir.as_ref().expect("checked with the release options");
        std::fs::create_dir_all(directory)
            .map_err(|error| Error::in_file(directory, format!("cannot create the output directory: {error}")))?;
        if let Some(reports) = &request.args.report_dir {
            std::fs::create_dir_all(reports)
                .map_err(|error| Error::in_file(reports, format!("cannot create the report directory: {error}")))?;
        }
    }
    let key = NoiseKey::from_bytes(state.noise_key);
    let mut pending = schedule.times.iter().copied().peekable();
    if start >= 1 {
        // A release at the state's own t (only --release-at-end with no new rows reaches here).
        if pending.next_if_eq(&start).is_some() {
            write_release(&request, &state, start)?;
        }
    }
    let mut rows_clamped = 0u64;
    let geometry = CellGeometry::new(request.plan.dims(), MAX_ONLINE_DEPTH);
    let axes = AxisPlan::for_geometry(&geometry, &request.bounds);
    let mut expected_position = start;
    let mut gathered: Vec<u32> = Vec::with_capacity(FEED_ELEMENTS);
    let bar = progress.phase("stream", new_rows, "rows");
    for input in &request.inputs {
        for row_group in 0..input.source.row_group_count() {
            let reader = input.source.row_group_reader(row_group, &input.columns)?;
            for batch in reader {
                let batch = batch
                    .map_err(|error| Error::in_file(input.source.path(), format!("row group {row_group}: {error}")))?;
                let (codes, clamped) = cell_codes(&batch, input, row_group, &geometry, &axes)?;
                rows_clamped += clamped;
                bar.advance(codes.len() as u64)?;
                let mut rest = &codes[..];
                while !rest.is_empty() {
                    let position = state.tree.position() + gathered.len() as u64;
                    let until_release = pending.peek().map_or(u64::MAX, |&next| next - position);
                    let take = rest
                        .len()
                        .min(FEED_ELEMENTS - gathered.len())
                        .min(usize::try_from(until_release).unwrap_or(usize::MAX));
                    gathered.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if gathered.len() == FEED_ELEMENTS || take as u64 == until_release {
                        feed_gathered(&mut state, &mut gathered, &key, &mut pending, &request)?;
                    }
                }
            }
        }
        feed_gathered(&mut state, &mut gathered, &key, &mut pending, &request)?;
        expected_position += input.fingerprint.rows;
        if state.tree.position() != expected_position {
            return Err(Error::in_file(input.source.path(), "its footer's row count does not match the rows it holds"));
        }
        // A checkpoint per file: a run that fails later keeps this file read, so running again cannot
        // feed it (and its releases' noise) twice.
        state.consumed.push(input.fingerprint.clone());
        held.save(&state)?;
    }
    bar.finish();
    Ok(StreamOutcome {
        released: schedule.times,
        position: state.tree.position(),
        rows_read: new_rows,
        rows_clamped,
        passed: schedule.passed,
        not_reached: schedule.not_reached,
    })
}

/// Feeds the gathered elements to the tree, and makes the release that falls at the new position.
fn feed_gathered(
    state: &mut OnlineState,
    gathered: &mut Vec<u32>,
    key: &NoiseKey,
    pending: &mut std::iter::Peekable<impl Iterator<Item = u64>>,
    request: &StreamRequest,
) -> Result<()> {
    if gathered.is_empty() {
        return Ok(());
    }
    state.tree.feed(gathered, key)?;
    gathered.clear();
    if pending.next_if_eq(&state.tree.position()).is_some() {
        write_release(request, state, state.tree.position())?;
    }
    Ok(())
}

/// The stream elements of one batch as cell codes at the finest depth; a null, NaN or infinite value is
/// refused (the stream cannot drop a row: t is public). Returns the codes and the rows clamped.
fn cell_codes(
    batch: &arrow::record_batch::RecordBatch,
    input: &StreamInput,
    row_group: usize,
    geometry: &CellGeometry,
    axes: &[AxisPlan],
) -> Result<(Vec<u32>, u64)> {
    let rows = batch.num_rows();
    let mut indices = vec![vec![0u32; rows]; axes.len()];
    let mut flags = vec![0u8; rows];
    let mut clamped_flags = vec![false; rows];
    for (axis, (column, plan)) in input.columns.iter().zip(axes).enumerate() {
        let array = batch.column(axis);
        let values = NumericValues::of(array.as_ref())
            .ok_or_else(|| Error::in_column(input.source.path(), &column.name, "not a numeric column"))?;
        flags.fill(0);
        quantize_values(&values, array.nulls(), plan, &mut indices[axis], &mut flags);
        if flags.iter().any(|&flag| flag & ROW_INVALID != 0) {
            return Err(Error::in_column(
                input.source.path(),
                &column.name,
                format!(
                    "row group {row_group}: a null, NaN or infinite value; a stream cannot skip rows (t is public), \
                     so clean the file first"
                ),
            ));
        }
        for (clamped, &flag) in clamped_flags.iter_mut().zip(&flags) {
            *clamped |= flag != 0;
        }
    }
    let mut point = vec![0u32; axes.len()];
    let codes = (0..rows)
        .map(|row| {
            for (axis, index) in point.iter_mut().enumerate() {
                *index = indices[axis][row];
            }
            geometry.leaf_code(&point)
        })
        .collect();
    Ok((codes, clamped_flags.iter().filter(|&&clamped| clamped).count() as u64))
}

/// Writes release-t.parquet and release-t.json for the stream at time t.
fn write_release(request: &StreamRequest, state: &OnlineState, t: u64) -> Result<()> {
    let plan = &request.plan;
    let spent_per_path = plan.spent_per_path(state.tree.depth())?;
    let mut budget = Budget::new(plan.epsilon());
    budget.spend("the root-to-leaf path of the replaced element", spent_per_path);
    budget.spend("the root-to-leaf path of the element replacing it", spent_per_path);
    let spent = budget.check()?;
    let mix = t.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let release = state.tree.release(state.consistency_seed ^ mix);
    let measure = ReleasedMeasure::Leaves { geometry: release.geometry, counts: release.leaf_counts };
    // In random order, as synth's default: a prefix of a release is a uniform sample of it.
    let generator = measure.rows(None, request.placement, RowOrder::DEFAULT, state.placement_seed ^ mix)?;
    debug_assert_eq!(generator.total_rows(), t);
    let directory = request.args.output_dir.as_ref().expect("checked with the release options");
    let table = directory.join(format!("release-{t}.parquet"));
    let value_cells = measure.value_cells(request.columns.len());
    let mut sink = ParquetSink::create(&table, &request.columns, &request.bounds, &value_cells)?;
    write_rows(&mut sink, generator.as_ref(), &Progress::hidden(), &mut Timings::default())?;
    let report = StreamReleaseReport::new(request, state, t, spent_per_path, spent);
    let report_directory = request.args.report_dir.as_ref().unwrap_or(directory);
    let json = serde_json::to_string_pretty(&report)
        .map_err(|error| Error::internal(format!("serialising the release report: {error}")))?;
    let report_path = report_directory.join(format!("release-{t}.json"));
    let mut domain = PublicDomain::default();
    request.bounds.iter().for_each(|axis| domain.add_bounds(&axis.column, axis.lo, axis.hi));
    let metadata = TableMetadata {
        mechanism: "online",
        settings: format!("continual release at t = {t}, depth {}", report.depth),
        epsilon_delta: Some((plan.epsilon(), 0.0)),
        anonymity: None,
        neighbours: "replace".to_string(),
        seeded: request.parameters.seed.is_some(),
        domain,
    };
    // The table and its report appear together or not at all.
    commit_all(vec![sink.finish(&metadata.key_values())?, StagedFile::with_bytes(&report_path, json.as_bytes())?])
}

/// The release times of one run, from the three options, sorted and without repeats.
struct ReleaseSchedule {
    /// Times in [max(start, 1), end] to release (start itself only for --release-at-end).
    times: Vec<u64>,
    passed: Vec<u64>,
    not_reached: Vec<u64>,
}

impl ReleaseSchedule {
    fn new(args: &StreamArgs, start: u64, end: u64) -> Self {
        let mut times = BTreeSet::new();
        let mut passed = Vec::new();
        let mut not_reached = Vec::new();
        for &t in &args.release_at {
            if t <= start {
                passed.push(t);
            } else if t > end {
                not_reached.push(t);
            } else {
                times.insert(t);
            }
        }
        if let Some(every) = args.release_every {
            let mut t = (start / every + 1) * every;
            while t <= end {
                times.insert(t);
                t += every;
            }
        }
        if args.release_at_end && end >= 1 {
            times.insert(end);
        }
        ReleaseSchedule { times: times.into_iter().collect(), passed, not_reached }
    }
}

/// Checks the options and opens every input, before the state is read or anything is written.
fn check_request(args: StreamArgs) -> Result<StreamRequest> {
    let epsilon = args.epsilon.ok_or_else(|| Error::bad_input("--epsilon is required"))?;
    check_epsilon(epsilon)?;
    if args.private_bounds.is_some() {
        return Err(Error::bad_input(
            "--private-bounds does not apply to stream: every release of a stream reads its cells on the same \
             bounds, public before its first rows arrive; give --bounds COLUMN=LO:HI (or the bounds an earlier \
             synth --private-bounds release published, whose epsilon counts toward the data's total)",
        ));
    }
    let wanted = bounds_for_columns(args.columns.as_deref(), &last_bounds_per_column(args.bounds.clone()))?;
    if wanted.is_empty() {
        return Err(Error::bad_input(
            "no columns: give --bounds COLUMN=LO:HI for each column of the stream (bounds are never taken from the data)",
        ));
    }
    if args.release_every == Some(0) {
        return Err(Error::bad_input("--release-every must be at least 1"));
    }
    if args.release_at.contains(&0) {
        return Err(Error::bad_input("--release-at: times start at 1 (t = 0 has no rows)"));
    }
    let releases = !args.release_at.is_empty() || args.release_every.is_some() || args.release_at_end;
    if releases && args.output_dir.is_none() {
        return Err(Error::bad_input("--output-dir is required to release"));
    }
    // A later run reads an input directory again, recursively: what this run writes must not be in it.
    let written = [
        ("--state", Some(&args.state)),
        ("--output-dir", args.output_dir.as_ref()),
        ("--report-dir", args.report_dir.as_ref()),
    ];
    for input in &args.inputs {
        for (flag, path) in written {
            if let Some(path) = path.filter(|path| is_inside_directory(path, input)) {
                return Err(Error::in_file(
                    path,
                    format!(
                        "{flag} is inside the input directory {}: the stream's next run would read it as input",
                        input.display()
                    ),
                ));
            }
        }
    }
    let input_files = expand_inputs(&args.inputs)?;
    check_state_and_inputs_apart_from_releases(&args, &input_files)?;
    let names: Vec<String> = wanted.iter().map(|bounds| bounds.column.clone()).collect();
    let mut inputs: Vec<StreamInput> = Vec::new();
    for path in input_files {
        let source = Source::open(&path)?;
        let columns = source.numeric_columns(&names)?;
        if let Some(first) = inputs.first() {
            let describe = |columns: &[NumericColumn]| {
                columns
                    .iter()
                    .map(|column| format!("{} {}", column.name, column.data_type))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if describe(&columns) != describe(&first.columns) {
                return Err(Error::in_file(
                    &path,
                    format!(
                        "its columns ({}) differ from those of {} ({}): every file of a stream has the same columns",
                        describe(&columns),
                        first.source.path().display(),
                        describe(&first.columns)
                    ),
                ));
            }
        }
        let fingerprint = fingerprint(&source)?;
        if let Some(earlier) = inputs.iter().find(|input| input.fingerprint.same_file(&fingerprint)) {
            return Err(Error::in_file(
                &path,
                format!(
                    "given twice (the same file as {}): its rows would enter the stream twice",
                    earlier.source.path().display()
                ),
            ));
        }
        inputs.push(StreamInput { source, columns, fingerprint });
    }
    let columns = inputs.first().expect("at least one input file").columns.clone();
    let bounds: Vec<ColumnBounds> = columns
        .iter()
        .map(|column| {
            wanted
                .iter()
                .find(|bounds| bounds.column == column.name)
                .cloned()
                .expect("every column was found from its bounds")
        })
        .collect();
    let plan = OnlinePlan::new(epsilon, columns.len())?;
    let parameters = StreamParameters {
        epsilon,
        columns: columns
            .iter()
            .zip(&bounds)
            .map(|(column, bounds)| StateColumn {
                name: column.name.clone(),
                data_type: column.data_type.to_string(),
                lo: bounds.lo,
                hi: bounds.hi,
            })
            .collect(),
        seed: args.seed,
    };
    Ok(StreamRequest {
        placement: args.placement.unwrap_or(Placement::DEFAULT),
        args,
        plan,
        parameters,
        bounds,
        columns,
        inputs,
    })
}

/// The release folders are what gets published: the state (exact counts and the noise key) may not be in
/// them, nor named like a release, nor be an input or a special file; and no input may be in them, where a
/// release `release-T.parquet` could replace it.
fn check_state_and_inputs_apart_from_releases(args: &StreamArgs, inputs: &[PathBuf]) -> Result<()> {
    let state = &args.state;
    refuse_special_file(state, "--state")?;
    let published = [("--output-dir", args.output_dir.as_ref()), ("--report-dir", args.report_dir.as_ref())];
    for (flag, directory) in published.into_iter().filter_map(|(flag, directory)| Some((flag, directory?))) {
        if is_inside_directory(state, directory) {
            return Err(Error::in_file(
                state,
                format!(
                    "--state is inside {flag} {}, whose files are published: the state holds the exact counts \
                     and the noise key; keep it elsewhere, as private as the data",
                    directory.display()
                ),
            ));
        }
        if let Some(input) = inputs.iter().find(|input| is_inside_directory(input, directory)) {
            return Err(Error::in_file(
                input,
                format!(
                    "an input is inside {flag} {}, where this run writes its releases (release-T.parquet, \
                     release-T.json) and could replace it: keep inputs and releases in separate folders",
                    directory.display()
                ),
            ));
        }
    }
    let name = state.file_name().map(|name| name.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.ends_with(".parquet") || name.ends_with(".json") {
        return Err(Error::in_file(
            state,
            "--state names a .parquet or .json file, the kinds a release is published as: the state holds the \
             exact counts and the noise key, so give it a name no one would publish by mistake (e.g. stream.state)",
        ));
    }
    if let Some(input) = inputs.iter().find(|input| same_file(state, input)) {
        return Err(Error::in_file(input, "--state names an input file: the state is written over it"));
    }
    Ok(())
}

/// Refuses a state made with other parameters, or inputs it has already read. Nothing is written.
fn refuse_changes(request: &StreamRequest, state: &OnlineState) -> Result<()> {
    let differences = state.parameters.differences(&request.parameters);
    if !differences.is_empty() {
        return Err(Error::in_file(
            &request.args.state,
            format!(
                "this stream was started with other parameters; a stream keeps them for life. Differs: {}",
                differences.join("; ")
            ),
        ));
    }
    for input in &request.inputs {
        if let Some(read) = state.consumed.iter().find(|read| read.same_file(&input.fingerprint)) {
            return Err(Error::in_file(
                input.source.path(),
                format!(
                    "already read into the stream of {} (as {}, {} rows): give only new files",
                    request.args.state.display(),
                    read.path,
                    read.rows
                ),
            ));
        }
    }
    Ok(())
}

/// The files of every input (a file, a directory's `*.parquet` files, or a glob's matches), in the order
/// given.
fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for input in inputs {
        files.extend(expand_input(input)?);
    }
    Ok(files)
}

/// A file's identity: canonical path, size, rows and a hash of its last bytes (footer and metadata).
fn fingerprint(source: &Source) -> Result<FileFingerprint> {
    let path = source.path();
    let canonical = std::fs::canonicalize(path)
        .map_err(|error| Error::in_file(path, format!("cannot resolve the path: {error}")))?;
    let cannot_read = |error: std::io::Error| Error::in_file(path, format!("cannot read: {error}"));
    let mut file = std::fs::File::open(path).map_err(cannot_read)?;
    let bytes = file.metadata().map_err(cannot_read)?.len();
    let tail_length = bytes.min(FOOTER_BYTES as u64);
    file.seek(SeekFrom::Start(bytes - tail_length)).map_err(cannot_read)?;
    let mut tail = vec![0u8; tail_length as usize];
    file.read_exact(&mut tail).map_err(cannot_read)?;
    Ok(FileFingerprint {
        path: canonical.to_string_lossy().into_owned(),
        bytes,
        rows: source.row_count(),
        footer_hash: fnv1a(&tail),
    })
}
