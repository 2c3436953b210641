//! `dpsynth eval`: how close synthetic tables are to the real one (SPEC §7), for the data owner.
//!
//! The tables are read with the same public bounds and compared in normalised units on [0,1]^d: W1 in ℓ∞
//! (exact where it can be, otherwise a grid estimate with a stated error, always inside the one-pass
//! sandwich), exact transport between random subsamples beside the real-vs-real floor ([`subsample`]),
//! the 2-D W1 of every column pair ([`pairwise`]), per-column W1, mean, covariance and correlation errors,
//! and k-way marginal errors ([`summary`]). Several synthetic tables are compared with the same real
//! subsamples, each optionally with the report of the run that made it ([`run_report`]). The result is
//! plain numbers ([`EvalReport`], [`EvalOutput`], serialised to JSON) and optionally a page with plots
//! ([`report_dir`]); [`command`] is `dpsynth eval` itself.
//!
//! Beside the transport figures, the scores a data owner needs to decide whether to publish: column shapes
//! and pair trends of every column type, domain adherence and support ([`shapes`]), the owner's validity
//! rules ([`rules`]), detection and utility ([`learn`]), disclosure risk against a holdout ([`disclosure`]),
//! and one quality score with the verdicts a page leads with ([`quality`]).
//!
//! Eval reads the real data and its output is not private: it is an owner tool, like the diagnostics.

pub mod command;
pub mod disclosure;
pub mod distance;
pub mod format;
pub mod learn;
pub mod marginals;
pub mod page;
pub mod pairwise;
pub mod quality;
pub mod report_dir;
pub mod rules;
pub mod run_report;
pub mod shapes;
pub mod subsample;
pub mod summary;
pub mod svg;
pub mod table;
pub mod verdict_page;
pub mod w1;

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::binner::NullPolicy;
use crate::error::Result;
use crate::geometry::bounds::ColumnBounds;
use crate::io::domain::CategoryList;

pub use distance::{Distances, GridEstimate, Sandwich, W1Estimate, W1Method};
pub use pairwise::{PairSelection, PairW1, PairwiseW1};
pub use run_report::{read_run_report, RunSummary};
pub use subsample::{Spread, SubsampleOptions, SubsampleTransport};
pub use summary::MarginalErrors;
pub use table::{load_mixed_table, load_table, place_nulls, Domains, EvalColumn, Table, ValueType};

/// The `units` string of the report.
pub const UNITS: &str = "normalised l-infinity on [0,1]^d";

/// What an evaluation compares and how.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Public bounds of the compared numbers, dates and timestamps, applied to both tables (their order is
    /// the report's unless `columns` gives one).
    pub bounds: Vec<ColumnBounds>,
    /// Public category lists of the compared categorical columns.
    pub categories: Vec<CategoryList>,
    /// The compared columns in report order (Boolean columns are named here); `None`: every column with
    /// bounds, then every one with a category list.
    pub columns: Option<Vec<String>>,
    pub nulls: NullPolicy,
    /// Side of the grid estimate; `None` picks [`distance::default_grid_side`] when no exact method fits.
    pub grid_side: Option<usize>,
    /// Exact transport between subsamples (rows, repeats, seed).
    pub subsample: SubsampleOptions,
    /// Read the real input's Hive-style key=value folders as columns (a directory input).
    pub real_hive_columns: bool,
    /// Column pairs of the pairwise 2-D W1, drawn with `subsample.seed` when sampled; `None` (the
    /// default) picks [`PairSelection::default_for`] the table's d.
    pub pairs: Option<PairSelection>,
    /// Validity rules checked on every table ([`rules`]).
    pub rules: Vec<String>,
    /// Rows drawn from each table for the detection score; 0 leaves it out.
    pub detection_rows: usize,
    /// The column of the utility score (train on synthetic, test on real), if any.
    pub target: Option<String>,
}

impl EvalOptions {
    /// The public domains the tables are read with.
    pub fn domains(&self) -> Domains {
        Domains { bounds: self.bounds.clone(), categories: self.categories.clone(), columns: self.columns.clone() }
    }

    pub fn new(bounds: Vec<ColumnBounds>) -> Self {
        EvalOptions {
            bounds,
            categories: Vec::new(),
            columns: None,
            nulls: NullPolicy::DEFAULT,
            grid_side: None,
            subsample: SubsampleOptions::default(),
            real_hive_columns: false,
            pairs: None,
            rules: Vec::new(),
            detection_rows: learn::LEARN_ROWS,
            target: None,
        }
    }
}

/// One table as the report describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableReport {
    pub file: String,
    /// Rows compared (after dropped ones).
    pub rows: u64,
    /// Values clamped to the bounds, per column.
    pub clamped_values: Vec<u64>,
    /// Rows left out for a null/NaN/infinite value (`--nulls drop`).
    pub dropped_rows: u64,
}

/// Per-column numbers; W1 normalised, the rest in the column's units.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColumnReport {
    pub name: String,
    pub lo: f64,
    pub hi: f64,
    /// Exact W1 between the column's marginals, normalised by hi − lo.
    pub w1: f64,
    pub w1_column_units: f64,
    pub mean_real: f64,
    pub mean_synth: f64,
    /// |mean_real − mean_synth|.
    pub mean_error: f64,
    pub std_real: f64,
    pub std_synth: f64,
    /// |std_real − std_synth| (population standard deviations).
    pub std_error: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeanError {
    pub max_abs: f64,
    pub l2: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CovarianceError {
    pub frobenius: f64,
    pub max_abs: f64,
}

/// Of the Pearson correlation matrices (scale-free: what covariance error says, without the spreads), or of
/// Spearman's rank correlation matrices ([`EvalReport::rank_correlation_error`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CorrelationError {
    pub frobenius: f64,
    pub max_abs: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseTiming {
    pub phase: &'static str,
    pub seconds: f64,
}

/// Everything `dpsynth eval` reports about one synthetic table. The JSON keys are a stable interface
/// (scripts read them): keys are added, never renamed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    pub real: TableReport,
    pub synth: TableReport,
    pub units: &'static str,
    pub columns: Vec<ColumnReport>,
    /// The headline W1, with bounds that hold for the true value.
    pub w1: W1Estimate,
    pub sandwich: Sandwich,
    /// The grid estimate, when it was computed (no exact method fitted, or `--grid-side`).
    pub grid: Option<GridEstimate>,
    /// Of the column means, normalised units.
    pub mean_error: MeanError,
    /// Of the covariance matrices (population), normalised units.
    pub covariance_error: CovarianceError,
    /// Total-variation errors of the k-way marginals on a grid, k = 1..=min(d, 3), finer for small k.
    pub marginals: Vec<MarginalErrors>,
    pub timings_seconds: Vec<PhaseTiming>,
    /// What to call this table on a page: its run's parameters, or its file name.
    pub label: String,
    /// The run that made the table (`--run-report`), if given.
    pub run: Option<RunSummary>,
    /// Exact transport between random subsamples and the real-vs-real floor; null when left out
    /// (`--subsample-repeats 0`) or the real table has fewer than 2 rows.
    pub subsample_transport: Option<SubsampleTransport>,
    /// 2-D W1 of every column pair; null for d = 1.
    pub pairwise_w1: Option<PairwiseW1>,
    /// The k-way marginal errors again, all on one grid (comparable across k).
    pub marginals_equal_grid: Vec<MarginalErrors>,
    pub correlation_error: CorrelationError,
    /// Of Spearman's rank correlation matrices: the dependence of the bulk of the rows, which a long tail
    /// can hide from `correlation_error` (a column whose values sit in a small part of its bounds).
    pub rank_correlation_error: CorrelationError,
    /// What a reader should know before trusting a number (a headline that cannot rank methods, a run
    /// report that does not match the table, ...).
    pub warnings: Vec<String>,
    /// One score, 0–100, from named components, with its formula.
    pub quality: quality::Quality,
    /// What is good, what is off, which rules break: what a reader should see first.
    pub verdicts: Vec<quality::Verdict>,
    /// Shape score, null shares, domain adherence and support of every column, by its type.
    pub column_shapes: Vec<shapes::ColumnShape>,
    /// Trend score and association error of every column pair; empty for d = 1.
    pub pair_trends: Vec<shapes::PairTrend>,
    /// The validity rules, broken shares in the real and the synthetic table.
    pub rules: Vec<rules::RuleReport>,
    /// Can a classifier tell real from synthetic rows; null when left out (`--detection-rows 0`).
    pub detection: Option<learn::Detection>,
    /// Train on synthetic, test on real (`--target`); null without a target.
    pub utility: Option<learn::Utility>,
    /// Owner-only disclosure-risk figures (`--holdout`); null without a holdout. Never publishable.
    pub disclosure: Option<disclosure::Disclosure>,
}

/// The JSON of `dpsynth eval`: the report of the first synthetic table at the top level (so a single
/// comparison reads as it always has), and every table's report, the first included, in `comparisons`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalOutput {
    #[serde(flatten)]
    pub first: EvalReport,
    pub comparisons: Vec<EvalReport>,
}

/// Loads both tables with the same bounds and compares them, on the current rayon pool.
pub fn evaluate(real: &Path, synth: &Path, options: &EvalOptions) -> Result<EvalReport> {
    let (real, synth, _) = load_pair(real, synth, options)?;
    evaluate_tables(&real, &synth, options)
}

/// Loads the real and synthetic tables (in parallel) and the seconds it took.
pub fn load_pair(real: &Path, synth: &Path, options: &EvalOptions) -> Result<(Table, Table, f64)> {
    let started = Instant::now();
    let domains = options.domains();
    let (real, synth) = rayon::join(
        || load_mixed_table(real, options.real_hive_columns, &domains, options.nulls),
        || load_mixed_table(synth, false, &domains, options.nulls),
    );
    let (mut real, mut synth) = (real?, synth?);
    place_nulls(&mut [&mut real, &mut synth])?;
    Ok((real, synth, started.elapsed().as_secs_f64()))
}

/// Compares two loaded tables with the same columns.
pub fn evaluate_tables(real: &Table, synth: &Table, options: &EvalOptions) -> Result<EvalReport> {
    let output = evaluate_all(real, &[(synth, None)], None, options)?;
    Ok(output.first)
}

/// Compares every synthetic table (each with the run that made it, if known) with the real one. The
/// subsample estimate draws the same real rows for every table, so their values are comparable. `holdout`:
/// real rows synthesis did not read, for the disclosure figures (and the utility score's test rows).
pub fn evaluate_all(
    real: &Table,
    synths: &[(&Table, Option<RunSummary>)],
    holdout: Option<&Table>,
    options: &EvalOptions,
) -> Result<EvalOutput> {
    let dims = real.dims();
    let parsed_rules = rules::parse_rules(&options.rules, real)?;
    let started = Instant::now();
    let synth_rows: Vec<usize> = synths.iter().map(|(table, _)| table.rows()).collect();
    let subsamples = match subsample::plan(&options.subsample, real.rows(), &synth_rows) {
        Some(rows) => {
            let points: Vec<&[f64]> = synths.iter().map(|(table, _)| &table.points[..]).collect();
            subsample::subsample_transport(&real.points, &points, dims, rows, &options.subsample)?
                .into_iter()
                .map(Some)
                .collect()
        }
        None => vec![None; synths.len()],
    };
    let subsample_seconds = started.elapsed().as_secs_f64();
    // The real table's ranks once, for every comparison: its sorts are the largest.
    let started = Instant::now();
    let rank_real = summary::rank_correlation(&real.points, dims);
    let rank_real_seconds = started.elapsed().as_secs_f64();
    let mut comparisons = Vec::with_capacity(synths.len());
    for ((synth, run), subsample) in synths.iter().zip(subsamples) {
        let mut report = compare(real, synth, options, run.clone(), subsample, &rank_real)?;
        add_publishing_scores(&mut report, real, synth, holdout, &parsed_rules, options)?;
        report.timings_seconds.extend([
            PhaseTiming { phase: "subsample_transport_all_tables", seconds: subsample_seconds },
            PhaseTiming { phase: "rank_correlation_real_table", seconds: rank_real_seconds },
        ]);
        comparisons.push(report);
    }
    Ok(EvalOutput { first: comparisons[0].clone(), comparisons })
}

/// The scores that answer "may I publish this?": shapes, trends, validity, detection, utility, disclosure,
/// and the quality score and verdicts made from them.
fn add_publishing_scores(
    report: &mut EvalReport,
    real: &Table,
    synth: &Table,
    holdout: Option<&Table>,
    parsed_rules: &[rules::Rule],
    options: &EvalOptions,
) -> Result<()> {
    let seed = options.subsample.seed;
    let mut timed = |phase: &'static str, started: Instant| {
        report.timings_seconds.push(PhaseTiming { phase, seconds: started.elapsed().as_secs_f64() })
    };
    let started = Instant::now();
    let (column_shapes, pair_trends) =
        rayon::join(|| shapes::column_shapes(real, synth), || shapes::pair_trends(real, synth));
    timed("column_shapes_and_pair_trends", started);
    let started = Instant::now();
    let rule_reports = rules::check_rules(parsed_rules, real, synth);
    timed("rules", started);
    let started = Instant::now();
    let smaller = real.rows().min(synth.rows());
    let detection = match options.detection_rows {
        0 => None,
        _ if smaller < learn::MIN_DETECTION_ROWS => {
            report.warnings.push(format!(
                "no detection score: it needs {} rows in each table and one has {smaller}",
                learn::MIN_DETECTION_ROWS
            ));
            None
        }
        rows => Some(learn::detection(real, synth, rows, seed)?),
    };
    timed("detection", started);
    let started = Instant::now();
    let utility = match &options.target {
        Some(target) => Some(learn::utility(real, synth, holdout, target, seed)?),
        None => None,
    };
    timed("utility", started);
    let started = Instant::now();
    let disclosure = holdout.map(|holdout| disclosure::disclosure(real, holdout, synth, seed));
    timed("disclosure", started);
    let quality = quality::quality(&column_shapes, &pair_trends, &rule_reports, detection.as_ref());
    report.verdicts = quality::verdicts(
        &quality,
        &column_shapes,
        &pair_trends,
        &rule_reports,
        detection.as_ref(),
        disclosure.as_ref(),
    );
    report.quality = quality;
    report.column_shapes = column_shapes;
    report.pair_trends = pair_trends;
    report.rules = rule_reports;
    report.detection = detection;
    report.utility = utility;
    report.disclosure = disclosure;
    Ok(())
}

/// Every number of one comparison but the subsample estimate and the real table's rank correlation matrix,
/// which are shared and passed in.
fn compare(
    real: &Table,
    synth: &Table,
    options: &EvalOptions,
    run: Option<RunSummary>,
    subsample: Option<SubsampleTransport>,
    rank_real: &[f64],
) -> Result<EvalReport> {
    debug_assert_eq!(real.bounds, synth.bounds);
    let dims = real.dims();
    let mut timings = Vec::new();
    let started = Instant::now();
    let distances = distance::distances(&real.points, &synth.points, dims, options.grid_side)?;
    timings.push(PhaseTiming { phase: "w1", seconds: started.elapsed().as_secs_f64() });

    let started = Instant::now();
    let (moments_real, moments_synth) =
        rayon::join(|| summary::Moments::of(&real.points, dims), || summary::Moments::of(&synth.points, dims));
    let names: Vec<String> = real.bounds.iter().map(|b| b.column.clone()).collect();
    let marginals = summary::marginal_errors(&real.points, &synth.points, dims, &names);
    timings.push(PhaseTiming { phase: "moments_and_marginals", seconds: started.elapsed().as_secs_f64() });

    let started = Instant::now();
    let (correlation_real, correlation_synth) = (moments_real.correlation(), moments_synth.correlation());
    let pairwise_w1 = pairwise::pairwise_w1(
        &real.points,
        &synth.points,
        dims,
        &names,
        &correlation_real,
        &correlation_synth,
        options.pairs.unwrap_or_else(|| PairSelection::default_for(dims)),
        options.subsample.seed,
    )?;
    timings.push(PhaseTiming { phase: "pairwise_w1", seconds: started.elapsed().as_secs_f64() });

    let (std_real, std_synth) = (moments_real.std(), moments_synth.std());
    let columns = real
        .bounds
        .iter()
        .enumerate()
        .map(|(k, bounds)| {
            let width = bounds.hi - bounds.lo;
            let (mean_real, mean_synth) =
                (bounds.denormalise(moments_real.mean[k]), bounds.denormalise(moments_synth.mean[k]));
            ColumnReport {
                name: bounds.column.clone(),
                lo: bounds.lo,
                hi: bounds.hi,
                w1: distances.columns[k],
                w1_column_units: distances.columns[k] * width,
                mean_real,
                mean_synth,
                mean_error: (moments_real.mean[k] - moments_synth.mean[k]).abs() * width,
                std_real: std_real[k] * width,
                std_synth: std_synth[k] * width,
                std_error: (std_real[k] - std_synth[k]).abs() * width,
            }
        })
        .collect();
    let (mean_max, mean_l2) = summary::difference_norms(&moments_real.mean, &moments_synth.mean);
    let (covariance_max, covariance_frobenius) =
        summary::difference_norms(&moments_real.covariance, &moments_synth.covariance);
    let (correlation_max, correlation_frobenius) = summary::difference_norms(&correlation_real, &correlation_synth);
    let started = Instant::now();
    let rank_synth = summary::rank_correlation(&synth.points, dims);
    let (rank_max, rank_frobenius) = summary::difference_norms(rank_real, &rank_synth);
    timings.push(PhaseTiming { phase: "rank_correlation", seconds: started.elapsed().as_secs_f64() });
    let synth_report = table_report(synth);
    let warnings = warnings(&distances.w1, run.as_ref(), &synth_report, options, subsample.as_ref());
    Ok(EvalReport {
        real: table_report(real),
        label: run.as_ref().map_or_else(|| file_label(&synth.file), RunSummary::label),
        synth: synth_report,
        units: UNITS,
        columns,
        w1: distances.w1,
        sandwich: distances.sandwich,
        grid: distances.grid,
        mean_error: MeanError { max_abs: mean_max, l2: mean_l2 },
        covariance_error: CovarianceError { frobenius: covariance_frobenius, max_abs: covariance_max },
        marginals: marginals.fine,
        timings_seconds: timings,
        run,
        subsample_transport: subsample,
        pairwise_w1,
        marginals_equal_grid: marginals.equal_grid,
        correlation_error: CorrelationError { frobenius: correlation_frobenius, max_abs: correlation_max },
        rank_correlation_error: CorrelationError { frobenius: rank_frobenius, max_abs: rank_max },
        warnings,
        quality: quality::Quality { score: 0.0, components: Vec::new(), formula: quality::FORMULA },
        verdicts: Vec::new(),
        column_shapes: Vec::new(),
        pair_trends: Vec::new(),
        rules: Vec::new(),
        detection: None,
        utility: None,
        disclosure: None,
    })
}

/// A headline interval wider than this fraction of its value cannot tell apart methods closer than that.
pub const HEADLINE_RESOLUTION: f64 = 0.5;

fn warnings(
    w1: &W1Estimate,
    run: Option<&RunSummary>,
    synth: &TableReport,
    options: &EvalOptions,
    subsample: Option<&SubsampleTransport>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if w1.method == W1Method::Sandwich {
        warnings.push(format!(
            "the joint W1 of the whole tables is only bracketed here ([{}, {}], midpoint shown): it cannot \
             rank methods; compare the subsample transport, pairwise 2-D W1 and marginal numbers instead",
            format::sig(w1.lower),
            format::sig(w1.upper)
        ));
    } else if w1.upper - w1.lower > HEADLINE_RESOLUTION * w1.value {
        warnings.push(format!(
            "the joint W1 of the whole tables is only known to lie in [{}, {}], wide next to its estimate {}: \
             it cannot separate methods closer than that; compare the subsample transport numbers",
            format::sig(w1.lower),
            format::sig(w1.upper),
            format::sig(w1.value)
        ));
    }
    if let Some(rows) = run.and_then(|run| run.synthetic_rows) {
        if rows != synth.rows + synth.dropped_rows {
            warnings.push(format!(
                "the run report {} says {rows} synthetic rows but {} has {}: is it the report of this table?",
                run.map_or("", |run| run.file.as_str()),
                synth.file,
                synth.rows + synth.dropped_rows
            ));
        }
    }
    match subsample {
        Some(found) if found.rows_per_sample < options.subsample.rows => warnings.push(format!(
            "subsamples have {} rows, not the {} asked for: the real table needs twice as many rows and \
             every synthetic table as many",
            found.rows_per_sample, options.subsample.rows
        )),
        _ => {}
    }
    warnings
}

/// A file's name without its directory, as a label.
fn file_label(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
}

fn table_report(table: &Table) -> TableReport {
    TableReport {
        file: table.file.display().to_string(),
        rows: table.rows() as u64,
        clamped_values: table.clamped_values.clone(),
        dropped_rows: table.dropped_rows,
    }
}

impl EvalReport {
    /// A short human summary (what `dpsynth eval` prints without `--json`): the quality score, the run
    /// and the verdicts first, then the figures that rank methods, then the details.
    pub fn summary(&self) -> String {
        let mut text = format!(
            "real {} ({} rows) vs synthetic {} ({} rows), d = {}\n",
            self.real.file,
            self.real.rows,
            self.synth.file,
            self.synth.rows,
            self.columns.len(),
        );
        text += &self.publishing_summary();
        text += &self.ranking_summary();
        text += &format!("details (W1 in {}):\n", self.units);
        let ranks = if self.w1.method == W1Method::Sandwich { " (a bracket only: not for ranking)" } else { "" };
        text += &format!(
            "  whole-table W1 = {:.6} (guaranteed within [{:.6}, {:.6}]){ranks}: {}\n",
            self.w1.value, self.w1.lower, self.w1.upper, self.w1.detail
        );
        text += &format!(
            "  sandwich: {:.6} <= W1 <= {:.6} (max 1-D W1; dyadic tree bound at depth {})\n",
            self.sandwich.lower, self.sandwich.upper, self.sandwich.depth
        );
        if let Some(grid) = &self.grid {
            text += &format!("  grid W1 (side {}): {:.6} +- {:.3e}\n", grid.side, grid.w1, grid.error_bound);
        }
        text += &format!(
            "  mean error: max {:.3e}, l2 {:.3e}; covariance error: max {:.3e}, Frobenius {:.3e} (normalised)\n",
            self.mean_error.max_abs, self.mean_error.l2, self.covariance_error.max_abs, self.covariance_error.frobenius
        );
        for marginal in &self.marginals {
            text += &format!(
                "  {}-way marginals (grid side {}): TV max {:.4} ({}), mean {:.4} over {}\n",
                marginal.k,
                marginal.side,
                marginal.max_tv,
                marginal.worst_columns.join(", "),
                marginal.mean_tv,
                marginal.count
            );
        }
        text += "  column: W1 (normalised, column units), mean error, std error, clamped real/synth\n";
        for (k, column) in self.columns.iter().enumerate() {
            text += &format!(
                "    {}: {:.6} ({:.6}), {:.6}, {:.6}, {}/{}\n",
                column.name,
                column.w1,
                column.w1_column_units,
                column.mean_error,
                column.std_error,
                self.real.clamped_values[k],
                self.synth.clamped_values[k]
            );
        }
        for warning in &self.warnings {
            text += &format!("warning: {warning}\n");
        }
        text
    }

    /// The quality score, the run that made the table, the verdicts, and the publishing scores.
    fn publishing_summary(&self) -> String {
        let components: Vec<String> = self
            .quality
            .components
            .iter()
            .map(|component| format!("{} {}", component.name.replace('_', " "), format::sig(component.score)))
            .collect();
        let mut text = format!(
            "quality score: {:.1} / 100 ({}; the formula is in the JSON)\n",
            self.quality.score,
            components.join(", ")
        );
        if let Some(run) = &self.run {
            text += &format!("made by: {} ({})\n", run.label(), run.file);
            if let Some(reason) = &run.chosen_by {
                text += &format!("  auto chose {}: {reason}\n", run.mechanism);
            }
        }
        for verdict in &self.verdicts {
            text += &format!("{}: {}\n", verdict.kind, verdict.text);
        }
        if let Some(worst) = self.column_shapes.iter().min_by(|a, b| a.score.total_cmp(&b.score)) {
            text += &format!("worst column shape: {} {} ({})\n", worst.name, format::sig(worst.score), worst.metric);
        }
        if let Some(worst) = self.pair_trends.iter().min_by(|a, b| a.score.total_cmp(&b.score)) {
            text += &format!(
                "worst pair trend: {} × {} {}\n",
                worst.columns[0],
                worst.columns[1],
                format::sig(worst.score)
            );
        }
        for rule in &self.rules {
            text += &format!(
                "rule '{}': broken by {} of synthetic rows, {} of real\n",
                rule.rule,
                format::sig(rule.broken_share_synth),
                format::sig(rule.broken_share_real)
            );
        }
        if let Some(found) = &self.detection {
            text += &format!(
                "detection ({} rows per table, sampled, {}-fold): AUC logistic {}, boosted trees {} (0.5 = \
                 indistinguishable)\n",
                found.rows_per_table,
                found.folds,
                format::sig(found.logistic_regression_auc),
                format::sig(found.boosted_trees_auc)
            );
        }
        if let Some(found) = &self.utility {
            let scores = |scores: &learn::ModelScores| match (scores.r2, scores.accuracy, scores.macro_f1) {
                (Some(r2), _, _) => format!("R² {}", format::sig(r2)),
                (_, Some(accuracy), Some(f1)) => {
                    format!("accuracy {}, macro F1 {}", format::sig(accuracy), format::sig(f1))
                }
                _ => "-".into(),
            };
            text += &format!(
                "utility for {} ({}, sampled): train on synthetic {}; train on real {}\n",
                found.target,
                found.model,
                scores(&found.train_synth_test_real),
                scores(&found.train_real_test_real)
            );
        }
        if let Some(risk) = &self.disclosure {
            text += &format!(
                "disclosure (OWNER ONLY, never publish; holdout {}{}): exact copies {} (holdout {}), DCR ratio {}, \
                 closer to training {} (about 0.5 expected), membership-inference AUC {}\n",
                risk.holdout_file,
                if risk.sampled { ", sampled" } else { "" },
                format::sig(risk.exact_copy_share),
                format::sig(risk.holdout_exact_copy_share),
                risk.dcr_ratio.map_or("-".into(), format::sig),
                format::sig(risk.closer_to_train_share),
                format::sig(risk.membership_inference_auc)
            );
        }
        text
    }

    /// The estimates that rank methods at any d, and the warnings, rounded for reading.
    fn ranking_summary(&self) -> String {
        let mut text = String::new();
        if let Some(found) = &self.subsample_transport {
            text += &format!(
                "subsample transport ({} rows, {} repeats, exact): W1 {}, real-vs-real floor {}{}\n",
                found.rows_per_sample,
                found.repeats,
                format::plus_minus(found.w1.mean, found.w1.std),
                format::plus_minus(found.floor.mean, found.floor.std),
                found.ratio_to_floor.map_or(String::new(), |ratio| format!(" ({} x the floor)", format::sig(ratio)))
            );
        }
        if let Some(pairs) = &self.pairwise_w1 {
            text += &format!(
                "pairwise 2-D W1 (grid side {}): mean {}, max {} ({}){}\n",
                pairs.side,
                format::sig(pairs.mean),
                format::sig(pairs.max),
                pairs.worst_columns.join(", "),
                pairs.coverage()
            );
        }
        for marginal in &self.marginals_equal_grid {
            text += &format!(
                "{}-way TV on one grid (side {}): max {} ({}), mean {}\n",
                marginal.k,
                marginal.side,
                format::sig(marginal.max_tv),
                marginal.worst_columns.join(", "),
                format::sig(marginal.mean_tv)
            );
        }
        text += &format!(
            "correlation error: max {}, Frobenius {}\n",
            format::sig(self.correlation_error.max_abs),
            format::sig(self.correlation_error.frobenius)
        );
        text += &format!(
            "rank correlation error: max {}, Frobenius {}\n",
            format::sig(self.rank_correlation_error.max_abs),
            format::sig(self.rank_correlation_error.frobenius)
        );
        text
    }
}

impl EvalOutput {
    /// The summary of each table, then (for several) one line per table with the numbers that rank them.
    pub fn summary(&self) -> String {
        let mut text = self.comparisons.iter().map(EvalReport::summary).collect::<Vec<_>>().join("\n");
        if self.comparisons.len() > 1 {
            text +=
                "\nside by side: quality score, subsample W1 (x floor), mean pairwise 2-D W1, max 1-D W1, max 2-way TV (one grid)\n";
            for report in &self.comparisons {
                let subsample = report.subsample_transport.as_ref();
                text += &format!(
                    "  {}: {:.1}, {} ({}), {}, {}, {}\n",
                    report.label,
                    report.quality.score,
                    subsample.map_or("-".into(), |found| format::sig(found.w1.mean)),
                    subsample.and_then(|found| found.ratio_to_floor).map_or("-".into(), format::sig),
                    report.pairwise_w1.as_ref().map_or("-".into(), |pairs| format::sig(pairs.mean)),
                    format::sig(report.sandwich.lower),
                    report.marginals_equal_grid.get(1).map_or("-".into(), |marginal| format::sig(marginal.max_tv)),
                );
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(value: f64, lower: f64, upper: f64, method: W1Method) -> W1Estimate {
        W1Estimate { value, lower, upper, method, detail: String::new() }
    }

    #[test]
    fn warnings_name_what_a_reader_cannot_rely_on() {
        let options = EvalOptions::new(Vec::new());
        let synth = TableReport { file: "s.parquet".into(), rows: 100, clamped_values: vec![0], dropped_rows: 0 };
        let exact = estimate(0.1, 0.1, 0.1, W1Method::ExactTransport);
        assert!(warnings(&exact, None, &synth, &options, None).is_empty());
        let midpoint = estimate(0.2, 0.1, 0.3, W1Method::Sandwich);
        assert!(warnings(&midpoint, None, &synth, &options, None)[0].contains("cannot rank methods"));
        let wide = estimate(0.02, 0.01, 0.05, W1Method::Grid);
        assert!(warnings(&wide, None, &synth, &options, None)[0].contains("[0.0100, 0.0500]"));
        let narrow = estimate(0.02, 0.019, 0.021, W1Method::Grid);
        assert!(warnings(&narrow, None, &synth, &options, None).is_empty());

        let run = RunSummary {
            file: "r.json".into(),
            mechanism: "pmm".into(),
            epsilon: 1.0,
            delta: None,
            epsilon_spent: None,
            neighbours: None,
            depth: None,
            cells: None,
            target_dim: None,
            fit_for_release: None,
            synthetic_rows: Some(99),
            accuracy_bound: None,
            tool_version: None,
            chosen_by: None,
        };
        let found = warnings(&exact, Some(&run), &synth, &options, None);
        assert!(found[0].contains("r.json") && found[0].contains("99"), "{found:?}");
        let matching = RunSummary { synthetic_rows: Some(100), ..run };
        assert!(warnings(&exact, Some(&matching), &synth, &options, None).is_empty());

        let spread = Spread::of(vec![0.1]);
        let small = SubsampleTransport {
            rows_per_sample: 50,
            repeats: 1,
            seed: 0,
            w1: spread.clone(),
            floor: spread,
            ratio_to_floor: Some(1.0),
            detail: String::new(),
        };
        let found = warnings(&exact, None, &synth, &options, Some(&small));
        assert!(found[0].contains("50 rows, not the 1000"), "{found:?}");
    }
}
