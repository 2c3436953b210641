//! `synth`: one synthesis run, phase by phase (docs/design.md):
//! source → binner → mechanism (plan, release) → sampler → sink, plus the two reports.
//!
//! One driver for every mechanism: it opens the input, builds the mechanism's plan from public inputs,
//! runs its release, checks what the release spent against ε ([`crate::privacy::Budget::check`], the
//! one place), samples the released measure, writes the table and commits the outputs together.

pub mod columns;
pub mod memory;
mod private_bounds;
pub mod report;
pub mod saved;

// Declared with the output checks (io::paths), below the options that name it.
pub use crate::io::paths::OutputPaths;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;
use std::path::Path;

use crate::binner::pass::DataPass;
use crate::encoding::{decode, ColumnEncoding, EncodedColumn, Encoding};
use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::io::domain::Coding;
use crate::io::paths::{check_output_paths, NamedPath};
use crate::io::sink::{
    denormalised, integer_cells, output_schema, EncodedRowGroup, ParquetSink, OUTPUT_ROW_GROUP_ROWS,
};
use crate::io::source::{NumericColumn, Source};
use crate::io::staging::{commit_all, StagedFile};
use crate::mechanism::covloss::points::{WeightedPoints, BATCH_ROWS as ENCODED_BATCH_ROWS};
use crate::mechanism::{Plan, PublicInputs, Release, ReleasedMeasure};
use crate::options::{check_output_rows, worker_pool, SynthOptions};
use crate::progress::{PhaseTiming, Progress, Timings};
use crate::sampler::{Placement, RowGenerator, RowOrder, SAMPLE_BLOCK_ROWS};
use memory::{peak_memory_bytes, usable_memory_bytes};
use private_bounds::PrivateBounds;
use report::*;

/// Rows generated and written per output batch (a whole number of sampler blocks).
pub const OUTPUT_BATCH_ROWS: usize = 256 * SAMPLE_BLOCK_ROWS;

/// Cell-array memory when the machine's size is unknown.
const FALLBACK_MEMORY_LIMIT: u64 = 4 << 30;

pub struct SynthOutcome {
    pub report: RunReport,
    pub diagnostics: Diagnostics,
}

/// Runs the chosen mechanism on `input` and writes the synthetic table (and reports) to `outputs`.
pub fn synthesize(
    input: &Path,
    outputs: &OutputPaths,
    options: &SynthOptions,
    progress: &Progress,
) -> Result<SynthOutcome> {
    options.validate()?;
    check_output_paths(&[NamedPath::new("the input", input)], &outputs.named())?;
    let source = Source::open_with(input, options.hive_columns)?;
    synthesize_source(&source, outputs, options, progress)
}

/// [`synthesize`], also saving the release at `saved_release` ([`saved`], docs/release-format.md), committed
/// with the table and the reports: all of them appear or none.
pub fn synthesize_and_save(
    input: &Path,
    outputs: &OutputPaths,
    saved_release: &Path,
    options: &SynthOptions,
    progress: &Progress,
) -> Result<SynthOutcome> {
    options.validate()?;
    let mut written = outputs.named();
    written.push(NamedPath::new("--save-release", saved_release));
    check_output_paths(&[NamedPath::new("the input", input)], &written)?;
    let source = Source::open_with(input, options.hive_columns)?;
    let fitted = fit(&source, options, progress)?;
    let release = fitted.stage_saved(saved_release)?;
    fitted.write_with(outputs, options.rows, progress, vec![release])
}

/// [`synthesize`] on an opened input (a Parquet dataset, or a table in memory).
pub fn synthesize_source(
    source: &Source,
    outputs: &OutputPaths,
    options: &SynthOptions,
    progress: &Progress,
) -> Result<SynthOutcome> {
    options.validate()?;
    let fitted = fit(source, options, progress)?;
    fitted.write(outputs, options.rows, progress)
}

/// The private part of a run: plan, release and budget check, on the run's own thread pool. What comes
/// back holds the released measure and public facts only, never the data, so it can be sampled any
/// number of times ([`Fitted::sample`]) without spending more of ε (post-processing).
pub fn fit(source: &Source, options: &SynthOptions, progress: &Progress) -> Result<Fitted> {
    options.validate()?;
    let (threads, pool) = thread_pool(options)?;
    let seeds = crate::privacy::RunSeeds::new(options.seed)?;
    // Released bounds, where asked, are public to everything after them: the mechanism runs on them.
    let private_bounds = pool.install(|| PrivateBounds::release(source, options, &seeds.noise, progress))?;
    let mechanism_options = private_bounds.as_ref().map(|released| released.mechanism_options(options));
    let mechanism_options = mechanism_options.as_ref().unwrap_or(options);
    let columns = RunColumns::of(source, mechanism_options)?;
    let public = public_inputs(source, &columns, mechanism_options, threads);
    let (numeric, bounds) = columns.numeric();
    let data = DataPass { source, columns: numeric, bounds, nulls: options.nulls, progress, ranks: None };
    let (release, epsilon_spent, timings) = pool.install(|| -> Result<_> {
        let plan = Plan::new(&public, &options.mechanism.for_columns((&columns.code_slots(), &columns.null_bands())))?;
        let mut timings = Timings::default();
        let mut release = plan.release(&data, &seeds, &mut timings)?;
        if let Some(released) = &private_bounds {
            let mechanism = std::mem::replace(&mut release.budget, crate::privacy::Budget::new(options.epsilon));
            release.budget = released.composed(mechanism);
        }
        let epsilon_spent = release.budget.check()?;
        Ok((release, epsilon_spent, timings))
    })?;
    let run = RunFacts { source, columns: &columns, options };
    let mut report = run.report(&release, epsilon_spent, 0);
    if let Some(released) = private_bounds {
        report.guarantee.public_inputs.push(released.public_inputs_note());
        report.private_bounds = Some(released.report);
    }
    let metadata = run.table_metadata(&release);
    let mut diagnostics = Diagnostics::new(&release.scan, &columns.names(), threads, release.binning.clone());
    diagnostics.timings_seconds = timings.into_phases();
    diagnostics.input_page_checksums = source.has_page_checksums();
    diagnostics.covariance_loss = release.covariance_loss;
    Ok(Fitted {
        draws: Draws {
            columns,
            measure: release.measure,
            placement: options.placement,
            row_order: options.row_order,
            placement_seed: seeds.placement(),
            pool,
            metadata,
        },
        output_phase: release.output_phase,
        report,
        diagnostics,
    })
}

/// A released measure and the public facts of its run: what [`fit`] returns. Sampling it again spends
/// nothing: the data is not read, only the release.
pub struct Fitted {
    draws: Draws,
    /// The name of the sampling-and-writing phase in the diagnostics.
    output_phase: &'static str,
    /// The report of the run, with no rows sampled yet.
    report: RunReport,
    diagnostics: Diagnostics,
}

impl Fitted {
    /// The publishable report of the release (`release.synthetic_rows` is 0 until a table is sampled).
    pub fn report(&self) -> &RunReport {
        &self.report
    }

    /// Owner-only facts about the data pass (NOT private).
    pub fn diagnostics(&self) -> &Diagnostics {
        &self.diagnostics
    }

    /// The synthetic table's schema: the used input columns, in input order, with their types.
    /// The schema's metadata is the file footer's: what the table is and how it was made.
    pub fn schema(&self) -> SchemaRef {
        self.draws.schema()
    }

    /// The report of draw `draw` of `rows` rows: the release's report, the rows, and the note that the
    /// draw spent no budget.
    pub fn draw_report(&self, rows: u64, draw: u64) -> RunReport {
        let mut report = self.report.clone();
        report.release.synthetic_rows = rows;
        report.sample = Some(SampleInfo::post_processing(draw));
        report
    }

    /// Draw `draw` of the released measure as record batches: `rows` rows (default: the released count),
    /// each column mapped back to its bounds and type (or decoded from its encoding). Draw 0 is what
    /// [`Fitted::write`] writes; each draw has its own placement coins, and none reads the data or spends
    /// budget.
    pub fn sample(&self, rows: Option<u64>, draw: u64, progress: &Progress) -> Result<Vec<RecordBatch>> {
        self.draws.sample(rows, draw, progress)
    }

    /// Samples draw 0 into the table at `outputs` and commits it with the reports.
    pub fn write(self, outputs: &OutputPaths, rows: Option<u64>, progress: &Progress) -> Result<SynthOutcome> {
        self.write_with(outputs, rows, progress, Vec::new())
    }

    /// [`Fitted::write`], committing the staged files `with` together with the table and the reports.
    fn write_with(
        self,
        outputs: &OutputPaths,
        rows: Option<u64>,
        progress: &Progress,
        with: Vec<StagedFile>,
    ) -> Result<SynthOutcome> {
        let mut timings = Timings::default();
        let written = timings
            .time_in_parts(self.output_phase, |parts| self.draws.write_table(&outputs.table, rows, progress, parts));
        let (sink, synthetic_rows) = written?;
        let Fitted { mut report, mut diagnostics, draws, .. } = self;
        report.release.synthetic_rows = synthetic_rows;
        diagnostics.timings_seconds.extend(timings.into_phases());
        let table = (sink, draws.metadata.as_slice());
        commit_outputs(outputs, report, diagnostics, table, with)
    }
}

/// What tables are drawn from: the released measure, the columns it maps back to, where points go in their
/// cells and in what order rows come, and the placement seed of draw 0. Public facts only: a [`Fitted`]
/// release and a saved one ([`saved::SavedRelease`]) draw alike.
pub(crate) struct Draws {
    columns: RunColumns,
    measure: ReleasedMeasure,
    placement: Placement,
    row_order: RowOrder,
    /// Seeds the placement of draw 0, the run's own output; later draws derive theirs from it.
    placement_seed: u64,
    pool: rayon::ThreadPool,
    /// The footer of every table drawn: what it is and how it was made ([`TableMetadata`]).
    metadata: Vec<(String, String)>,
}

impl Draws {
    /// The tables' schema: the used input columns, in input order, with their types; its metadata is the
    /// file footer's.
    fn schema(&self) -> SchemaRef {
        let metadata: std::collections::HashMap<String, String> = self.metadata.iter().cloned().collect();
        std::sync::Arc::new(self.columns.schema().as_ref().clone().with_metadata(metadata))
    }

    /// Draw `draw` as record batches ([`Fitted::sample`]).
    fn sample(&self, rows: Option<u64>, draw: u64, progress: &Progress) -> Result<Vec<RecordBatch>> {
        check_output_rows("rows", rows)?;
        let schema = self.schema();
        if let (ReleasedMeasure::Encoded { points, rows: released }, RunColumns::Encoded(encoding)) =
            (&self.measure, &self.columns)
        {
            let seed = crate::privacy::draw_seed(self.placement_seed, draw);
            let total_rows = rows.unwrap_or(*released);
            let bar = progress.phase("sample", total_rows, "rows");
            let batches = self.pool.install(|| {
                (0..total_rows)
                    .step_by(ENCODED_BATCH_ROWS)
                    .map(|start| {
                        let rows = (total_rows - start).min(ENCODED_BATCH_ROWS as u64) as usize;
                        let batch = points.batch(encoding, &schema, start, rows, seed)?;
                        bar.advance(rows as u64)?;
                        Ok(batch)
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            bar.finish();
            return Ok(batches);
        }
        let (columns, bounds) = self.columns.numeric();
        let integers = integer_cells(columns, bounds, &self.measure.value_cells(columns.len()));
        self.pool.install(|| {
            let generator = self.rows(rows, draw)?;
            let total_rows = generator.total_rows();
            let bar = progress.phase("sample", total_rows, "rows");
            let starts: Vec<u64> = (0..total_rows).step_by(OUTPUT_BATCH_ROWS).collect();
            let batches = starts
                .par_iter()
                .map(|&start| {
                    let rows = (total_rows - start).min(OUTPUT_BATCH_ROWS as u64) as usize;
                    let mut unit = vec![Vec::new(); columns.len()];
                    generator.sample_rows(start, rows, &mut unit);
                    let arrays = columns
                        .iter()
                        .zip(bounds)
                        .zip(&integers)
                        .zip(&unit)
                        .map(|(((column, bounds), integers), values)| {
                            denormalised(column, bounds, integers.as_ref(), values)
                        })
                        .collect();
                    bar.advance(rows as u64)?;
                    RecordBatch::try_new(schema.clone(), arrays)
                        .map_err(|error| Error::internal(format!("building an output batch: {error}")))
                })
                .collect::<Result<Vec<_>>>()?;
            bar.finish();
            Ok(batches)
        })
    }

    /// Samples draw 0 into the table at `table` (uncommitted); returns its sink and its rows.
    fn write_table(
        &self,
        table: &Path,
        rows: Option<u64>,
        progress: &Progress,
        parts: &mut Timings,
    ) -> Result<(ParquetSink, u64)> {
        self.pool.install(|| match (&self.measure, &self.columns) {
            (ReleasedMeasure::Encoded { points, rows: released }, RunColumns::Encoded(encoding)) => {
                let rows = 0..rows.unwrap_or(*released);
                write_encoded(encoding, points, rows, self.placement_seed, table, progress)
            }
            _ => {
                let (columns, bounds) = self.columns.numeric();
                let value_cells = self.measure.value_cells(columns.len());
                let mut sink = ParquetSink::create(table, columns, bounds, &value_cells)?;
                let written = write_rows(&mut sink, self.rows(rows, 0)?.as_ref(), progress, parts)?;
                Ok((sink, written))
            }
        })
    }

    fn rows(&self, rows: Option<u64>, draw: u64) -> Result<Box<dyn RowGenerator + '_>> {
        let seed = crate::privacy::draw_seed(self.placement_seed, draw);
        self.measure.rows(rows, self.placement, self.row_order, seed)
    }
}

/// The columns a run reads and writes: numeric columns mapped onto [0,1]^d by their public bounds, or the
/// columns of a public Boolean encoding (covloss, microagg).
pub(crate) enum RunColumns {
    Numeric { columns: Vec<NumericColumn>, bounds: Vec<ColumnBounds> },
    Encoded(Encoding),
}

impl RunColumns {
    /// The columns `options` use on `source`, each checked against its bounds or its encoding (the
    /// schema only, never values).
    pub fn of(source: &Source, options: &SynthOptions) -> Result<RunColumns> {
        match options.mechanism.encoding() {
            Some(encoding) => Ok(RunColumns::Encoded(Encoding::resolve(source, encoding)?)),
            None => {
                let (columns, bounds) = columns::used_columns(source, options)?;
                Ok(RunColumns::Numeric { columns, bounds })
            }
        }
    }

    /// The numeric columns and their bounds (none for an encoding).
    pub fn numeric(&self) -> (&[NumericColumn], &[ColumnBounds]) {
        match self {
            RunColumns::Numeric { columns, bounds } => (columns, bounds),
            RunColumns::Encoded(_) => (&[], &[]),
        }
    }

    /// Per column, the code slots on a categorical or Boolean column's axis (null and "other" included),
    /// 0 for a number.
    pub fn code_slots(&self) -> Vec<usize> {
        let (columns, bounds) = self.numeric();
        let slots = |(column, axis): (&NumericColumn, &ColumnBounds)| match column.coding {
            Coding::Number => 0,
            _ => (axis.hi - axis.lo).round() as usize,
        };
        columns.iter().zip(bounds).map(slots).collect()
    }

    /// Per column, the share of a nullable number's axis below its public bounds (its null band), 0 for a
    /// coded column or a number without nulls.
    pub fn null_bands(&self) -> Vec<f64> {
        let (columns, bounds) = self.numeric();
        let band = |(column, axis): (&NumericColumn, &ColumnBounds)| match (&column.coding, column.nulls) {
            (Coding::Number, Some(slot)) => (slot.below - axis.lo) / (axis.hi - axis.lo),
            _ => 0.0,
        };
        columns.iter().zip(bounds).map(band).collect()
    }

    pub fn names(&self) -> Vec<String> {
        match self {
            RunColumns::Numeric { columns, .. } => columns.iter().map(|column| column.name.clone()).collect(),
            RunColumns::Encoded(encoding) => encoding.columns.iter().map(|column| column.name.clone()).collect(),
        }
    }

    /// The synthetic table's schema: the input's names and types, in input order.
    pub fn schema(&self) -> SchemaRef {
        match self {
            RunColumns::Numeric { columns, .. } => output_schema(columns),
            RunColumns::Encoded(encoding) => decode::output_schema(encoding),
        }
    }

    /// The report's description of the columns: public bounds, and the encoding where there is one.
    /// The public domain of the columns, as a synthetic file's footer gives it ([`report::DOMAIN_KEY`]):
    /// each number's, date's or timestamp's bounds (in its stored unit) and each categorical column's list.
    fn domain(&self) -> PublicDomain {
        let mut domain = PublicDomain::default();
        match self {
            RunColumns::Numeric { columns, bounds } => {
                for (column, axis) in columns.iter().zip(bounds) {
                    match &column.coding {
                        Coding::Number => domain.add_bounds(&column.name, public_lo(column, axis), axis.hi),
                        Coding::Categories(list) => domain.add_categories(&column.name, &list.names),
                        Coding::Boolean => {}
                    }
                }
            }
            RunColumns::Encoded(encoding) => {
                for column in &encoding.columns {
                    match &column.encoding {
                        ColumnEncoding::Binned { bounds, .. } => domain.add_bounds(&column.name, bounds.lo, bounds.hi),
                        ColumnEncoding::Categorical { categories, .. } => {
                            domain.add_categories(&column.name, categories)
                        }
                        ColumnEncoding::Bit => {}
                    }
                }
            }
        }
        domain
    }

    fn infos(&self) -> Vec<ColumnInfo> {
        match self {
            RunColumns::Numeric { columns, bounds } => columns.iter().zip(bounds).map(column_info).collect(),
            RunColumns::Encoded(encoding) => encoding.columns.iter().map(encoded_column_info).collect(),
        }
    }
}

/// A number's public lower bound: its axis's, or where the axis is widened below for the null band, the
/// band's top.
fn public_lo(column: &NumericColumn, axis: &ColumnBounds) -> f64 {
    column.nulls.map_or(axis.lo, |slot| slot.below)
}

/// A column in the report: its public bounds, or its codes' range (categories 0:K−1, Booleans 0:1) and
/// what they code, and whether null is a value of its domain.
fn column_info((column, axis): (&NumericColumn, &ColumnBounds)) -> ColumnInfo {
    let nulls = if column.nulls.is_some() { "; null is a value of its domain" } else { "" };
    let (lo, hi, coding) = match &column.coding {
        Coding::Number => (public_lo(column, axis), axis.hi, None),
        Coding::Boolean => (0.0, 1.0, Some("Boolean: false 0, true 1".to_string())),
        Coding::Categories(categories) => (
            0.0,
            (categories.codes() - 1) as f64,
            Some(format!(
                "categorical: the index in its public list of {} categories{}",
                categories.names.len(),
                if categories.other { " and 'other' (written as null)" } else { "" }
            )),
        ),
    };
    let encoding = match (coding, nulls.is_empty()) {
        (Some(coding), _) => Some(format!("{coding}{nulls}")),
        (None, false) => Some(format!("number{nulls}")),
        (None, true) => None,
    };
    ColumnInfo { name: column.name.clone(), data_type: column.data_type.to_string(), lo, hi, encoding }
}

/// An encoded column in the report: its range of codes (bits 0:1, categories 0:K−1) or its bounds.
fn encoded_column_info(column: &EncodedColumn) -> ColumnInfo {
    let (lo, hi) = match &column.encoding {
        ColumnEncoding::Bit => (0.0, 1.0),
        ColumnEncoding::Categorical { .. } => (0.0, (column.encoding.width() - 1) as f64),
        ColumnEncoding::Binned { bounds, .. } => (bounds.lo, bounds.hi),
    };
    ColumnInfo {
        name: column.name.clone(),
        data_type: column.data_type.to_string(),
        lo,
        hi,
        encoding: Some(column.encoding.describe()),
    }
}

/// What a plan may know: public facts of the input and the options.
pub(crate) fn public_inputs<'a>(
    source: &Source,
    columns: &'a RunColumns,
    options: &SynthOptions,
    threads: usize,
) -> PublicInputs<'a> {
    let encoding = match columns {
        RunColumns::Encoded(encoding) => Some(encoding),
        RunColumns::Numeric { .. } => None,
    };
    PublicInputs {
        dims: encoding.map_or(columns.numeric().0.len(), |encoding| encoding.bits),
        epsilon: options.epsilon,
        neighbours: options.neighbours,
        file_rows: source.row_count(),
        memory_limit: options
            .memory_limit
            .unwrap_or_else(|| usable_memory_bytes().map_or(FALLBACK_MEMORY_LIMIT, |bytes| bytes / 2)),
        threads,
        placement: options.placement,
        encoding,
    }
}

/// The run's worker threads and their pool.
pub(crate) fn thread_pool(options: &SynthOptions) -> Result<(usize, rayon::ThreadPool)> {
    thread_pool_of(options.threads)
}

/// `threads` worker threads (default: all cores) and their pool.
fn thread_pool_of(threads: Option<usize>) -> Result<(usize, rayon::ThreadPool)> {
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    Ok((threads, worker_pool(threads)?))
}

/// The public facts of a run that its report states.
pub(crate) struct RunFacts<'a> {
    pub source: &'a Source,
    pub columns: &'a RunColumns,
    pub options: &'a SynthOptions,
}

impl RunFacts<'_> {
    /// The publishable report: public inputs and released values only.
    pub fn report(&self, release: &Release, epsilon_spent: f64, synthetic_rows: u64) -> RunReport {
        RunReport {
            tool: ToolInfo::current(),
            mechanism: release.mechanism,
            guarantee: self.guarantee(release, epsilon_spent),
            input: InputInfo {
                file: self.source.path().display().to_string(),
                files: self.source.files().len(),
                columns: self.columns.infos(),
                excluded: self.options.exclude.clone(),
            },
            parameters: release.parameters.clone(),
            release: ReleaseInfo {
                root_count: release.root_count,
                root_count_is: release.root_count_is,
                synthetic_rows,
            },
            accuracy: release.accuracy.clone(),
            device: release.binning.clone(),
            sample: None,
            private_bounds: None,
        }
    }

    /// The key-value pairs of the synthetic table's footer ([`TableMetadata`]): public facts of the run.
    pub fn table_metadata(&self, release: &Release) -> Vec<(String, String)> {
        TableMetadata {
            mechanism: release.mechanism,
            settings: release.parameters.summary(),
            epsilon_delta: release.anonymity.is_none().then_some((self.options.epsilon, release.budget.delta)),
            anonymity: release.anonymity.as_deref(),
            neighbours: crate::mechanism::options::value_name(&self.options.neighbours),
            seeded: self.options.seed.is_some(),
            domain: self.columns.domain(),
        }
        .key_values()
    }

    /// The guarantee of a release that spent `epsilon_spent` (never above ε) of its budget's (ε, δ).
    fn guarantee(&self, release: &Release, epsilon_spent: f64) -> Guarantee {
        let options = self.options;
        let mut public_inputs = match self.columns {
            RunColumns::Numeric { .. } => vec![
                "column names, types and nullability, the bounds and the category lists".to_string(),
                "epsilon, depth rule and every other option".to_string(),
            ],
            RunColumns::Encoded(_) => vec![
                "column names and types, the public category lists, bins and bounds".to_string(),
                "every option".to_string(),
            ],
        };
        if options.neighbours == crate::privacy::Neighbours::Replace || release.anonymity.is_some() {
            public_inputs.push("the row count n (replace relation)".to_string());
        }
        if let Some(anonymity) = &release.anonymity {
            return Guarantee {
                epsilon: f64::INFINITY,
                delta: f64::INFINITY,
                epsilon_spent: f64::INFINITY,
                epsilon_breakdown: Vec::new(),
                neighbours: "none: anonymity is not a guarantee about neighbouring datasets".to_string(),
                public_inputs,
                fit_for_release: false,
                noise: release.parameters.noise(),
                anonymity: Some(anonymity.clone()),
            };
        }
        let pure = release.budget.delta == 0.0;
        let epsilon_breakdown = release
            .budget
            .spends
            .iter()
            .filter(|_| pure)
            .map(|spend| EpsilonPart {
                release: spend.release.clone(),
                epsilon: spend.epsilon,
                share: spend.epsilon / options.epsilon,
                relation: crate::mechanism::options::value_name(&options.neighbours),
            })
            .collect();
        Guarantee {
            epsilon: options.epsilon,
            delta: release.budget.delta,
            epsilon_spent,
            epsilon_breakdown,
            neighbours: options.neighbours.describe().to_string(),
            public_inputs,
            fit_for_release: options.seed.is_none(),
            noise: release.parameters.noise(),
            anonymity: None,
        }
    }
}

/// Memory that [`write_rows`] may hold in row groups: without a bound, 16 threads at d = 2 added 640 MB
/// to a 10^8-row run's peak, and it grows with threads × columns.
const WRITE_WINDOW_BYTES: usize = 512 << 20;

/// What one row group holds at most while it is written: its normalised values, the output columns, the
/// encoded chunks being made, and the encoded chunks waiting to be appended, 8 bytes a value each.
fn row_group_bytes(dims: usize) -> usize {
    4 * 8 * OUTPUT_ROW_GROUP_ROWS * dims.max(1)
}

/// Samples every row of `generator` into `sink`, in row groups of [`OUTPUT_ROW_GROUP_ROWS`]: windows of
/// row groups (as many as the pool has threads, within [`WRITE_WINDOW_BYTES`]) are sampled and encoded in
/// parallel while the window before is appended to the file, in order, so the bytes are the same for any
/// thread count. Records the busy time of the two lanes ("sample and encode", "write"). Returns the
/// number of rows.
pub(crate) fn write_rows(
    sink: &mut ParquetSink,
    generator: &dyn RowGenerator,
    progress: &Progress,
    timings: &mut Timings,
) -> Result<u64> {
    let total_rows = generator.total_rows();
    let bar = progress.phase("sample", total_rows, "rows");
    let (encoder, file) = sink.split();
    let group_rows = OUTPUT_ROW_GROUP_ROWS as u64;
    let encode = |group: usize| -> Result<EncodedRowGroup> {
        let start = group as u64 * group_rows;
        let rows = (total_rows - start).min(group_rows) as usize;
        let mut unit = vec![Vec::new(); encoder.dims()];
        generator.sample_rows(start, rows, &mut unit);
        let encoded = encoder.encode(group, &unit)?;
        bar.advance(rows as u64)?;
        Ok(encoded)
    };
    let timed = |work: &mut dyn FnMut() -> Result<()>| {
        let started = std::time::Instant::now();
        work().map(|()| started.elapsed().as_secs_f64())
    };
    let groups = total_rows.div_ceil(group_rows) as usize;
    let window = rayon::current_num_threads().clamp(1, (WRITE_WINDOW_BYTES / row_group_bytes(encoder.dims())).max(1));
    let (mut encoding, mut writing) = (0.0, 0.0);
    let mut ready: Vec<EncodedRowGroup> = Vec::new();
    let mut next = 0;
    while next < groups || !ready.is_empty() {
        let coming = next..groups.min(next + window);
        let mut encoded = Vec::new();
        let (write_seconds, encode_seconds) = rayon::join(
            || timed(&mut || ready.drain(..).try_for_each(|group| file.append(group))),
            || {
                timed(&mut || {
                    encoded = coming.clone().into_par_iter().map(encode).collect::<Result<_>>()?;
                    Ok(())
                })
            },
        );
        (writing, encoding) = (writing + write_seconds?, encoding + encode_seconds?);
        (ready, next) = (encoded, coming.end);
    }
    bar.finish();
    timings.record("sample and encode", encoding);
    timings.record("write", writing);
    Ok(total_rows)
}

/// Creates the table at `path` (uncommitted) and writes rows `rows` (a range that starts on a batch, so
/// that any split of the rows into ranges gives the same rows) of the table drawn from the encoded `points`
/// with the placement seed `seed`, batch by batch. Returns the sink and the number of rows written.
pub(crate) fn write_encoded(
    encoding: &Encoding,
    points: &WeightedPoints,
    rows: std::ops::Range<u64>,
    seed: u64,
    path: &Path,
    progress: &Progress,
) -> Result<(ParquetSink, u64)> {
    debug_assert_eq!(rows.start % ENCODED_BATCH_ROWS as u64, 0);
    let schema = decode::output_schema(encoding);
    let mut sink = ParquetSink::create_with_schema(path, schema.clone())?;
    let bar = progress.phase("sample", rows.end - rows.start, "rows");
    for start in rows.clone().step_by(ENCODED_BATCH_ROWS) {
        let batch_rows = (rows.end - start).min(ENCODED_BATCH_ROWS as u64) as usize;
        sink.write_batch(&points.batch(encoding, &schema, start, batch_rows, seed)?)?;
        bar.advance(batch_rows as u64)?;
    }
    bar.finish();
    Ok((sink, rows.end - rows.start))
}

/// Finishes the table, writes the reports beside it, then commits all of them (and `with`) as one unit: every old
/// output stays until every new one is complete, and a failed commit leaves the old ones in place.
fn commit_outputs(
    outputs: &OutputPaths,
    report: RunReport,
    mut diagnostics: Diagnostics,
    (sink, metadata): (ParquetSink, &[(String, String)]),
    with: Vec<StagedFile>,
) -> Result<SynthOutcome> {
    let started = std::time::Instant::now();
    let table = sink.finish(metadata)?;
    diagnostics.timings_seconds.push(PhaseTiming::new("close table", started.elapsed().as_secs_f64()));
    diagnostics.peak_memory_bytes = peak_memory_bytes();
    let mut staged = vec![table];
    staged.extend(stage_reports(outputs.report.as_deref(), outputs.diagnostics.as_deref(), &report, &diagnostics)?);
    staged.extend(with);
    commit_all(staged)?;
    Ok(SynthOutcome { report, diagnostics })
}

/// The report and the diagnostics as JSON in temporary files beside the paths asked for, to commit with
/// the table (or the parts of a distributed run).
pub(crate) fn stage_reports(
    report_path: Option<&Path>,
    diagnostics_path: Option<&Path>,
    report: &RunReport,
    diagnostics: &Diagnostics,
) -> Result<Vec<StagedFile>> {
    let mut staged = Vec::new();
    if let Some(path) = report_path {
        staged.push(StagedFile::with_bytes(path, to_json(report)?.as_bytes())?);
    }
    if let Some(path) = diagnostics_path {
        staged.push(StagedFile::with_bytes(path, to_json(diagnostics)?.as_bytes())?);
    }
    Ok(staged)
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string_pretty(value).map_err(|error| Error::internal(format!("serialising a report: {error}")))
}
