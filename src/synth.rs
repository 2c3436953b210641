//! `synth`: the whole PMM run, phase by phase (SPEC §2):
//! source → binner → mechanism (noise + consistency) → sampler → sink, plus the two reports.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::binner::device::ChosenBinner;
use crate::binner::{scan_leaf_counts, AxisPlan, ScanStats};
use crate::bounds::ColumnBounds;
use crate::error::{Error, Result};
use crate::mechanism::pmm::{coarsen_leaves, release_leaf_counts, release_root_count};
use crate::noise::discrete_laplace::RationalScale;
use crate::noise::{fill_from_os, NoiseKey};
use crate::options::{value_name, Mechanism, SynthOptions};
use crate::partition::{CellGeometry, MAX_DEPTH};
use crate::privacy::{choose_depth, max_depth_for_memory, LevelSchedule, Neighbours, RootNoise};
use crate::progress::Progress;
use crate::report::*;
use crate::sampler::{allocate_rows, LeafSampler, SAMPLE_BLOCK_ROWS};
use crate::sink::{write_file_atomically, ParquetSink};
use crate::source::{ColumnKind, NumericColumn, ParquetSource};

/// Rows generated and written per output batch (a whole number of sampler blocks).
pub const OUTPUT_BATCH_ROWS: usize = 256 * SAMPLE_BLOCK_ROWS;

/// Cell-array memory when the machine's size is unknown.
const FALLBACK_MEMORY_LIMIT: u64 = 4 << 30;

/// How far above the file's row count n̂ is planned for before the data are binned: Lap_Z(σ_0)
/// exceeds 20σ_0 with probability below e^{-20}, and then the pass is simply repeated at the right depth.
const ROOT_NOISE_HEADROOM: f64 = 20.0;

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

/// Runs PMM on `input` and writes the synthetic table (and reports) to `outputs`.
pub fn synthesize(
    input: &Path,
    outputs: &OutputPaths,
    options: &SynthOptions,
    progress: &Progress,
) -> Result<SynthOutcome> {
    options.validate()?;
    if options.mechanism != Mechanism::Pmm {
        return Err(Error::bad_input(format!(
            "--mechanism {} is not available in this version; use --mechanism pmm",
            value_name(&options.mechanism)
        )));
    }
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
    pool.install(|| {
        run_pmm(
            &source, &columns, &bounds, outputs, options, threads, progress,
        )
    })
}

/// The randomness of one run: a secret noise key, and a separate seed for post-processing draws.
struct RunSeeds {
    noise: NoiseKey,
    post_processing: u64,
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

fn run_pmm(
    source: &ParquetSource,
    columns: &[NumericColumn],
    bounds: &[ColumnBounds],
    outputs: &OutputPaths,
    options: &SynthOptions,
    threads: usize,
    progress: &Progress,
) -> Result<SynthOutcome> {
    let dims = columns.len();
    let epsilon = options.epsilon;
    let memory_limit = options.memory_limit.unwrap_or_else(|| {
        physical_memory_bytes().map_or(FALLBACK_MEMORY_LIMIT, |bytes| bytes / 2)
    });
    let memory_depth = max_depth_for_memory(memory_limit, threads);
    let seeds = RunSeeds::new(options.seed)?;
    let mut timings = Vec::new();

    // Plan the depth from public inputs only (and, under add-remove, plan to release n̂ first).
    let root_scale = match (options.depth, options.neighbours) {
        (None, Neighbours::AddRemove) => Some(
            RationalScale::round_up(1.0 / (epsilon * options.root_share)).ok_or_else(|| {
                Error::bad_input(format!(
                    "epsilon {epsilon} with root share {} is too small",
                    options.root_share
                ))
            })?,
        ),
        _ => None,
    };
    let level_epsilon = match root_scale {
        Some(_) => epsilon * (1.0 - options.root_share),
        None => epsilon,
    };
    let (planned_depth, depth_rule) = match (options.depth, options.neighbours) {
        (Some(depth), _) => {
            if depth > MAX_DEPTH || depth > memory_depth {
                return Err(Error::bad_input(format!(
                    "--depth {depth} is too large: this machine's memory allows at most {} (cells need {} bytes at depth {depth})",
                    memory_depth.min(MAX_DEPTH),
                    crate::privacy::cell_memory_bytes(depth, threads)
                )));
            }
            (depth, "given by --depth".to_string())
        }
        (None, Neighbours::Replace) => {
            let n = source.row_count() as f64;
            let depth = choose_depth(Neighbours::Replace, epsilon, dims, n, None, memory_depth);
            (depth, format!("minimises the Theorem 3.9 bound for the public n (capped at {memory_depth} by memory)"))
        }
        (None, Neighbours::AddRemove) => {
            let sigma = root_scale.expect("planned above").to_f64();
            let guess = source.row_count() as f64 + ROOT_NOISE_HEADROOM * sigma;
            let depth = choose_depth(
                Neighbours::AddRemove,
                level_epsilon,
                dims,
                guess,
                Some(sigma),
                memory_depth,
            );
            (depth, format!("minimises the Theorem 3.9 bound for the released n̂ (capped at {memory_depth} by memory)"))
        }
    };

    let started = Instant::now();
    let (mut leaves, stats, binning) =
        bin_leaves(source, columns, bounds, planned_depth, options, progress)?;
    timings.push(PhaseTiming {
        phase: "bin",
        seconds: started.elapsed().as_secs_f64(),
    });

    let started = Instant::now();
    let (depth, released_root, schedule) = match root_scale {
        Some(scale) => {
            let n_hat = release_root_count(stats.rows_binned, scale, &seeds.noise);
            let depth = choose_depth(
                Neighbours::AddRemove,
                level_epsilon,
                dims,
                n_hat as f64,
                Some(scale.to_f64()),
                memory_depth,
            );
            if depth <= planned_depth {
                leaves = coarsen_leaves(leaves, planned_depth, depth);
            } else {
                leaves = bin_leaves(source, columns, bounds, depth, options, progress)?.0;
            }
            let schedule = LevelSchedule::new(
                Neighbours::AddRemove,
                level_epsilon,
                dims,
                depth,
                RootNoise::Released(scale),
            )?;
            (depth, Some(n_hat), schedule)
        }
        None => {
            let schedule = LevelSchedule::new(
                options.neighbours,
                epsilon,
                dims,
                planned_depth,
                RootNoise::InSchedule,
            )?;
            (planned_depth, None, schedule)
        }
    };
    let released = release_leaf_counts(
        leaves,
        &schedule,
        released_root,
        &seeds.noise,
        options.consistency,
        seeds.post_processing,
    );
    let root_count: u64 = released.iter().sum();
    timings.push(PhaseTiming {
        phase: "noise and consistency",
        seconds: started.elapsed().as_secs_f64(),
    });

    let started = Instant::now();
    let geometry = CellGeometry::new(dims, depth);
    let counts = match options.rows {
        Some(rows) => allocate_rows(&released, rows),
        None => released,
    };
    let sampler = LeafSampler::new(
        geometry,
        &counts,
        options.placement,
        seeds.post_processing.rotate_left(17),
    );
    drop(counts);
    let total_rows = sampler.total_rows();
    let mut sink = ParquetSink::create(&outputs.table, columns, bounds)?;
    let bar = progress.phase("sample", total_rows, "rows");
    // Double-buffered: the next batch is sampled while the current one is encoded and written.
    let batch_rows = |start: u64| (total_rows - start).min(OUTPUT_BATCH_ROWS as u64) as usize;
    let mut current = vec![Vec::new(); dims];
    let mut next = vec![Vec::new(); dims];
    if total_rows > 0 {
        sampler.sample_rows(0, batch_rows(0), &mut current);
    }
    let mut start = 0u64;
    while start < total_rows {
        let rows = batch_rows(start);
        let next_start = start + rows as u64;
        let (written, ()) = rayon::join(
            || sink.write_normalised(&current),
            || {
                if next_start < total_rows {
                    sampler.sample_rows(next_start, batch_rows(next_start), &mut next);
                }
            },
        );
        written?;
        bar.advance(rows as u64);
        std::mem::swap(&mut current, &mut next);
        start = next_start;
    }
    bar.finish();
    timings.push(PhaseTiming {
        phase: "sample and write",
        seconds: started.elapsed().as_secs_f64(),
    });

    let report = RunReport {
        tool: ToolInfo::current(),
        mechanism: "pmm",
        guarantee: guarantee(options, &schedule),
        input: InputInfo {
            file: source.path().display().to_string(),
            columns: columns
                .iter()
                .zip(bounds)
                .map(|(column, bounds)| ColumnInfo {
                    name: column.name.clone(),
                    data_type: column.data_type.to_string(),
                    lo: bounds.lo,
                    hi: bounds.hi,
                })
                .collect(),
        },
        parameters: Parameters {
            depth,
            depth_rule,
            consistency: value_name(&options.consistency),
            placement: value_name(&options.placement),
            levels: (0..=depth)
                .map(|level| LevelInfo {
                    level,
                    sigma: schedule.scales[level as usize].map(|scale| scale.to_f64()),
                    sigma_num: schedule.scales[level as usize].map(|scale| scale.num()),
                    sigma_den: schedule.scales[level as usize].map(|scale| scale.den()),
                    epsilon: schedule.level_epsilon(level),
                    cell_diameter: geometry.diameter(level),
                })
                .collect(),
        },
        release: ReleaseInfo {
            root_count,
            root_count_is: match options.neighbours {
                Neighbours::AddRemove => "released noisy count n̂",
                Neighbours::Replace => "public n",
            },
            synthetic_rows: total_rows,
        },
        accuracy: AccuracyBound {
            expected_w1_bound: schedule.accuracy_bound(root_count as f64),
            units: "normalised l-infinity units on [0,1]^d (multiply axis k by hi_k - lo_k for column units)",
            n: root_count,
            formula: "E W1 <= (2*sqrt(2)/n) * sum_j sigma_j * Delta_{j-1} + 2^-floor(r/d)  (dissertation Thm 3.9)",
        },
        device: binning.clone(),
    };
    let names: Vec<String> = columns.iter().map(|column| column.name.clone()).collect();
    let mut diagnostics = Diagnostics::new(&stats, &names, threads, binning);
    diagnostics.timings_seconds = timings;
    diagnostics.peak_memory_bytes = peak_memory_bytes();

    // Reports first, the table last: a failure on the way leaves no output at all.
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

/// The binning phase on the chosen device; returns the histogram, what the scan saw and which binner ran.
fn bin_leaves(
    source: &ParquetSource,
    columns: &[NumericColumn],
    bounds: &[ColumnBounds],
    depth: u32,
    options: &SynthOptions,
    progress: &Progress,
) -> Result<(Vec<u64>, ScanStats, String)> {
    let geometry = CellGeometry::new(columns.len(), depth);
    let axes = AxisPlan::for_geometry(&geometry, bounds);
    let bar = progress.phase("bin", source.row_count(), "rows");
    let outcome = match ChosenBinner::for_run(options.device, geometry)? {
        ChosenBinner::Cpu(binner, line) => {
            let (leaves, stats) =
                scan_leaf_counts(source, columns, &axes, options.nulls, &binner, &bar)?;
            (leaves, stats, line)
        }
        #[cfg(feature = "gpu")]
        ChosenBinner::Gpu(binner, line) => {
            let (leaves, stats) =
                scan_leaf_counts(source, columns, &axes, options.nulls, &binner, &bar)?;
            (leaves, stats, line)
        }
    };
    bar.finish();
    Ok(outcome)
}

fn guarantee(options: &SynthOptions, schedule: &LevelSchedule) -> Guarantee {
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
        epsilon_spent: schedule.spent_epsilon(),
        neighbours: options.neighbours.describe().to_string(),
        public_inputs,
        fit_for_release: options.seed.is_none(),
        noise: "exact discrete Laplace (Canonne-Kamath-Steinke) on integer counts, ChaCha12 keyed from the OS",
    }
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
