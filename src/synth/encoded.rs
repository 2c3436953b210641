//! The driver of the encoded mechanisms (`covloss`, `microagg`): the same phases as [`super::synthesize`]
//! on Boolean encodings of the columns. The plan is built from public inputs only (n from the file's
//! metadata, public under replace; p from the schema and the public encoding; ε), before any value is
//! read; the release reads the encoded rows; [`crate::privacy::Budget::check`] holds the spends against
//! ε; the released weighted points are sampled and decoded back to the input's names and types; the
//! table and the reports are committed together.

use std::path::Path;

use super::report::*;
use super::{commit_outputs, thread_pool, OutputPaths, SynthOutcome};
use crate::binner::ScanStats;
use crate::encoding::decode::{output_schema, to_batch, valid_under_independent_rounding};
use crate::encoding::read::read_bits;
use crate::encoding::{ColumnEncoding, Encoding};
use crate::error::{Error, Result};
use crate::io::sink::ParquetSink;
use crate::io::source::Source;
use crate::mechanism::covloss::moments::covariance_loss;
use crate::mechanism::covloss::points::{block_rng, WeightedPoints, BLOCK_ROWS};
use crate::mechanism::covloss::{CovlossPlan, MicroaggPlan};
use crate::mechanism::{AccuracyBound, MechanismParameters};
use crate::options::{MechanismOptions, SynthOptions};
use crate::privacy::{Budget, Neighbours, RunSeeds};
use crate::progress::{Progress, Timings};

/// Rows sampled, decoded and written per output batch (a whole number of sampling blocks).
const ENCODED_BATCH_ROWS: usize = 16 * BLOCK_ROWS;

/// The two plans, each from public inputs.
enum EncodedPlan {
    Covloss(Box<CovlossPlan>),
    Microagg(MicroaggPlan),
}

pub(super) fn synthesize_encoded(
    source: &Source,
    outputs: &OutputPaths,
    options: &SynthOptions,
    progress: &Progress,
) -> Result<SynthOutcome> {
    let spec = match &options.mechanism {
        MechanismOptions::Covloss(covloss) => &covloss.encoding,
        MechanismOptions::Microagg(microagg) => &microagg.encoding,
        _ => return Err(Error::internal("synthesize_encoded runs covloss and microagg only")),
    };
    let encoding = Encoding::resolve(source, spec)?;
    let rows = source.row_count();
    let (threads, pool) = thread_pool(options)?;
    pool.install(|| {
        let plan = match &options.mechanism {
            MechanismOptions::Covloss(covloss) => EncodedPlan::Covloss(Box::new(CovlossPlan::new(
                rows,
                encoding.bits,
                options.epsilon,
                &covloss.settings,
            )?)),
            MechanismOptions::Microagg(microagg) => EncodedPlan::Microagg(MicroaggPlan::new(
                rows,
                encoding.bits,
                microagg.groups,
                microagg.cells_from,
            )?),
            _ => return Err(Error::internal("synthesize_encoded runs covloss and microagg only")),
        };
        let seeds = RunSeeds::new(options.seed)?;
        let mut timings = Timings::default();
        let data = timings.time("encode", || read_bits(source, &encoding, progress))?;
        let (points, budget, mut parameters) = timings.time("release", || -> Result<_> {
            Ok(match &plan {
                EncodedPlan::Covloss(plan) => (
                    plan.release(&data, &seeds.noise)?,
                    plan.budget(),
                    MechanismParameters::Covloss(Box::new(plan.parameters.clone())),
                ),
                EncodedPlan::Microagg(plan) => (
                    plan.release(&data)?,
                    // Nothing noisy is released: no spend (the guarantee is anonymity, stated below).
                    Budget::new(options.epsilon),
                    MechanismParameters::Microagg(plan.parameters.clone()),
                ),
            })
        })?;
        // Owner-only, and a second pass over the pairs: computed only when the diagnostics are asked for.
        let covariance_loss = outputs.diagnostics.as_ref().map(|_| covariance_loss(&data, &points));
        drop(data);
        let epsilon_spent = budget.check()?;
        let decodable = Some(decodable_share(&encoding, &points));
        match &mut parameters {
            MechanismParameters::Covloss(covloss) => covloss.independent_rounding_decodable_rows = decodable,
            MechanismParameters::Microagg(microagg) => {
                microagg.independent_rounding_decodable_rows = decodable
            }
            _ => {}
        }
        let synthetic_rows = options.rows.unwrap_or(rows);
        let sink = timings.time("sample", || {
            write_points(&outputs.table, &encoding, &points, synthetic_rows, seeds.placement(), progress)
        })?;
        let report = RunReport {
            tool: ToolInfo::current(),
            mechanism: options.mechanism.name(),
            guarantee: guarantee(&plan, options, epsilon_spent),
            input: InputInfo {
                file: source.path().display().to_string(),
                files: source.files().len(),
                columns: encoding.columns.iter().map(column_info).collect(),
            },
            parameters,
            release: ReleaseInfo {
                root_count: rows,
                root_count_is: "the row count n of the input's metadata, public (replace relation / anonymity)",
                synthetic_rows,
            },
            accuracy: AccuracyBound {
                expected_w1_bound: 1.0,
                units: "none: the paper bounds average squared d-way marginal errors, not W1",
                n: rows,
                formula: "trivial (the diameter of the normalised cube); the paper's marginal bounds \
                    32^d (loglog n/log n + p/(eps sqrt n) + 1/m) have constants that make them vacuous at every \
                    feasible n (docs/mechanisms/covloss.md); dpsynth eval reports mse_1..mse_3",
            },
            device: "cpu: bit planes, AND + popcount".to_string(),
            sample: None,
        };
        let stats = ScanStats {
            rows_read: rows,
            rows_binned: rows,
            rows_dropped: 0,
            rows_clamped: 0,
            clamped_values: vec![0; encoding.columns.len()],
        };
        let names: Vec<String> = encoding.columns.iter().map(|column| column.name.clone()).collect();
        let mut diagnostics =
            Diagnostics::new(&stats, &names, threads, "cpu: bit planes, AND + popcount".to_string());
        diagnostics.timings_seconds = timings.into_phases();
        diagnostics.covariance_loss = covariance_loss;
        commit_outputs(outputs, report, diagnostics, sink)
    })
}

/// The guarantee of each mechanism, stated for the report.
fn guarantee(plan: &EncodedPlan, options: &SynthOptions, epsilon_spent: f64) -> Guarantee {
    let public_inputs = vec![
        "column names and types, the public category lists, bins and bounds".to_string(),
        "every option".to_string(),
        "the row count n (replace relation)".to_string(),
    ];
    match plan {
        EncodedPlan::Covloss(_) => Guarantee {
            epsilon: options.epsilon,
            delta: 0.0,
            epsilon_spent,
            neighbours: Neighbours::Replace.describe().to_string(),
            public_inputs,
            fit_for_release: options.seed.is_none(),
            noise: "exact discrete Laplace (Canonne-Kamath-Steinke) on integer counts and on centroids on a public \
                grid, ChaCha12 keyed from the OS",
            anonymity: None,
        },
        EncodedPlan::Microagg(plan) => Guarantee {
            epsilon: f64::INFINITY,
            delta: f64::INFINITY,
            epsilon_spent: f64::INFINITY,
            neighbours: "none: anonymity is not a guarantee about neighbouring datasets".to_string(),
            public_inputs,
            fit_for_release: false,
            noise: "none: microaggregation adds no noise",
            anonymity: Some(format!(
                "({} / {})-anonymity: every released centroid is the exact mean of at least {} input rows \
                 (paper Algorithm 1). NOT differential privacy: the release can reveal facts about individuals \
                 (for example a bit shared by a whole group), so it is not fit for release where DP is required",
                plan.rows, plan.groups, plan.parameters.anonymity
            )),
        },
    }
}

fn column_info(column: &crate::encoding::EncodedColumn) -> ColumnInfo {
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

/// Σ_j ŵ_j Π_blocks P(independent rounding sets exactly one bit of the block).
fn decodable_share(encoding: &Encoding, points: &WeightedPoints) -> f64 {
    let blocks = encoding.one_hot_blocks();
    (0..points.len())
        .map(|j| {
            let point = points.point(j);
            points.weights[j]
                * blocks
                    .iter()
                    .map(|block| valid_under_independent_rounding(&point[block.clone()]))
                    .product::<f64>()
        })
        .sum()
}

/// Samples `rows` synthetic rows from `points`, decodes them and writes them to an uncommitted sink.
fn write_points(
    target: &Path,
    encoding: &Encoding,
    points: &WeightedPoints,
    rows: u64,
    seed: u64,
    progress: &Progress,
) -> Result<ParquetSink> {
    let schema = output_schema(encoding);
    let mut sink = ParquetSink::create_with_schema(target, schema.clone())?;
    let bar = progress.phase("sample", rows, "rows");
    let mut start = 0u64;
    while start < rows {
        let batch_rows = (rows - start).min(ENCODED_BATCH_ROWS as u64) as usize;
        let codes = points.sample_codes(encoding, start, batch_rows, seed);
        let mut placement = block_rng(seed, start / ENCODED_BATCH_ROWS as u64, 2);
        sink.write_batch(&to_batch(encoding, &schema, &codes, &mut placement)?)?;
        bar.advance(batch_rows as u64)?;
        start += batch_rows as u64;
    }
    bar.finish();
    Ok(sink)
}
