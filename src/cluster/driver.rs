//! `synth` across ranks. lowdim, PSMM, PE and covloss: each rank's passes over its share end in sums over the
//! ranks, so every rank makes the whole single-machine release and writes its even share of the rows
//! ([`PartRun::replicated`]). PMM: every rank opens the input and makes the same plan from public inputs;
//! each bins its share of the row groups (balanced by compressed bytes); the leaf histograms are
//! reduce-scattered so that each rank holds the true counts of the subtrees it owns ([`super::part`]);
//! each releases and samples those and writes `part-RANK.parquet` beside the others. With
//! `--marginal-share` (and `--partition quantile`, and so `--mechanism auto`) the 1-D marginals are
//! summed over the ranks and released identically on each, and every rank maps its rows through them;
//! with `--pair-share` the histograms the pairs are chosen, gated and fitted from are summed likewise.
//! With `--refine-share` each rank bins its rows again, deeper, and refines the leaves it owns.
//! The parts are written to temporary names and renamed only once every rank has written its own; rank 0
//! then writes the report (the single-machine report) and the diagnostics (with one entry per rank).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::exchange::{Exchange, ExchangeRule, LocalCounts};
use super::part::{Ownership, PartLeaves, PartRelease, PartTree};
use super::rows::{allocate_part_rows, dealt_evenly, rows_before};
use super::{agree, even_starts, weighted_starts, with_sums_on_this_thread, Communicator};
use crate::binner::pass::DataPass;
use crate::binner::ScanStats;
use crate::error::{Error, Result};
use crate::geometry::cdf::CellCdf;
use crate::geometry::partition::CellGeometry;
use crate::io::paths::{check_output_paths, NamedPath};
use crate::io::sink::ParquetSink;
use crate::io::source::Source;
use crate::io::staging::{commit_all, StagedFile};
use crate::mechanism::covloss::points::BATCH_ROWS as ENCODED_BATCH_ROWS;
use crate::mechanism::pmm::marginals::{
    axis_counts, BinnedMarginals, CalibratedRows, MarginalPlan, MonotoneMap, ReleasedMarginals,
};
use crate::mechanism::pmm::pairs::{DrawnRows, PairMap, PairMappedRows, PairParameters, PairPlan, PAIR_BITS};
use crate::mechanism::pmm::refine::{binned_with_the_tree, AxisShapes, LeafRefinementParameters};
use crate::mechanism::pmm::schedule::LevelSchedule;
use crate::mechanism::pmm::PmmPlan;
use crate::mechanism::{leaf_value_cells, Plan, PublicInputs, Release, ReleasedMeasure};
use crate::options::{MechanismOptions, PmmOptions, SynthOptions};
use crate::privacy::{NoisyRowCount, RunSeeds};
use crate::progress::{PhaseTiming, Progress, Timings};
use crate::sampler::{LeafSampler, Placement, RowGenerator, RowRange};
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
    let split = match &options.mechanism {
        MechanismOptions::Pmm(pmm) => Some(pmm),
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
        Some(pmm) => run.split(pmm, public, &data, &mut timings)?,
        None => run.replicated(&public, &data, &mut timings)?,
    };
    let WrittenPart { whole, staged, rows_read, leaves_owned, rows_written } = written;
    let epsilon_spent = whole.budget.check()?;
    // Every part is complete: rename them.
    agree(comm, commit_all(vec![staged]))?;
    let facts = RunFacts { source: &share, columns: &run_columns, options };
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
/// name.
struct WrittenPart {
    whole: Release,
    staged: StagedFile,
    rows_read: u64,
    leaves_owned: u64,
    rows_written: u64,
}

impl PartRun<'_> {
    /// PMM's tree split by subtrees over the ranks ([`RankRelease`]): each rank releases and samples the
    /// leaves it owns, then writes an even share of the rows.
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
        let rank_release = RankRelease { comm, pool, plan: &plan, data, seeds, exchange };
        // Collectives stay on this thread (MPI is initialised for one thread); the work runs on the pool.
        let (mut release, scan, binning) =
            timings.time("bin, exchange, noise and consistency", || rank_release.release())?;
        let geometry = CellGeometry::new(plan.dims(), release.depth);
        // --marginal-share: every rank maps its rows onto the released marginals, from the joint
        // release's own marginals summed over the ranks' parts.
        let maps = release.marginals.as_ref().map(|marginals| {
            let mut axes = axis_counts(&geometry, release.part.cells());
            for axis in &mut axes {
                comm.sum(axis);
            }
            marginals.maps_from(&axes)
        });
        // The cells each column's values are spread over (the same on every rank): see value_cells.
        let value_cells = match (&release.marginals, &maps) {
            (Some(marginals), Some(maps)) => marginals.value_cells(maps),
            _ => leaf_value_cells(&geometry),
        };
        let placement = options.placement;
        let pair_counts = release.pair_counts.take();
        let pairs = match release.plan.pairs() {
            Some(pairs) => Some(timings.time("pairs", || {
                rank_release.release_pairs(pairs, (&release.part, pair_counts), geometry, maps.as_deref(), placement)
            })?),
            None => None,
        };
        let joint_rows =
            part_rows(comm, &release.part, geometry, options.rows, placement, seeds.placement(), maps.as_deref());
        let generator: Box<dyn RowGenerator + '_> = match &pairs {
            Some((pair_maps, _)) => Box::new(PairMappedRows { inner: joint_rows, maps: pair_maps }),
            None => joint_rows,
        };
        let written = timings.time_in_parts("sample and write", |parts| {
            pool.install(|| -> Result<_> {
                let mut sink = ParquetSink::create(part, columns, bounds, &value_cells)?;
                let rows = write_rows(&mut sink, generator.as_ref(), data.progress, parts)?;
                Ok((sink.finish()?, rows))
            })
        });
        drop(generator);
        let (staged, rows_written) = agree(comm, written)?;
        let leaves_owned = release.part.leaves_owned() as u64;
        let joint = match release.part.leaves {
            PartLeaves::Every(counts) => ReleasedMeasure::Leaves { geometry, counts },
            PartLeaves::Listed { leaves, .. } => ReleasedMeasure::SparseLeaves { geometry, leaves },
        };
        let root_count = release.part.root_count;
        let mut whole = match (release.marginals, maps) {
            (Some(marginals), Some(maps)) => {
                release.plan.finish_calibrated(&release.schedule, joint, maps, marginals, root_count, scan, binning)
            }
            _ => release.plan.finish(&release.schedule, joint, root_count, scan, binning),
        };
        release.plan.with_refined_leaves(&mut whole, release.refined);
        if let Some((pair_maps, parameters)) = pairs {
            whole = release.plan.with_pair_maps(whole, pair_maps, parameters);
        }
        Ok(WrittenPart { whole, staged, rows_read: release.rows_read, leaves_owned, rows_written })
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
                        let table = whole.measure.rows(options.rows, options.placement, seeds.placement())?;
                        let starts = even_starts(table.total_rows() as usize, ranks);
                        let (first, end) = (starts[rank] as u64, starts[rank + 1] as u64);
                        let share = RowRange { inner: table, first, rows: end - first };
                        let value_cells = whole.measure.value_cells(columns.len());
                        let mut sink = ParquetSink::create(part, columns, bounds, &value_cells)?;
                        let rows = write_rows(&mut sink, &share, data.progress, parts)?;
                        (sink, rows)
                    }
                };
                Ok((sink.finish()?, rows))
            })
        });
        let (staged, rows_written) = agree(comm, written)?;
        Ok(WrittenPart { whole, staged, rows_read: data.source.row_count(), leaves_owned: 0, rows_written })
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

/// What [`RankRelease::release`] gives a rank.
struct RankPart<'a> {
    /// The plan that released it: the run's, or the one n̂ picked ([`PmmPlan::for_n_hat`]).
    plan: &'a PmmPlan,
    /// Rows this rank read (the scan statistics returned beside are every rank's).
    rows_read: u64,
    schedule: LevelSchedule,
    /// The depth of the part's leaves: the tree's, or deeper with `--refine-share`.
    depth: u32,
    part: PartRelease,
    /// `--refine-share`: the report's words, summed over the ranks.
    refined: Option<LeafRefinementParameters>,
    /// `--marginal-share`: the released marginals, the same on every rank.
    marginals: Option<ReleasedMarginals>,
    /// This rank's data histograms of the candidate pairs, when the marginals' pass binned them.
    pair_counts: Option<Vec<Vec<u64>>>,
}

/// A rank's true leaf counts, before they go to their owners.
struct RankCounts<'a> {
    /// The plan the rest of the release follows (see [`RankPart`]).
    plan: &'a PmmPlan,
    counts: LocalCounts,
    /// Rows this rank read, and the scan statistics of every rank summed.
    rows_read: u64,
    scan: ScanStats,
    binning: String,
    schedule: LevelSchedule,
    n_hat: Option<u64>,
    marginals: Option<ReleasedMarginals>,
    /// The quantile partition's axes, when the tree is cut at its marginals' quantiles.
    warps: Option<Vec<Arc<CellCdf>>>,
    /// `--refine-share`: the finer leaves' counts, when they were binned with the tree's (`counts` summed from
    /// them).
    finer: Option<LocalCounts>,
    /// This rank's data histograms of the candidate pairs, when the marginals' pass binned them.
    pair_counts: Option<Vec<Vec<u64>>>,
}

/// What every step of a rank's release reads: the ranks, this rank's pool, the plan (the same on every
/// rank), this rank's share of the data, the run's seeds and the rule that says how leaves are exchanged.
#[derive(Clone, Copy)]
struct RankRelease<'a> {
    comm: &'a dyn Communicator,
    pool: &'a rayon::ThreadPool,
    plan: &'a PmmPlan,
    data: &'a DataPass<'a>,
    seeds: &'a RunSeeds,
    exchange: ExchangeRule,
}

impl<'a> RankRelease<'a> {
    /// Bins this rank's share, sums the row counts (n̂ and the depth follow from the total as on one
    /// machine), reduce-scatters the leaves to their owners and releases this rank's part of the tree (its
    /// dense leaves cut finer with `--refine-share`). Returns it with the scan statistics summed over the ranks.
    fn release(&self) -> Result<(RankPart<'a>, ScanStats, String)> {
        let RankRelease { comm, pool, plan, seeds, .. } = *self;
        let binned = match plan.quantile_marginals() {
            Some(marginals) => self.bin_on_quantiles(marginals)?,
            None => self.bin_on_midpoints()?,
        };
        let RankCounts { plan, counts, rows_read, scan, binning, schedule, n_hat, marginals, warps, finer, .. } =
            binned;
        let pair_counts = binned.pair_counts;
        let ownership = Ownership::new(schedule.depth, comm.size());
        let own = counts.to_owners(comm, &ownership.leaf_starts());
        let rank = comm.rank();
        let tree = pool.install(|| PartTree::new(own, &ownership, rank));
        let mut top_counts = tree.top_counts();
        comm.sum(&mut top_counts);
        let noised = pool.install(|| tree.noise(top_counts, &schedule.scales, n_hat, &seeds.noise, plan.consistency()));
        let top_estimates = noised.top_estimates().map(|mut bits| {
            comm.sum(&mut bits);
            bits
        });
        let part = pool.install(|| noised.release(top_estimates, plan.consistency(), seeds.consistency()));
        let warps_and_marginals = (warps.as_deref(), marginals.as_ref());
        let (depth, part, refined) = self.refined(plan, &ownership, (part, finer), warps_and_marginals)?;
        Ok((RankPart { plan, rows_read, schedule, depth, part, refined, marginals, pair_counts }, scan, binning))
    }

    /// The midpoint partition: the joint leaves at the planned depth (binned again when n̂ asks for a
    /// deeper tree), then the marginals when the plan has them, as on one machine.
    fn bin_on_midpoints(&self) -> Result<RankCounts<'a>> {
        let RankRelease { pool, plan, seeds, .. } = *self;
        let planned = plan.planned_depth();
        let exchange = self.exchange.at(planned);
        let (mut counts, rows_read, scan, binning) =
            self.bin(CellGeometry::new(plan.dims(), planned), None, exchange)?;
        let (plan, schedule, n_hat) = plan.plan_for_rows(scan.rows_binned, seeds)?;
        if schedule.depth <= planned {
            counts = pool.install(|| counts.coarsen(planned, schedule.depth));
        } else {
            counts = self.bin(CellGeometry::new(plan.dims(), schedule.depth), None, exchange)?.0;
        }
        let marginals = match plan.marginals() {
            Some(marginals) => Some(self.release_marginals(marginals, plan.released_row_count(n_hat), None)?),
            None => None,
        };
        let (warps, finer, pair_counts) = (None, None, None);
        Ok(RankCounts { plan, counts, rows_read, scan, binning, schedule, n_hat, marginals, warps, finer, pair_counts })
    }

    /// The quantile partition: n̂ first when the plan releases it (from a pass that also bins the
    /// marginals), the marginals, then the joint leaves with each axis cut at its released marginal's
    /// quantiles, as on one machine.
    fn bin_on_quantiles(&self, marginals: &MarginalPlan) -> Result<RankCounts<'a>> {
        let RankRelease { comm, pool, plan, data, seeds, .. } = *self;
        // This rank's marginal leaves and data histograms of the pairs, from one pass, as on one machine.
        let bin_marginals = |depth: u32| {
            plan.binned_marginals(depth, |pairs| {
                agree(comm, pool.install(|| data.marginal_and_pair_counts(depth, pairs, PAIR_BITS)))
            })
        };
        let (plan, schedule, n_hat, binned, pair_counts) = match plan.releases_n_hat() {
            None => {
                let schedule = plan.schedule().ok_or_else(|| Error::internal("a plan without n̂ knows its depth"))?;
                let binned = plan.marginals_first_at(marginals)?.map(bin_marginals).transpose()?;
                let (binned, pair_counts) = binned.map_or((None, None), |(binned, pairs, _)| (Some(binned), pairs));
                (plan, schedule.clone(), None, binned, pair_counts)
            }
            Some(row_count) => {
                let (binned, pair_counts, scan) = bin_marginals(plan.marginal_pass_depth(marginals, row_count)?)?;
                let n_hat = row_count.release(scan.summed_over(comm).rows_binned, &seeds.noise);
                let plan = plan.for_n_hat(n_hat);
                let schedule = plan.schedule_for_n_hat(n_hat, row_count)?;
                (plan, schedule, Some(n_hat), Some(binned), pair_counts)
            }
        };
        // The plan n̂ picked may cut its tree at midpoints: the smaller table's (no marginals) and, at d = 3,
        // the larger table's (marginals on midpoint cells).
        let marginals = match plan.marginals() {
            Some(marginals) => Some(self.release_marginals(marginals, plan.released_row_count(n_hat), binned)?),
            None => None,
        };
        let geometry = CellGeometry::new(plan.dims(), schedule.depth);
        let warps = marginals.as_ref().filter(|_| plan.cuts_at_quantiles()).map(|released| released.warps(&geometry));
        // With --refine-share one pass bins the finer leaves and the tree's are summed from them, as on one
        // machine.
        let (counts, finer, rows_read, scan, binning) = match plan.refinement(schedule.depth) {
            None => {
                let exchange = self.exchange.at(self.plan.planned_depth());
                let (counts, rows_read, scan, binning) = self.bin(geometry, warps.as_deref(), exchange)?;
                (counts, None, rows_read, scan, binning)
            }
            Some((_, levels)) => {
                let finer = CellGeometry::new(plan.dims(), schedule.depth + levels);
                let (counts, rows_read, scan, binning) =
                    self.bin(finer, warps.as_deref(), self.exchange.at(finer.depth()))?;
                let tree = pool.install(|| counts.coarsened(finer.depth(), schedule.depth));
                (tree, Some(counts), rows_read, scan, binned_with_the_tree(&binning, levels))
            }
        };
        Ok(RankCounts { plan, counts, rows_read, scan, binning, schedule, n_hat, marginals, warps, finer, pair_counts })
    }

    /// This rank's leaf counts on `geometry`, each axis cut at the quantiles of `warps` when given (the
    /// quantile partition), held as `exchange` says; with the rows this rank read, the scan statistics of
    /// every rank summed, and the binner's line.
    fn bin(
        &self,
        geometry: CellGeometry,
        warps: Option<&[Arc<CellCdf>]>,
        exchange: Exchange,
    ) -> Result<(LocalCounts, u64, ScanStats, String)> {
        let RankRelease { comm, pool, plan, data, .. } = *self;
        let axes = data.axes(&geometry, warps);
        let (counts, scan, binning) =
            agree(comm, pool.install(|| LocalCounts::bin(data, geometry, &axes, plan.device(), exchange)))?;
        Ok((counts, scan.rows_read, scan.summed_over(comm), binning))
    }

    /// `--refine-share` across ranks: each rank's counts `levels` deeper (on the tree's axes: `finer`, binned
    /// with the tree's, or binned now) go to the ranks that own their leaves, and each rank refines its own
    /// `part` of the leaves. The noise and the coins are keyed by the leaf, so the parts are the single
    /// machine's refinement. Returns the depth of the part's leaves, the part, and the report's words summed
    /// over the ranks.
    fn refined(
        &self,
        plan: &PmmPlan,
        ownership: &Ownership,
        (part, finer): (PartRelease, Option<LocalCounts>),
        (warps, marginals): (Option<&[Arc<CellCdf>]>, Option<&ReleasedMarginals>),
    ) -> Result<(u32, PartRelease, Option<LeafRefinementParameters>)> {
        let RankRelease { comm, pool, seeds, exchange, .. } = *self;
        let Some((refinement, levels)) = plan.refinement(ownership.depth) else {
            return Ok((ownership.depth, part, None));
        };
        let geometry = CellGeometry::new(plan.dims(), ownership.depth + levels);
        let counts = match finer {
            Some(counts) => counts,
            None => self.bin(geometry, warps, exchange.at(geometry.depth()))?.0,
        };
        let starts: Vec<usize> = ownership.leaf_starts().iter().map(|&start| start << levels).collect();
        let own = counts.finer_to_owners(comm, &starts);
        let shapes = AxisShapes::of_run(&geometry, marginals, warps.is_some());
        let coins = (&seeds.noise, seeds.placement());
        let PartLeaves::Every(tree_leaves) = &part.leaves else {
            return Err(Error::internal("the tree's part lists every leaf"));
        };
        let (leaves, mut parameters) = pool.install(|| {
            refinement.refine((part.first_leaf, tree_leaves), (geometry, &own), levels, coins, shapes.as_ref())
        });
        let mut refined = [parameters.leaves_refined, parameters.sub_cells];
        comm.sum(&mut refined);
        [parameters.leaves_refined, parameters.sub_cells] = refined;
        let (first_leaf, owned) = (part.first_leaf << levels, tree_leaves.len() << levels);
        // An empty release spreads --rows over every leaf, as on one machine.
        let leaves = match part.root_count {
            0 => PartLeaves::Every(leaves.to_dense(first_leaf, owned)),
            _ => PartLeaves::Listed { owned, leaves },
        };
        Ok((geometry.depth(), PartRelease { first_leaf, leaves, ..part }, Some(parameters)))
    }

    /// The marginal trees of `plan` released from every rank's leaf counts summed (`binned`: this rank's
    /// counts from an earlier pass, coarsened where deep enough): the same release on every rank.
    fn release_marginals(
        &self,
        plan: &MarginalPlan,
        row_count: Option<(u64, NoisyRowCount)>,
        binned: Option<BinnedMarginals>,
    ) -> Result<ReleasedMarginals> {
        let RankRelease { comm, pool, data, seeds, .. } = *self;
        let tree = plan.tree(row_count)?;
        let mut leaves = agree(comm, pool.install(|| MarginalPlan::leaves(&tree, data, binned)))?;
        for column in &mut leaves {
            comm.sum(column);
        }
        pool.install(|| plan.release_leaves(&tree, leaves, seeds))
    }

    /// `--pair-share` across ranks: each rank draws its share of the rows the pairs are chosen and fitted on
    /// (the single machine's rows: they are numbered in the whole table) and bins its data rows' pairs (or has
    /// them `counted` by the marginals' pass); every histogram of either is summed over the ranks, so each rank
    /// releases the same pairs and fits the same maps as one machine.
    fn release_pairs(
        &self,
        pairs: &PairPlan,
        (part, counted): (&PartRelease, Option<Vec<Vec<u64>>>),
        geometry: CellGeometry,
        maps: Option<&[Option<MonotoneMap>]>,
        placement: Placement,
    ) -> Result<(Vec<PairMap>, PairParameters)> {
        let RankRelease { comm, pool, data, seeds, .. } = *self;
        let mut columns = vec![Vec::new(); geometry.dims()];
        if part.root_count > 0 {
            let sample = Some(pairs.drawn_rows(part.root_count) as u64);
            let drawn = part_rows(comm, part, geometry, sample, placement, seeds.pair_sample(), maps);
            pool.install(|| drawn.sample_rows(0, drawn.total_rows() as usize, &mut columns));
        }
        let sum = |counts: &mut [u64]| comm.sum(counts);
        let pair_counts = |pairs: &[(usize, usize)]| -> Result<Vec<Vec<u64>>> {
            let mut counts = match counted {
                Some(counts) => counts,
                None => agree(comm, pool.install(|| data.pair_counts(pairs, PAIR_BITS)))?.0,
            };
            for histogram in &mut counts {
                comm.sum(histogram);
            }
            Ok(counts)
        };
        pairs.release_on(DrawnRows { columns, released_rows: part.root_count, sum: &sum }, pair_counts, seeds)
    }
}

/// This rank's even share of the rows of the whole table of `rows` rows (`None`: the released counts;
/// otherwise spread over the whole tree's leaves as on one machine), drawn with `seed`, mapped onto the
/// released marginals where there are `maps`.
fn part_rows<'a>(
    comm: &dyn Communicator,
    part: &PartRelease,
    geometry: CellGeometry,
    rows: Option<u64>,
    placement: Placement,
    seed: u64,
    maps: Option<&'a [Option<MonotoneMap>]>,
) -> Box<dyn RowGenerator + 'a> {
    let allocated = match rows {
        Some(rows) if rows != part.root_count => {
            let allocation = allocate_part_rows(comm, part.counts(), geometry.leaf_count(), part.root_count, rows);
            let first_row = rows_before(comm, allocation.iter().sum());
            Some((allocation, first_row))
        }
        _ => None,
    };
    let (counts, first_row) = match &allocated {
        Some((allocation, first_row)) => (allocation.as_slice(), *first_row),
        None => (part.counts(), part.first_row),
    };
    let total = rows.unwrap_or(part.root_count);
    // Each rank draws an even share of the rows, whichever ranks own their leaves (a skewed table's rows sit
    // in a few ranks' leaves).
    let leaves = part.cells().map(|(code, _)| code).zip(counts.iter().copied()).filter(|&(_, rows)| rows > 0);
    let (codes, counts, first_row) = dealt_evenly(comm, leaves, first_row, total);
    let sampler = LeafSampler::sparse(geometry, codes, &counts, first_row, placement, seed);
    match maps {
        Some(maps) => Box::new(CalibratedRows { inner: Box::new(sampler), maps }),
        None => Box::new(sampler),
    }
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
