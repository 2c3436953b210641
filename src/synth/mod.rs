//! `synth`: one synthesis run, phase by phase (SPEC §2):
//! source → binner → mechanism → sampler → sink, plus the two reports.
//!
//! This module holds what every mechanism shares (opening the input, seeds, writing the table, committing
//! the outputs together); each mechanism's run is a submodule.

mod lowdim;
mod pmm;
mod psmm;
pub mod report;

use std::path::{Path, PathBuf};

use crate::binner::device::ChosenBinner;
use crate::binner::{scan_leaf_counts, AxisPlan, ScanStats};
use crate::geometry::bounds::ColumnBounds;
use crate::error::{Error, Result};
use crate::noise::{fill_from_os, NoiseKey};
use crate::options::{Mechanism, SynthOptions};
use crate::geometry::partition::CellGeometry;
use crate::privacy::Neighbours;
use crate::progress::Progress;
use crate::synth::report::*;
use crate::sampler::{LeafSampler, SAMPLE_BLOCK_ROWS};
use crate::io::sink::{write_file_atomically, ParquetSink};
use crate::io::source::{ColumnKind, NumericColumn, ParquetSource};

/// Rows generated and written per output batch (a whole number of sampler blocks).
pub const OUTPUT_BATCH_ROWS: usize = 256 * SAMPLE_BLOCK_ROWS;

/// Cell-array memory when the machine's size is unknown.
const FALLBACK_MEMORY_LIMIT: u64 = 4 << 30;

/// Separates the post-processing seed from the noise key derived from the same user seed.
const POST_PROCESSING_SEED_TWEAK: u64 = 0x5eed_0f5a_3b1e_0001;

/// Where a run writes. The table, the report and the diagnostics appear together or not at all.
#[derive(Clone, Debug)]
pub struct OutputPaths {
    pub table: PathBuf,
    pub report: Option<PathBuf>,
    pub diagnostics: Option<PathBuf>,
}

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
    refuse_to_overwrite_input(input, outputs)?;
    let source = ParquetSource::open(input)?;
    let names: Vec<String> = options
        .bounds
        .iter()
        .map(|bounds| bounds.column.clone())
        .collect();
    let columns = source.numeric_columns(&names)?;
    let bounds: Vec<ColumnBounds> = columns
        .iter()
        .map(|column| {
            options
                .bounds
                .iter()
                .find(|bounds| bounds.column == column.name)
                .cloned()
                .expect("columns come from the bounds")
        })
        .collect();
    for (column, bounds) in columns.iter().zip(&bounds) {
        check_bounds_fit_type(&source, column, bounds)?;
    }
    let threads = options
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|error| Error::internal(format!("cannot start {threads} threads: {error}")))?;
    let run = RunInput {
        source: &source,
        columns: &columns,
        bounds: &bounds,
        outputs,
        options,
        threads,
        progress,
        seeds: RunSeeds::new(options.seed)?,
    };
    pool.install(|| match options.mechanism {
        Mechanism::Pmm => pmm::run(&run),
        Mechanism::Lowdim => lowdim::run(&run),
        Mechanism::Psmm => psmm::run(&run),
    })
}

/// Everything a mechanism's run reads: the opened input, its used columns (schema order) with their
/// public bounds, the options and the run's randomness.
pub(crate) struct RunInput<'a> {
    pub source: &'a ParquetSource,
    pub columns: &'a [NumericColumn],
    pub bounds: &'a [ColumnBounds],
    pub outputs: &'a OutputPaths,
    pub options: &'a SynthOptions,
    pub threads: usize,
    pub progress: &'a Progress,
    pub seeds: RunSeeds,
}

impl RunInput<'_> {
    pub fn dims(&self) -> usize {
        self.columns.len()
    }

    /// Bytes the cell arrays may use: the option, else half the machine.
    pub fn memory_limit(&self) -> u64 {
        self.options.memory_limit.unwrap_or_else(|| {
            physical_memory_bytes().map_or(FALLBACK_MEMORY_LIMIT, |bytes| bytes / 2)
        })
    }

    pub fn column_names(&self) -> Vec<String> {
        self.columns
            .iter()
            .map(|column| column.name.clone())
            .collect()
    }

    /// The report's description of the input: public facts only.
    pub fn input_info(&self) -> InputInfo {
        InputInfo {
            file: self.source.path().display().to_string(),
            columns: self
                .columns
                .iter()
                .zip(self.bounds)
                .map(|(column, bounds)| ColumnInfo {
                    name: column.name.clone(),
                    data_type: column.data_type.to_string(),
                    lo: bounds.lo,
                    hi: bounds.hi,
                })
                .collect(),
        }
    }

    /// The guarantee of a pure ε-DP release that spent `epsilon_spent` (never above ε).
    pub fn guarantee(&self, epsilon_spent: f64) -> Guarantee {
        let options = self.options;
        let mut public_inputs = vec![
            "column names, types and bounds".to_string(),
            "epsilon, depth rule and every other option".to_string(),
        ];
        if options.neighbours == Neighbours::Replace {
            public_inputs.push("the row count n (replace relation)".to_string());
        }
        Guarantee {
            epsilon: options.epsilon,
            delta: 0.0,
            epsilon_spent,
            neighbours: options.neighbours.describe().to_string(),
            public_inputs,
            fit_for_release: options.seed.is_none(),
            noise: "exact discrete Laplace (Canonne-Kamath-Steinke) on integer counts, ChaCha12 keyed from the OS",
        }
    }

    /// The binning pass at `geometry` on the chosen device: the leaf histogram, what the scan saw and
    /// which binner ran.
    pub fn bin_leaves(&self, geometry: CellGeometry) -> Result<(Vec<u64>, ScanStats, String)> {
        let axes = AxisPlan::for_geometry(&geometry, self.bounds);
        let bar = self.progress.phase("bin", self.source.row_count(), "rows");
        let (source, columns, nulls) = (self.source, self.columns, self.options.nulls);
        let outcome = match ChosenBinner::for_run(self.options.device, geometry)? {
            ChosenBinner::Cpu(binner, line) => {
                let (leaves, stats) =
                    scan_leaf_counts(source, columns, &axes, nulls, &binner, &bar)?;
                (leaves, stats, line)
            }
            #[cfg(feature = "gpu")]
            ChosenBinner::Gpu(binner, line) => {
                let (leaves, stats) =
                    scan_leaf_counts(source, columns, &axes, nulls, &binner, &bar)?;
                (leaves, stats, line)
            }
        };
        bar.finish();
        Ok(outcome)
    }
}

/// The randomness of one run: a secret noise key, and a separate seed for post-processing draws.
pub(crate) struct RunSeeds {
    pub noise: NoiseKey,
    pub post_processing: u64,
}

impl RunSeeds {
    fn new(seed: Option<u64>) -> Result<Self> {
        Ok(match seed {
            Some(seed) => RunSeeds {
                noise: NoiseKey::from_user_seed(seed),
                post_processing: seed ^ POST_PROCESSING_SEED_TWEAK,
            },
            None => {
                let mut bytes = [0u8; 8];
                fill_from_os(&mut bytes)?;
                RunSeeds {
                    noise: NoiseKey::from_os()?,
                    post_processing: u64::from_le_bytes(bytes),
                }
            }
        })
    }
}

/// Synthetic rows in normalised [0,1] units, generated in any order of batches with the same result.
pub(crate) trait RowGenerator: Sync {
    fn total_rows(&self) -> u64;
    /// Fills `columns[k]` with rows `start .. start + rows` of coordinate k.
    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]);
}

impl RowGenerator for LeafSampler {
    fn total_rows(&self) -> u64 {
        LeafSampler::total_rows(self)
    }

    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        LeafSampler::sample_rows(self, start, rows, columns)
    }
}

/// Generates every row of `generator` into `sink`, double-buffered: the next batch is sampled while the
/// current one is encoded and written. Returns the number of rows written.
fn write_rows(
    sink: &mut ParquetSink,
    generator: &impl RowGenerator,
    dims: usize,
    progress: &Progress,
) -> Result<u64> {
    let total_rows = generator.total_rows();
    let bar = progress.phase("sample", total_rows, "rows");
    let batch_rows = |start: u64| (total_rows - start).min(OUTPUT_BATCH_ROWS as u64) as usize;
    let mut current = vec![Vec::new(); dims];
    let mut next = vec![Vec::new(); dims];
    if total_rows > 0 {
        generator.sample_rows(0, batch_rows(0), &mut current);
    }
    let mut start = 0u64;
    while start < total_rows {
        let rows = batch_rows(start);
        let next_start = start + rows as u64;
        let (written, ()) = rayon::join(
            || sink.write_normalised(&current),
            || {
                if next_start < total_rows {
                    generator.sample_rows(next_start, batch_rows(next_start), &mut next);
                }
            },
        );
        written?;
        bar.advance(rows as u64);
        std::mem::swap(&mut current, &mut next);
        start = next_start;
    }
    bar.finish();
    Ok(total_rows)
}

/// The last phase of every run: creates the output table (uncommitted), writes every row of `generator`
/// into it and records the phase's time since `started`. Returns the sink, for [`commit_outputs`], and
/// the number of rows written.
pub(crate) fn write_table(
    run: &RunInput,
    generator: &impl RowGenerator,
    phase: &'static str,
    started: std::time::Instant,
    timings: &mut Vec<PhaseTiming>,
) -> Result<(ParquetSink, u64)> {
    let mut sink = ParquetSink::create(&run.outputs.table, run.columns, run.bounds)?;
    let total_rows = write_rows(&mut sink, generator, run.dims(), run.progress)?;
    timings.push(PhaseTiming {
        phase,
        seconds: started.elapsed().as_secs_f64(),
    });
    Ok((sink, total_rows))
}

/// Writes the reports, then commits the table: all appear, or (on any failure) none does.
pub(crate) fn commit_outputs(
    outputs: &OutputPaths,
    report: RunReport,
    mut diagnostics: Diagnostics,
    sink: ParquetSink,
) -> Result<SynthOutcome> {
    diagnostics.peak_memory_bytes = peak_memory_bytes();
    let mut written: Vec<PathBuf> = Vec::new();
    let result =
        write_reports(outputs, &report, &diagnostics, &mut written).and_then(|()| sink.commit());
    if result.is_err() {
        for path in written {
            let _ = std::fs::remove_file(path);
        }
    }
    result?;
    Ok(SynthOutcome {
        report,
        diagnostics,
    })
}

fn write_reports(
    outputs: &OutputPaths,
    report: &RunReport,
    diagnostics: &Diagnostics,
    written: &mut Vec<PathBuf>,
) -> Result<()> {
    if let Some(path) = &outputs.report {
        write_file_atomically(path, to_json(report)?.as_bytes())?;
        written.push(path.clone());
    }
    if let Some(path) = &outputs.diagnostics {
        write_file_atomically(path, to_json(diagnostics)?.as_bytes())?;
        written.push(path.clone());
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string_pretty(value)
        .map_err(|error| Error::internal(format!("serialising a report: {error}")))
}

/// Integer columns need an integer inside their bounds, and bounds inside the type's range.
fn check_bounds_fit_type(
    source: &ParquetSource,
    column: &NumericColumn,
    bounds: &ColumnBounds,
) -> Result<()> {
    if column.kind != ColumnKind::Integer {
        return Ok(());
    }
    if bounds.lo.ceil() > bounds.hi.floor() {
        return Err(Error::in_column(
            source.path(),
            &column.name,
            format!("bounds {}:{} hold no integer", bounds.lo, bounds.hi),
        ));
    }
    use arrow::datatypes::DataType::*;
    let range = match column.data_type {
        Int8 => Some((i8::MIN as f64, i8::MAX as f64)),
        Int16 => Some((i16::MIN as f64, i16::MAX as f64)),
        Int32 | Date32 => Some((i32::MIN as f64, i32::MAX as f64)),
        UInt8 => Some((0.0, u8::MAX as f64)),
        UInt16 => Some((0.0, u16::MAX as f64)),
        UInt32 => Some((0.0, u32::MAX as f64)),
        UInt64 => Some((0.0, u64::MAX as f64)),
        _ => None,
    };
    match range {
        Some((min, max)) if bounds.lo < min || bounds.hi > max => Err(Error::in_column(
            source.path(),
            &column.name,
            format!(
                "bounds {}:{} exceed the range of type {} ({min}:{max})",
                bounds.lo, bounds.hi, column.data_type
            ),
        )),
        _ => Ok(()),
    }
}

fn refuse_to_overwrite_input(input: &Path, outputs: &OutputPaths) -> Result<()> {
    let same = |path: &Path| match (input.canonicalize(), path.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    for path in std::iter::once(&outputs.table)
        .chain(outputs.report.iter())
        .chain(outputs.diagnostics.iter())
    {
        if same(path) {
            return Err(Error::in_file(path, "would overwrite the input file"));
        }
    }
    Ok(())
}
