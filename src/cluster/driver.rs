//! `synth` across ranks. lowdim, PSMM, PE and covloss: each rank's passes over its share end in sums over the
//! ranks, so every rank makes the whole single-machine release and writes its even share of the rows
//! ([`PartRun::replicated`]). PMM: every rank opens the input and makes the same plan from public inputs,
//! and runs the single machine's release (`PmmPlan::release_on`) on its share of the row groups (balanced
//! by compressed bytes) through a [`RankBackend`]: each rank releases and samples the subtrees it owns and
//! writes `part-RANK.parquet` beside the others. The parts are written to temporary names and renamed only
//! once every rank has written its own; rank 0 then writes the report (the single-machine report) and the
//! diagnostics (with one entry per rank).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::backend::RankBackend;
use super::exchange::ExchangeRule;
use super::{agree, even_starts, weighted_starts, with_sums_on_this_thread, Communicator};
use crate::binner::pass::DataPass;
use crate::error::{Error, Result};
use crate::io::paths::{check_output_paths, NamedPath};
use crate::io::sink::ParquetSink;
use crate::io::source::Source;
use crate::io::staging::commit_all;
use crate::mechanism::covloss::points::BATCH_ROWS as ENCODED_BATCH_ROWS;
use crate::mechanism::pmm::pairs::PairMappedRows;
use crate::mechanism::pmm::release::Backend;
use crate::mechanism::pmm::PmmPlan;
use crate::mechanism::{Plan, PublicInputs, Release, ReleasedMeasure};
use crate::options::{MechanismOptions, PmmOptions, SynthOptions};
use crate::privacy::RunSeeds;
use crate::progress::{PhaseTiming, Progress, Timings};
use crate::sampler::{RowGenerator, RowRange};
use crate::synth::report::{Diagnostics, RankInfo, RunReport};
use crate::synth::{public_inputs, stage_reports, thread_pool, write_encoded, write_rows, RunColumns, RunFacts};

/// Where a distributed run writes: the parts in a directory, the reports (rank 0) beside them.
#[derive(Clone, Debug)]
pub struct PartsOutput {
    pub directory: PathBuf,
    pub report: Option<PathBuf>,
    pub diagnostics: Option<PathBuf>,
}

/// The part rank `rank` writes: parts sort in rank order, so the directory reads as the whole table.
pub fn part_path(directory: &Path, rank: usize) -> PathBuf {
    directory.join(format!("part-{rank:05}.parquet"))
}

/// Runs `options`' mechanism on `input` across the ranks of `comm` (every rank calls this with the same
/// arguments): PMM (and so auto) split by subtrees, lowdim, PSMM, PE and covloss replicated
/// ([`PartRun::replicated`]).
/// Rank 0 returns the run report.
pub fn synthesize_across(
    comm: &dyn Communicator,
    input: &Path,
    outputs: &PartsOutput,
    options: &SynthOptions,
    progress: &Progress,
) -> Result<Option<RunReport>> {
    let started = Instant::now();
    options.validate()?;
    if options.private_bounds.is_some() {
        return Err(Error::bad_input(
            "--private-bounds does not run across ranks yet: give every column public --bounds (or the bounds a \
             single-machine synth --private-bounds release published, whose epsilon counts toward the data's total)",
        ));
    }
    let split = match &options.mechanism {
        MechanismOptions::Pmm(pmm) => Some(pmm.clone()),
        MechanismOptions::Lowdim(_)
        | MechanismOptions::Psmm(_)
        | MechanismOptions::Pe(_)
        | MechanismOptions::Covloss(_) => None,
        other => {
            let runs = "pmm, auto, lowdim, psmm, pe and covloss do";
            return Err(Error::bad_input(format!(
                "--mechanism {} does not run across ranks yet ({runs}): run it on one machine",
                other.name()
            )));
        }
    };
    let part = part_path(&outputs.directory, comm.rank());
    let mut named = vec![NamedPath::new("the part", &part)];
    named.extend(outputs.report.as_deref().map(|path| NamedPath::new("--report", path)));
    named.extend(outputs.diagnostics.as_deref().map(|path| NamedPath::new("--diagnostics", path)));
    check_output_paths(&[NamedPath::new("the input", input)], &named)?;
    let seeds = shared_seeds(comm, options.seed)?;
    let opened = agree(comm, open(input, &outputs.directory, options))?;
    let (source, run_columns) = opened;
    let (columns, bounds) = run_columns.numeric();
    let split = split.map(|pmm| pmm.for_columns((&run_columns.code_slots(), &run_columns.null_bands())));
    let (threads, pool) = thread_pool(options)?;
    let public = shared_public(comm, public_inputs(&source, &run_columns, options, threads));
    let weights: Vec<u64> = (0..source.row_group_count()).map(|group| source.row_group_bytes(group)).collect();
    let shares = weighted_starts(&weights, comm.size());
    let rank = comm.rank();
    let row_groups = (shares[rank + 1] - shares[rank]) as u64;
    let share = source.keep_row_groups(shares[rank]..shares[rank + 1]);
    let data = DataPass { source: &share, columns, bounds, nulls: options.nulls, progress, ranks: None };
    let mut timings = Timings::default();
    let run = PartRun { comm, pool: &pool, part: &part, options, seeds: &seeds };
    let written = match split {
        Some(pmm) => run.split(&pmm, public, &data, &mut timings)?,
        None => run.replicated(&public, &data, &mut timings)?,
    };
    let WrittenPart { whole, sink, rows_read, leaves_owned, rows_written } = written;
    let epsilon_spent = whole.budget.check()?;
    let facts = RunFacts { source: &share, columns: &run_columns, options };
    let staged = agree(comm, sink.finish(&facts.table_metadata(&whole)))?;
    // Every part is complete: rename them.
    agree(comm, commit_all(vec![staged]))?;
    let mut report = facts.report(&whole, epsilon_spent, 0);
    let mine =
        RankInfo { rank, row_groups, rows_read, leaves_owned, rows_written, seconds: started.elapsed().as_secs_f64() };
    let ranks = gather_ranks(comm, &mine);
    let mut written_total = [rows_written];
    comm.sum(&mut written_total);
    report.release.synthetic_rows = written_total[0];
    if rank != 0 {
        return Ok(None);
    }
    remove_stale_parts(&outputs.directory, comm.size());
    let mut diagnostics = Diagnostics::new(&whole.scan, &run_columns.names(), threads, whole.binning.clone());
    diagnostics.timings_seconds = timings.into_phases();
    diagnostics.timings_seconds.push(PhaseTiming::new("total", started.elapsed().as_secs_f64()));
    diagnostics.input_page_checksums = share.has_page_checksums();
    diagnostics.peak_memory_bytes = crate::synth::memory::peak_memory_bytes();
    diagnostics.ranks = ranks;
    let staged = stage_reports(outputs.report.as_deref(), outputs.diagnostics.as_deref(), &report, &diagnostics)?;
    commit_all(staged)?;
    Ok(Some(report))
}

/// One rank's run: its communicator, pool, part and the run's shared seeds.
struct PartRun<'a> {
    comm: &'a dyn Communicator,
    pool: &'a rayon::ThreadPool,
    part: &'a Path,
    options: &'a SynthOptions,
    seeds: &'a RunSeeds,
}

/// The whole release as every rank knows it, and this rank's part of the table, written under a temporary
/// name but for its footer (which names the whole release).
struct WrittenPart {
    whole: Release,
    sink: ParquetSink,
    rows_read: u64,
    leaves_owned: u64,
    rows_written: u64,
}

impl PartRun<'_> {
    /// PMM's tree split by subtrees over the ranks: each rank runs the single machine's release on its
    /// [`RankBackend`], samples the leaves it owns, then writes an even share of the rows.
    fn split(
        &self,
        pmm: &PmmOptions,
        rank_public: PublicInputs,
        data: &DataPass,
        timings: &mut Timings,
    ) -> Result<WrittenPart> {
        let PartRun { comm, pool, part, options, seeds } = *self;
        let (columns, bounds) = (data.columns, data.bounds);
        // The tree is split over the ranks: its memory cap is every rank's limit together. A rank whose
        // full leaf histogram would not fit its own limit sends sorted leaf codes instead ([`Exchange`]).
        let mut public = rank_public;
        public.memory_limit = rank_public.memory_limit.saturating_mul(comm.size() as u64);
        let plan = PmmPlan::new(&public, pmm)?;
        let exchange = ExchangeRule {
            file_rows: public.file_rows,
            ranks: comm.size(),
            rank_memory_limit: rank_public.memory_limit,
            threads: rank_public.threads,
        };
        let backend = RankBackend::new(comm, pool, data, exchange, plan.planned_depth());
        let released = plan.release_on(&backend, seeds, timings)?;
        let value_cells = released.value_cells();
        let (rows, placement) = (options.rows, (options.placement, options.row_order, seeds.placement()));
        let joint_rows = backend.rows(&released.leaves, released.geometry, rows, placement, released.maps())?;
        let generator: Box<dyn RowGenerator + '_> = match released.pair_maps() {
            Some(maps) => Box::new(PairMappedRows { inner: joint_rows, maps }),
            None => joint_rows,
        };
        let written = timings.time_in_parts("sample and write", |parts| {
            pool.install(|| -> Result<_> {
                let mut sink = ParquetSink::create(part, columns, bounds, &value_cells)?;
                let rows = write_rows(&mut sink, generator.as_ref(), data.progress, parts)?;
                Ok((sink, rows))
            })
        });
        drop(generator);
        let (sink, rows_written) = agree(comm, written)?;
        let leaves_owned = released.leaves.leaves_owned() as u64;
        let whole = released.into_release(&backend);
        Ok(WrittenPart { whole, sink, rows_read: data.source.row_count(), leaves_owned, rows_written })
    }

    /// lowdim, PSMM, PE and covloss: each rank's passes read its share and end in sums over the ranks
    /// ([`DataPass::ranks`]), so every rank makes the single-machine release whole, with the same keyed
    /// noise (each holds it all, as one machine would: the plan keeps the rank's own memory limit), and
    /// writes its even share of the rows, numbered in the whole table (covloss's in whole batches).
    fn replicated(&self, public: &PublicInputs, data: &DataPass, timings: &mut Timings) -> Result<WrittenPart> {
        let PartRun { comm, pool, part, options, seeds } = *self;
        let (columns, bounds) = (data.columns, data.bounds);
        let whole = with_sums_on_this_thread(comm, pool, |ranks| {
            let data = DataPass { ranks: Some(ranks), ..*data };
            Plan::new(public, &options.mechanism)?.release(&data, seeds, timings)
        })?;
        let (rank, ranks) = (comm.rank(), comm.size());
        let written = timings.time_in_parts(whole.output_phase, |parts| {
            pool.install(|| -> Result<_> {
                let (sink, rows) = match (&whole.measure, public.encoding) {
                    (ReleasedMeasure::Encoded { points, rows: released }, Some(encoding)) => {
                        // Whole batches: each batch's rows are drawn from where it starts.
                        let (total, batch) = (options.rows.unwrap_or(*released), ENCODED_BATCH_ROWS as u64);
                        let starts = even_starts(total.div_ceil(batch) as usize, ranks);
                        let [first, end] = [starts[rank], starts[rank + 1]].map(|at| (at as u64 * batch).min(total));
                        write_encoded(encoding, points, first..end, seeds.placement(), part, data.progress)?
                    }
                    _ => {
                        let table = whole.measure.rows(
                            options.rows,
                            options.placement,
                            options.row_order,
                            seeds.placement(),
                        )?;
                        let starts = even_starts(table.total_rows() as usize, ranks);
                        let (first, end) = (starts[rank] as u64, starts[rank + 1] as u64);
                        let share = RowRange { inner: table, first, rows: end - first };
                        let value_cells = whole.measure.value_cells(columns.len());
                        let mut sink = ParquetSink::create(part, columns, bounds, &value_cells)?;
                        let rows = write_rows(&mut sink, &share, data.progress, parts)?;
                        (sink, rows)
                    }
                };
                Ok((sink, rows))
            })
        });
        let (sink, rows_written) = agree(comm, written)?;
        Ok(WrittenPart { whole, sink, rows_read: data.source.row_count(), leaves_owned: 0, rows_written })
    }
}

/// The input (every rank opens all of it: the plan needs every footer) and its used columns; and the
/// output directory, made if missing.
fn open(input: &Path, directory: &Path, options: &SynthOptions) -> Result<(Source, RunColumns)> {
    let source = Source::open_with(input, options.hive_columns)?;
    let columns = RunColumns::of(&source, options)?;
    std::fs::create_dir_all(directory)
        .map_err(|error| Error::in_file(directory, format!("cannot create the output directory: {error}")))?;
    Ok((source, columns))
}

/// Rank 0's seeds on every rank: from the OS (or `--seed`) once, then shared.
fn shared_seeds(comm: &dyn Communicator, seed: Option<u64>) -> Result<RunSeeds> {
    let drawn = if comm.rank() == 0 { RunSeeds::new(seed).map(|seeds| seeds.to_bytes()) } else { Ok([0u8; 40]) };
    let mut bytes = agree(comm, drawn)?;
    comm.broadcast(&mut bytes);
    Ok(RunSeeds::from_bytes(bytes))
}

/// Rank 0's memory limit and thread count, which size the plan's tree: every rank must plan the same
/// tree, whatever its own machine (each still runs its own number of threads).
fn shared_public<'a>(comm: &dyn Communicator, mut public: PublicInputs<'a>) -> PublicInputs<'a> {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&public.memory_limit.to_le_bytes());
    bytes[8..].copy_from_slice(&(public.threads as u64).to_le_bytes());
    comm.broadcast(&mut bytes);
    public.memory_limit = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    public.threads = u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes")) as usize;
    public
}

/// Every rank's [`RankInfo`], in rank order.
fn gather_ranks(comm: &dyn Communicator, mine: &RankInfo) -> Vec<RankInfo> {
    const FIELDS: usize = 5;
    let mut values = vec![0u64; comm.size() * FIELDS];
    values[mine.rank * FIELDS..(mine.rank + 1) * FIELDS].copy_from_slice(&[
        mine.row_groups,
        mine.rows_read,
        mine.leaves_owned,
        mine.rows_written,
        mine.seconds.to_bits(),
    ]);
    comm.sum(&mut values);
    values
        .chunks_exact(FIELDS)
        .enumerate()
        .map(|(rank, fields)| RankInfo {
            rank,
            row_groups: fields[0],
            rows_read: fields[1],
            leaves_owned: fields[2],
            rows_written: fields[3],
            seconds: f64::from_bits(fields[4]),
        })
        .collect()
}

/// Parts left by an earlier run with more ranks would read as rows of this table: they go.
fn remove_stale_parts(directory: &Path, ranks: usize) {
    for rank in ranks.. {
        let stale = part_path(directory, rank);
        if std::fs::remove_file(&stale).is_err() {
            break;
        }
    }
}
