//! The PMM run (SPEC §4): depth from public inputs (or a released n̂), one binning pass, noise per
//! level, top-down consistency, points sampled in the leaves.

use std::time::Instant;

use super::{commit_outputs, write_table, RunInput, SynthOutcome};
use crate::error::{Error, Result};
use crate::mechanism::pmm::{coarsen_leaves, release_leaf_counts, release_root_count};
use crate::noise::discrete_laplace::RationalScale;
use crate::options::value_name;
use crate::geometry::partition::{CellGeometry, MAX_DEPTH};
use crate::privacy::{choose_depth, max_depth_for_memory, LevelSchedule, Neighbours, RootNoise};
use crate::synth::report::*;
use crate::sampler::{allocate_rows, LeafSampler};

/// How far above the file's row count n̂ is planned for before the data are binned: Lap_Z(σ_0)
/// exceeds 20σ_0 with probability below e^{-20}, and then the pass is simply repeated at the right depth.
const ROOT_NOISE_HEADROOM: f64 = 20.0;

pub(super) fn run(run: &RunInput) -> Result<SynthOutcome> {
    let (options, source, seeds) = (run.options, run.source, &run.seeds);
    let dims = run.dims();
    let epsilon = options.epsilon;
    let memory_depth = max_depth_for_memory(run.memory_limit(), run.threads);
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
                    crate::privacy::cell_memory_bytes(depth, run.threads)
                )));
            }
            (depth, "given by --depth".to_string())
        }
        (None, Neighbours::Replace) => {
            let n = source.row_count() as f64;
            let depth = choose_depth(Neighbours::Replace, epsilon, dims, n, None, memory_depth);
            (
                depth,
                format!(
                    "{} for the public n (capped at {memory_depth} by memory)",
                    depth_rule_name(dims)
                ),
            )
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
            (
                depth,
                format!(
                    "{} for the released n̂ (capped at {memory_depth} by memory)",
                    depth_rule_name(dims)
                ),
            )
        }
    };

    let started = Instant::now();
    let (mut leaves, stats, binning) = run.bin_leaves(CellGeometry::new(dims, planned_depth))?;
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
                leaves = run.bin_leaves(CellGeometry::new(dims, depth))?.0;
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
    let (sink, total_rows) = write_table(run, &sampler, "sample and write", started, &mut timings)?;

    let report = RunReport {
        tool: ToolInfo::current(),
        mechanism: "pmm",
        guarantee: run.guarantee(schedule.spent_epsilon()),
        input: run.input_info(),
        parameters: MechanismParameters::Pmm(pmm_parameters(
            &schedule,
            geometry,
            depth_rule,
            options,
        )),
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
    let mut diagnostics = Diagnostics::new(&stats, &run.column_names(), run.threads, binning);
    diagnostics.timings_seconds = timings;
    commit_outputs(run.outputs, report, diagnostics, sink)
}

/// The rule [`choose_depth`] applies, in words for the report.
pub(super) fn depth_rule_name(dims: usize) -> &'static str {
    if dims == 1 {
        "minimises the Theorem 3.9 bound"
    } else {
        "ceil(log2(epsilon n)) - 1"
    }
}

/// The report's view of one PMM release: depth, rules and the scale and ε of every level.
pub(super) fn pmm_parameters(
    schedule: &LevelSchedule,
    geometry: CellGeometry,
    depth_rule: String,
    options: &crate::options::SynthOptions,
) -> PmmParameters {
    PmmParameters {
        depth: schedule.depth,
        depth_rule,
        consistency: value_name(&options.consistency),
        placement: value_name(&options.placement),
        levels: (0..=schedule.depth)
            .map(|level| LevelInfo {
                level,
                sigma: schedule.scales[level as usize].map(|scale| scale.to_f64()),
                sigma_num: schedule.scales[level as usize].map(|scale| scale.num()),
                sigma_den: schedule.scales[level as usize].map(|scale| scale.den()),
                epsilon: schedule.level_epsilon(level),
                cell_diameter: geometry.diameter(level),
            })
            .collect(),
    }
}
