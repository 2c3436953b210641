//! `synth` across ranks (PMM): every rank opens the input and makes the same plan from public inputs;
//! each bins its share of the row groups (balanced by compressed bytes); the leaf histograms are
//! reduce-scattered so that each rank holds the true counts of the subtrees it owns ([`super::part`]);
//! each releases and samples those and writes `part-RANK.parquet` beside the others. The parts are
//! written to temporary names and renamed only once every rank has written its own; rank 0 then writes
//! the report (the single-machine report) and the diagnostics (with one entry per rank).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::exchange::{Exchange, LocalCounts};
use super::part::{Ownership, PartRelease, PartTree};
use super::rows::{allocate_part_rows, rows_before};
use super::{agree, weighted_starts, Communicator};
use crate::binner::pass::DataPass;
use crate::binner::ScanStats;
use crate::error::{Error, Result};
use crate::geometry::partition::CellGeometry;
use crate::io::paths::{check_output_paths, NamedPath};
use crate::io::sink::ParquetSink;
use crate::io::source::Source;
use crate::io::staging::commit_all;
use crate::mechanism::pmm::PmmPlan;
use crate::mechanism::{PublicInputs, ReleasedMeasure};
use crate::options::{MechanismOptions, SynthOptions};
use crate::privacy::RunSeeds;
use crate::progress::{PhaseTiming, Progress, Timings};
use crate::sampler::LeafSampler;
use crate::synth::report::{Diagnostics, RankInfo, RunReport};
use crate::synth::{public_inputs, stage_reports, thread_pool, write_rows, RunColumns, RunFacts};

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

/// Runs PMM on `input` across the ranks of `comm` (every rank calls this with the same arguments);
/// rank 0 returns the run report.
pub fn synthesize_across(
    comm: &dyn Communicator,
    input: &Path,
    outputs: &PartsOutput,
    options: &SynthOptions,
    progress: &Progress,
) -> Result<Option<RunReport>> {
    let started = Instant::now();
    options.validate()?;
    let MechanismOptions::Pmm(pmm) = &options.mechanism else {
        return Err(Error::bad_input(format!(
            "--mechanism {} does not run across ranks yet (pmm does): run it on one machine",
            options.mechanism.name()
        )));
    };
    for (share, flag) in [(pmm.marginal_share, "--marginal-share"), (pmm.pair_share, "--pair-share")] {
        if share > 0.0 {
            return Err(Error::bad_input(format!("{flag} does not run across ranks yet: run it on one machine")));
        }
    }
    let part = part_path(&outputs.directory, comm.rank());
    let mut named = vec![NamedPath::new("the part", &part)];
    named.extend(outputs.report.as_deref().map(|path| NamedPath::new("--report", path)));
    named.extend(outputs.diagnostics.as_deref().map(|path| NamedPath::new("--diagnostics", path)));
    check_output_paths(&[NamedPath::new("the input", input)], &named)?;
    let seeds = shared_seeds(comm, options.seed)?;
    let opened = agree(comm, open(input, &outputs.directory, options))?;
    let (source, run_columns) = opened;
    let (columns, bounds) = run_columns.numeric();
    let (threads, pool) = thread_pool(options)?;
    let rank_public = shared_public(comm, public_inputs(&source, &run_columns, options, threads));
    // The tree is split over the ranks: its memory cap is every rank's limit together. A rank whose
    // full leaf histogram would not fit its own limit sends sorted leaf codes instead ([`Exchange`]).
    let mut public = rank_public;
    public.memory_limit = rank_public.memory_limit.saturating_mul(comm.size() as u64);
    let plan = PmmPlan::new(&public, pmm)?;
    let exchange = Exchange::choose(
        plan.planned_depth(),
        public.file_rows,
        comm.size(),
        rank_public.memory_limit,
        rank_public.threads,
    );
    let weights: Vec<u64> = (0..source.row_group_count()).map(|group| source.row_group_bytes(group)).collect();
    let shares = weighted_starts(&weights, comm.size());
    let rank = comm.rank();
    let row_groups = (shares[rank + 1] - shares[rank]) as u64;
    let share = source.keep_row_groups(shares[rank]..shares[rank + 1]);
    let data = DataPass {
        source: &share,
        columns,
        bounds,
        nulls: options.nulls,
        progress,
    };
    let mut timings = Timings::default();
    // Collectives stay on this thread (MPI is initialised for one thread); the work runs on the pool.
    let (release, scan, binning) = timings.time("bin, exchange, noise and consistency", || {
        release_across(comm, &pool, &plan, &data, &seeds, exchange)
    })?;
    let geometry = CellGeometry::new(plan.dims(), release.schedule.depth);
    // --rows re-spreads the rows over the whole tree's leaves, as on one machine.
    let allocated = match options.rows {
        Some(rows) if rows != release.part.root_count => {
            let leaves = geometry.leaf_count();
            let allocation = allocate_part_rows(comm, &release.part.leaves, leaves, release.part.root_count, rows);
            let first_row = rows_before(comm, allocation.iter().sum());
            Some((allocation, first_row))
        }
        _ => None,
    };
    let (counts, first_row) = match &allocated {
        Some((allocation, first_row)) => (allocation.as_slice(), *first_row),
        None => (release.part.leaves.as_slice(), release.part.first_row),
    };
    let sampler = LeafSampler::part(
        geometry,
        counts,
        release.part.first_leaf,
        first_row,
        options.placement,
        seeds.placement(),
    );
    let written = timings.time_in_parts("sample and write", |parts| {
        pool.install(|| -> Result<_> {
            let mut sink = ParquetSink::create(&part, columns, bounds)?;
            let rows = write_rows(&mut sink, &sampler, progress, parts)?;
            Ok((sink.finish()?, rows))
        })
    });
    let (staged, rows_written) = agree(comm, written)?;
    let leaves_owned = release.part.leaves.len() as u64;
    let whole = plan.finish(
        &release.schedule,
        ReleasedMeasure::Leaves { geometry, counts: release.part.leaves },
        release.part.root_count,
        scan,
        binning,
    );
    let epsilon_spent = whole.budget.check()?;
    // Every part is complete: rename them.
    agree(comm, commit_all(vec![staged]))?;
    let facts = RunFacts {
        source: &share,
        columns: &run_columns,
        options,
    };
    let mut report = facts.report(&whole, epsilon_spent, 0);
    let mine = RankInfo {
        rank,
        row_groups,
        rows_read: release.rows_read,
        leaves_owned,
        rows_written,
        seconds: started.elapsed().as_secs_f64(),
    };
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
    let staged = stage_reports(
        outputs.report.as_deref(),
        outputs.diagnostics.as_deref(),
        &report,
        &diagnostics,
    )?;
    commit_all(staged)?;
    Ok(Some(report))
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

/// What [`release_across`] gives a rank.
struct RankRelease {
    /// Rows this rank read (the scan statistics returned beside are every rank's).
    rows_read: u64,
    schedule: crate::mechanism::pmm::schedule::LevelSchedule,
    part: PartRelease,
}

/// Bins this rank's share, sums the row counts (n̂ and the depth follow from the total as on one
/// machine), reduce-scatters the leaves to their owners and releases this rank's part of the tree.
/// Returns it with the scan statistics summed over the ranks.
fn release_across(
    comm: &dyn Communicator,
    pool: &rayon::ThreadPool,
    plan: &PmmPlan,
    data: &DataPass,
    seeds: &RunSeeds,
    exchange: Exchange,
) -> Result<(RankRelease, ScanStats, String)> {
    let planned = plan.planned_depth();
    let geometry = |depth| CellGeometry::new(plan.dims(), depth);
    let binned = pool.install(|| LocalCounts::bin(data, geometry(planned), plan.device(), exchange));
    let (mut counts, mut scan, binning) = agree(comm, binned)?;
    let rows_read = scan.rows_read;
    scan = summed(comm, scan);
    let (schedule, n_hat) = plan.schedule_for(scan.rows_binned, seeds)?;
    if schedule.depth <= planned {
        counts = pool.install(|| counts.coarsen(planned, schedule.depth));
    } else {
        let rebinned = pool.install(|| LocalCounts::bin(data, geometry(schedule.depth), plan.device(), exchange));
        counts = agree(comm, rebinned)?.0;
    }
    let ownership = Ownership::new(schedule.depth, comm.size());
    let own = counts.to_owners(comm, &ownership.leaf_starts());
    let rank = comm.rank();
    let tree = pool.install(|| PartTree::new(own, &ownership, rank));
    let mut top_counts = tree.top_counts();
    comm.sum(&mut top_counts);
    let part = pool.install(|| {
        tree.release(top_counts, &schedule.scales, n_hat, &seeds.noise, plan.consistency(), seeds.consistency())
    });
    Ok((
        RankRelease {
            rows_read,
            schedule,
            part,
        },
        scan,
        binning,
    ))
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

/// The scan statistics of every rank, added up.
fn summed(comm: &dyn Communicator, scan: ScanStats) -> ScanStats {
    let mut values = vec![scan.rows_read, scan.rows_binned, scan.rows_dropped, scan.rows_clamped];
    values.extend(&scan.clamped_values);
    comm.sum(&mut values);
    ScanStats {
        rows_read: values[0],
        rows_binned: values[1],
        rows_dropped: values[2],
        rows_clamped: values[3],
        clamped_values: values[4..].to_vec(),
    }
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
