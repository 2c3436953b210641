//! `--report-dir`: a page for people. `index.html` (self-contained: plots inline), `index.md` (plots as
//! files beside it), one histogram SVG per column, 2-D density SVGs (real, synthetic, difference) for the
//! column pairs with the largest 2-D W1, and `eval.json` with every number.
//!
//! The page leads with the quality score and the verdicts ([`super::verdict_page`]) and what was compared
//! (the run behind each synthetic table), then the column shapes, pair trends, rules, detection, utility and
//! disclosure figures, then a table of the transport numbers with what each means, then per-column and
//! per-pair detail with the worst ones highlighted. Skewed columns get a second, zoomed histogram panel (the real rows' 1–99% range), and the
//! densities use the same zoomed windows.

use rayon::prelude::*;

use super::format::{count, plus_minus, sig};
use super::page::{html, markdown, Block, Cell, Figure, Grid, Mark};
use super::summary::{marginal_histogram, EQUAL_GRID_MARGINAL_SIDE, MARGINAL_SIDES, SUM_CHUNK_ROWS};
use super::svg::{density_panels, histogram, Axis, HistogramPanel, Series};
use super::verdict_page::{self, disclosure_blocks, learning_blocks, rules_block, shapes_block, verdict_blocks};
use super::{EvalOutput, EvalReport, MarginalErrors, Table, W1Method};

/// Bins of each column histogram panel.
pub const HISTOGRAM_BINS: usize = 50;

/// Cells per axis of the 2-D density pictures.
pub const DENSITY_SIDE: usize = 40;

/// Density pictures are drawn for this many column pairs: those with the largest 2-D W1 (first table).
pub const MAX_DENSITY_PAIRS: usize = 6;

/// A column is zoomed when its real rows' [`ZOOM_QUANTILES`] range covers less than this share of its
/// public bounds (wide public bounds squeeze the data into a corner of the full-range picture).
pub const ZOOM_WHEN_RANGE_BELOW: f64 = 0.5;

/// The zoomed window: the real rows between these quantiles, widened by [`ZOOM_MARGIN`] each side.
pub const ZOOM_QUANTILES: (f64, f64) = (0.01, 0.99);

/// Margin of the zoomed window, as a share of its width, each side.
pub const ZOOM_MARGIN: f64 = 0.05;

/// Bins of the histogram the quantiles are read from (their error: 1/4096 of the bounds).
const QUANTILE_BINS: usize = 4096;

const TITLE: &str = "dpsynth eval: real vs synthetic";
const NOT_PRIVATE: &str = "NOT PRIVATE: computed from the real data, for the data owner only. Do not publish.";

/// Characters safe in a file name on every platform; others become '_'.
fn slug(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// The part of a column a picture shows, in normalised units.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Window {
    lo: f64,
    hi: f64,
    zoomed: bool,
}

const FULL: Window = Window { lo: 0.0, hi: 1.0, zoomed: false };

/// The zoomed window of column `axis` if the real rows are concentrated enough, else the full range.
fn window(real: &Table, axis: usize) -> Window {
    let hist = marginal_histogram(&real.points, real.dims(), &[axis], QUANTILE_BINS);
    let total = real.rows() as f64;
    let cell_at = |quantile: f64| {
        let mut seen = 0u64;
        hist.iter()
            .position(|&count| {
                seen += count;
                seen as f64 >= quantile * total
            })
            .unwrap_or(QUANTILE_BINS - 1)
    };
    let (lo, hi) = (
        cell_at(ZOOM_QUANTILES.0) as f64 / QUANTILE_BINS as f64,
        (cell_at(ZOOM_QUANTILES.1) + 1) as f64 / QUANTILE_BINS as f64,
    );
    if hi - lo >= ZOOM_WHEN_RANGE_BELOW {
        return FULL;
    }
    let margin = ZOOM_MARGIN * (hi - lo);
    Window { lo: (lo - margin).max(0.0), hi: (hi + margin).min(1.0), zoomed: true }
}

/// Shares of all rows of `table` per cell of `bins`^k cells over the windows of the columns `axes` (rows
/// outside a window are not counted); row-major, the first axis most significant.
fn window_shares(table: &Table, axes: &[usize], windows: &[Window], bins: usize) -> Vec<f64> {
    let dims = table.dims();
    let cells = bins.pow(axes.len() as u32);
    let partials: Vec<Vec<u64>> = table
        .points
        .par_chunks(SUM_CHUNK_ROWS * dims)
        .map(|chunk| {
            let mut hist = vec![0u64; cells];
            'rows: for row in chunk.chunks_exact(dims) {
                let mut cell = 0;
                for (&axis, window) in axes.iter().zip(windows) {
                    let t = (row[axis] - window.lo) / (window.hi - window.lo);
                    if !(0.0..=1.0).contains(&t) {
                        continue 'rows;
                    }
                    cell = cell * bins + ((t * bins as f64) as usize).min(bins - 1);
                }
                hist[cell] += 1;
            }
            hist
        })
        .collect();
    let total = table.rows().max(1) as f64;
    let mut shares = vec![0.0; cells];
    for partial in partials {
        for (share, count) in shares.iter_mut().zip(partial) {
            *share += count as f64;
        }
    }
    shares.iter_mut().for_each(|share| *share /= total);
    shares
}

/// Index of the largest value (the first of equals).
fn argmax(values: impl Iterator<Item = f64>) -> Option<usize> {
    values
        .enumerate()
        .fold(None, |best: Option<(usize, f64)>, (i, v)| match best {
            Some((_, top)) if top >= v => best,
            _ => Some((i, v)),
        })
        .map(|(i, _)| i)
}

/// A row of the headline table: one value per synthetic table, the smallest marked when there are several.
fn headline_row(measure: &str, meaning: &str, values: &[Option<(f64, String)>]) -> Vec<Cell> {
    let best = (values.len() > 1)
        .then(|| values.iter().filter_map(|value| value.as_ref().map(|(v, _)| *v)).fold(f64::INFINITY, f64::min))
        .filter(|best| best.is_finite());
    let mut row = vec![Cell::plain(measure), Cell::plain(meaning)];
    for value in values {
        row.push(match value {
            Some((v, text)) if Some(*v) == best => Cell::marked(text.clone(), Mark::Best),
            Some((_, text)) => Cell::plain(text.clone()),
            None => Cell::plain("–"),
        });
    }
    row
}

fn worst_text(error: &MarginalErrors) -> (f64, String) {
    (error.max_tv, format!("{}\n({})", sig(error.max_tv), error.worst_columns.join(", ")))
}

/// What each synthetic table is, and the run behind it.
fn compared(output: &EvalOutput) -> Block {
    let first = &output.first;
    let mut rows = vec![vec![
        Cell::plain("real"),
        Cell::plain(first.real.file.clone()),
        Cell::plain(count(first.real.rows)),
        Cell::plain("–"),
        Cell::plain("–"),
        Cell::plain("–"),
        Cell::plain("–"),
        Cell::plain("–"),
        Cell::plain("–"),
    ]];
    for report in &output.comparisons {
        let run = report.run.as_ref();
        let text = |value: Option<String>| Cell::plain(value.unwrap_or_else(|| "–".into()));
        rows.push(vec![
            Cell::plain(report.label.clone()),
            Cell::plain(report.synth.file.clone()),
            Cell::plain(count(report.synth.rows)),
            text(run.map(|run| match run.chosen_by {
                Some(_) => format!("auto (chose {})", run.mechanism),
                None => run.mechanism.clone(),
            })),
            text(run.map(|run| format!("{}", run.epsilon))),
            text(run.and_then(|run| run.delta).map(|delta| format!("{delta}"))),
            // The relation's name, without the report's explanation after the colon.
            text(run.and_then(|run| {
                let neighbours = run.neighbours.as_deref()?;
                Some(neighbours.split(':').next().unwrap_or(neighbours).to_string())
            })),
            text(run.and_then(|run| {
                let mut parts = Vec::new();
                if let Some(depth) = run.depth {
                    parts.push(format!("depth {depth}"));
                }
                if let Some(cells) = run.cells {
                    parts.push(format!("{} cells", count(cells)));
                }
                if let Some(target_dim) = run.target_dim {
                    parts.push(format!("d' = {target_dim}"));
                }
                (!parts.is_empty()).then(|| parts.join(", "))
            })),
            text(run.map(|run| match run.fit_for_release {
                Some(false) => "seeded (not for release)".to_string(),
                Some(true) => "fresh noise".to_string(),
                None => "–".to_string(),
            })),
        ]);
    }
    Block::Table(Grid {
        head: ["table", "file", "rows", "mechanism", "ε", "δ", "neighbours", "depth / cells", "noise"]
            .map(String::from)
            .to_vec(),
        rows,
        wrapping: vec![],
    })
}

/// The headline numbers of every table, with what each means.
fn headline(output: &EvalOutput) -> Vec<Block> {
    let reports = &output.comparisons;
    let first = &output.first;
    let mut rows = Vec::new();
    if let Some(found) = &first.subsample_transport {
        rows.push(headline_row(
            &format!("Joint W1 on subsamples ({} rows, {} draws)", found.rows_per_sample, found.repeats),
            "Exact optimal transport between random real and synthetic rows, mean ± spread over the draws. \
             Ranks methods at any number of columns; lower is better; compare only at the same row count.",
            &reports
                .iter()
                .map(|report| {
                    report
                        .subsample_transport
                        .as_ref()
                        .map(|found| (found.w1.mean, plus_minus(found.w1.mean, found.w1.std)))
                })
                .collect::<Vec<_>>(),
        ));
        rows.push(headline_row(
            "↳ real vs real (the floor)",
            "The same between two disjoint sets of real rows: what sampling alone gives. Nothing can be \
             expected to do better.",
            &reports
                .iter()
                .map(|_| Some((f64::NAN, plus_minus(found.floor.mean, found.floor.std))))
                .collect::<Vec<_>>(),
        ));
        rows.push(headline_row(
            "↳ times the floor",
            "1 means as close to the real rows as another sample of them.",
            &reports
                .iter()
                .map(|report| {
                    report
                        .subsample_transport
                        .as_ref()
                        .and_then(|found| found.ratio_to_floor)
                        .map(|ratio| (ratio, format!("{}×", sig(ratio))))
                })
                .collect::<Vec<_>>(),
        ));
    }
    if let Some(pairs) = &first.pairwise_w1 {
        rows.push(headline_row(
            "Mean 2-D W1 over column pairs",
            &format!(
                "W1 between the tables' 2-column marginals (grid of {} cells per axis, or exact), averaged \
                 over {}: how well relations between two columns are kept.",
                pairs.side,
                if pairs.pairs_compared < pairs.pairs_total {
                    pairs.coverage().trim_start().to_string()
                } else {
                    format!("the {} pairs", pairs.pairs_total)
                }
            ),
            &reports
                .iter()
                .map(|report| report.pairwise_w1.as_ref().map(|pairs| (pairs.mean, sig(pairs.mean))))
                .collect::<Vec<_>>(),
        ));
        rows.push(headline_row(
            "Worst 2-D W1 (pair)",
            "The largest of those; a lower bound on the joint W1.",
            &reports
                .iter()
                .map(|report| {
                    report
                        .pairwise_w1
                        .as_ref()
                        .map(|pairs| (pairs.max, format!("{}\n({})", sig(pairs.max), pairs.worst_columns.join(", "))))
                })
                .collect::<Vec<_>>(),
        ));
    }
    rows.push(headline_row(
        "Worst 1-D W1 (column)",
        "W1 of a single column (exact): how far its values are moved on average.",
        &reports
            .iter()
            .map(|report| {
                let worst = argmax(report.columns.iter().map(|column| column.w1)).unwrap_or(0);
                let column = &report.columns[worst];
                Some((column.w1, format!("{}\n({})", sig(column.w1), column.name)))
            })
            .collect::<Vec<_>>(),
    ));
    for (position, marginal) in first.marginals_equal_grid.iter().enumerate() {
        rows.push(headline_row(
            &format!("Worst {}-way TV (grid {} per axis)", marginal.k, marginal.side),
            &format!(
                "Total variation of the {}-column marginals: the share of rows that would have to change \
                 cell (0 = same, 1 = disjoint). One grid for every k, so it can only grow with k.",
                marginal.k
            ),
            &reports.iter().map(|report| report.marginals_equal_grid.get(position).map(worst_text)).collect::<Vec<_>>(),
        ));
    }
    rows.push(headline_row(
        "Worst mean error",
        "Largest difference of a column's mean, as a share of its range.",
        &reports
            .iter()
            .map(|report| Some((report.mean_error.max_abs, sig(report.mean_error.max_abs))))
            .collect::<Vec<_>>(),
    ));
    rows.push(headline_row(
        "Correlation error",
        "Largest difference of a correlation coefficient between two columns (−1 … 1).",
        &reports
            .iter()
            .map(|report| Some((report.correlation_error.max_abs, sig(report.correlation_error.max_abs))))
            .collect::<Vec<_>>(),
    ));
    rows.push(headline_row(
        "Rank correlation error",
        "Largest difference of a rank (Spearman) correlation between two columns: the bulk's dependence.",
        &reports
            .iter()
            .map(|report| Some((report.rank_correlation_error.max_abs, sig(report.rank_correlation_error.max_abs))))
            .collect::<Vec<_>>(),
    ));
    rows.push(headline_row(
        "Covariance error (Frobenius)",
        "Size of the difference of the covariance matrices, in range units squared.",
        &reports
            .iter()
            .map(|report| Some((report.covariance_error.frobenius, sig(report.covariance_error.frobenius))))
            .collect::<Vec<_>>(),
    ));
    // Last: at many columns only an interval is known, which cannot rank methods.
    let method_meaning = match first.w1.method {
        W1Method::Exact1d | W1Method::ExactTransport => "Exact W1 between the whole tables.".to_string(),
        W1Method::Grid => format!(
            "Estimated on a grid of {} cells per axis; the true value is guaranteed inside the interval.",
            first.grid.as_ref().map_or(0, |grid| grid.side)
        ),
        W1Method::Sandwich => "Only bracketed at this many columns (midpoint shown): the interval is \
                               guaranteed, the value is not an estimate to rank by."
            .to_string(),
    };
    rows.push(headline_row(
        "Joint W1, whole tables (guaranteed interval)",
        &method_meaning,
        &reports
            .iter()
            .map(|report| {
                let w1 = &report.w1;
                let text = if w1.method == W1Method::Exact1d || w1.method == W1Method::ExactTransport {
                    sig(w1.value)
                } else {
                    format!("{} in [{}, {}]", sig(w1.value), sig(w1.lower), sig(w1.upper))
                };
                Some((w1.value, text))
            })
            .collect::<Vec<_>>(),
    ));
    let mut head = vec!["measure".to_string(), "what it means".to_string()];
    head.extend(reports.iter().map(|report| report.label.clone()));
    let mut blocks = vec![Block::Table(Grid { head, rows, wrapping: vec![1] })];
    for report in reports {
        for warning in &report.warnings {
            blocks.push(Block::Warning(if reports.len() > 1 {
                format!("{}: {warning}", report.label)
            } else {
                warning.clone()
            }));
        }
    }
    blocks
}

/// Per-column numbers, the largest W1 of each table marked.
fn columns_table(output: &EvalOutput) -> Block {
    let reports = &output.comparisons;
    let first = &output.first;
    let worst: Vec<Option<usize>> =
        reports.iter().map(|report| argmax(report.columns.iter().map(|column| column.w1))).collect();
    let mut head: Vec<String> = ["column", "bounds", "mean real", "std real"].map(String::from).to_vec();
    // Several tables get three columns each (W1 in column units is in the histogram captions).
    let single = reports.len() == 1;
    for report in reports {
        let prefix = if single { String::new() } else { format!("{}: ", report.label) };
        head.push(format!("{prefix}W1"));
        if single {
            head.push("W1 (column units)".into());
        }
        head.push(format!("{prefix}mean"));
        head.push(format!("{prefix}std"));
    }
    head.push("clamped (real / synthetic)".into());
    let rows = first
        .columns
        .iter()
        .enumerate()
        .map(|(k, column)| {
            let mut row = vec![
                Cell::plain(column.name.clone()),
                Cell::plain(format!("[{},\u{a0}{}]", sig(column.lo), sig(column.hi))),
                Cell::plain(sig(column.mean_real)),
                Cell::plain(sig(column.std_real)),
            ];
            for (report, worst) in reports.iter().zip(&worst) {
                let theirs = &report.columns[k];
                let mark = if *worst == Some(k) { Mark::Worst } else { Mark::Plain };
                row.push(Cell::marked(sig(theirs.w1), mark));
                if single {
                    row.push(Cell::plain(sig(theirs.w1_column_units)));
                }
                row.push(Cell::plain(sig(theirs.mean_synth)));
                row.push(Cell::plain(sig(theirs.std_synth)));
            }
            let clamped: Vec<String> = std::iter::once(first.real.clamped_values[k])
                .chain(reports.iter().map(|report| report.synth.clamped_values[k]))
                .map(count)
                .collect();
            row.push(Cell::plain(clamped.join(" / ")));
            row
        })
        .collect();
    Block::Table(Grid { head, rows, wrapping: vec![] })
}

/// One histogram figure per column: the full bounds, and a zoomed panel for skewed columns.
fn histograms(output: &EvalOutput, real: &Table, synths: &[Table], windows: &[Window]) -> Vec<Figure> {
    let first = &output.first;
    let worst = argmax(first.columns.iter().map(|column| column.w1));
    real.bounds
        .iter()
        .enumerate()
        .map(|(k, bounds)| {
            let mut views = vec![FULL];
            if windows[k].zoomed {
                views.push(windows[k]);
            }
            let shares: Vec<(Vec<f64>, Vec<Vec<f64>>)> = views
                .iter()
                .map(|view| {
                    (
                        window_shares(real, &[k], &[*view], HISTOGRAM_BINS),
                        synths.iter().map(|synth| window_shares(synth, &[k], &[*view], HISTOGRAM_BINS)).collect(),
                    )
                })
                .collect();
            let panels: Vec<HistogramPanel> = views
                .iter()
                .zip(&shares)
                .map(|(view, (real_shares, synth_shares))| HistogramPanel {
                    title: if view.zoomed {
                        format!(
                            "zoom: {} to {} (real 1–99%)",
                            sig(bounds.denormalise(view.lo)),
                            sig(bounds.denormalise(view.hi))
                        )
                    } else {
                        "public bounds".to_string()
                    },
                    lo: bounds.denormalise(view.lo),
                    hi: bounds.denormalise(view.hi),
                    real: real_shares,
                    synths: output
                        .comparisons
                        .iter()
                        .zip(synth_shares)
                        .map(|(report, shares)| Series { name: &report.label, shares })
                        .collect(),
                })
                .collect();
            let column = &first.columns[k];
            let mut caption = format!(
                "{}: W1 {} ({} in column units); mean {} real vs {} synthetic",
                bounds.column,
                sig(column.w1),
                sig(column.w1_column_units),
                sig(column.mean_real),
                sig(column.mean_synth)
            );
            if output.comparisons.len() > 1 {
                caption += &format!(" ({})", first.label);
            }
            caption += ".";
            if worst == Some(k) {
                caption += " Largest 1-D error.";
            }
            if windows[k].zoomed {
                caption += " Right: the real rows' 1–99% range, where the full range squeezes the data.";
            }
            Figure {
                file: format!("hist-{k}-{}.svg", slug(&bounds.column)),
                caption,
                svg: histogram(&bounds.column, &panels),
                highlight: worst == Some(k),
            }
        })
        .collect()
}

/// Per-pair numbers (2-D W1 and correlations), the worst pair of each table marked; `None` for d = 1.
fn pairs_table(output: &EvalOutput) -> Option<Block> {
    let reports = &output.comparisons;
    let first = output.first.pairwise_w1.as_ref()?;
    let mut head: Vec<String> = ["pair", "correlation real"].map(String::from).to_vec();
    for report in reports {
        let prefix = if reports.len() > 1 { format!("{}: ", report.label) } else { String::new() };
        head.push(format!("{prefix}2-D W1"));
        head.push(format!("{prefix}correlation"));
    }
    let worst: Vec<Option<usize>> = reports
        .iter()
        .map(|report| report.pairwise_w1.as_ref().and_then(|pairs| argmax(pairs.pairs.iter().map(|pair| pair.w1))))
        .collect();
    let rows = first
        .pairs
        .iter()
        .enumerate()
        .map(|(p, pair)| {
            let mut row = vec![Cell::plain(pair.columns.join(", ")), Cell::plain(sig(pair.correlation_real))];
            for (report, worst) in reports.iter().zip(&worst) {
                let theirs = &report.pairwise_w1.as_ref().expect("same columns").pairs[p];
                let mark = if *worst == Some(p) { Mark::Worst } else { Mark::Plain };
                row.push(Cell::marked(sig(theirs.w1), mark));
                row.push(Cell::plain(sig(theirs.correlation_synth)));
            }
            row
        })
        .collect();
    Some(Block::Table(Grid { head, rows, wrapping: vec![] }))
}

/// Density figures of the pairs with the largest 2-D W1 (first table), one per pair and synthetic table.
fn densities(output: &EvalOutput, real: &Table, synths: &[Table], windows: &[Window]) -> Vec<Figure> {
    let Some(pairwise) = &output.first.pairwise_w1 else {
        return Vec::new();
    };
    let mut order: Vec<usize> = (0..pairwise.pairs.len()).collect();
    order.sort_by(|&a, &b| pairwise.pairs[b].w1.total_cmp(&pairwise.pairs[a].w1));
    let chosen = &order[..order.len().min(MAX_DENSITY_PAIRS)];
    let bounds = &real.bounds;
    let mut figures = Vec::new();
    for &p in chosen {
        let [i, j] = pairwise.pairs[p].axes;
        let views = [windows[i], windows[j]];
        let real_shares = window_shares(real, &[i, j], &views, DENSITY_SIDE);
        let axis = |k: usize, view: &Window| Axis {
            name: &bounds[k].column,
            lo: bounds[k].denormalise(view.lo),
            hi: bounds[k].denormalise(view.hi),
        };
        for (t, (synth, report)) in synths.iter().zip(&output.comparisons).enumerate() {
            let synth_shares = window_shares(synth, &[i, j], &views, DENSITY_SIDE);
            let pair = &report.pairwise_w1.as_ref().expect("same columns").pairs[p];
            let suffix = if t == 0 { String::new() } else { format!("-{}", t + 1) };
            let mut caption = format!(
                "{} (horizontal) and {} (vertical), {}: 2-D W1 {}, correlation {} real vs {} synthetic",
                bounds[i].column,
                bounds[j].column,
                report.label,
                sig(pair.w1),
                sig(pair.correlation_real),
                sig(pair.correlation_synth)
            );
            if views.iter().any(|view| view.zoomed) {
                caption += "; zoomed to the real rows' 1–99% range";
            }
            let worst_of_this_table = pairwise.pairs.len() > 1
                && report.pairwise_w1.as_ref().and_then(|pairs| argmax(pairs.pairs.iter().map(|pair| pair.w1)))
                    == Some(p);
            if worst_of_this_table {
                caption += ". Largest 2-D error of this table.";
            }
            figures.push(Figure {
                file: format!("density-{i}-{j}-{}-{}{suffix}.svg", slug(&bounds[i].column), slug(&bounds[j].column)),
                caption,
                svg: density_panels(
                    &axis(i, &views[0]),
                    &axis(j, &views[1]),
                    DENSITY_SIDE,
                    &real_shares,
                    &synth_shares,
                    &report.label,
                ),
                highlight: worst_of_this_table,
            });
        }
    }
    figures
}

fn marginals_table(reports: &[EvalReport], pick: impl Fn(&EvalReport) -> &[MarginalErrors]) -> Block {
    let mut head: Vec<String> = ["k", "grid per axis", "subsets"].map(String::from).to_vec();
    for report in reports {
        let prefix = if reports.len() > 1 { format!("{}: ", report.label) } else { String::new() };
        head.push(format!("{prefix}max TV (worst)"));
        head.push(format!("{prefix}mean TV"));
    }
    let rows = pick(&reports[0])
        .iter()
        .enumerate()
        .map(|(position, marginal)| {
            let mut row = vec![
                Cell::plain(marginal.k.to_string()),
                Cell::plain(marginal.side.to_string()),
                Cell::plain(marginal.count.to_string()),
            ];
            for report in reports {
                // A larger synthetic table can leave out an order the work limit allowed for the first.
                match pick(report).get(position) {
                    Some(theirs) => {
                        row.push(Cell::plain(worst_text(theirs).1));
                        row.push(Cell::plain(sig(theirs.mean_tv)));
                    }
                    None => row.extend([Cell::plain("–"), Cell::plain("–")]),
                }
            }
            row
        })
        .collect();
    Block::Table(Grid { head, rows, wrapping: vec![] })
}

fn details(output: &EvalOutput) -> Vec<Block> {
    let mut blocks = Vec::new();
    for report in &output.comparisons {
        let mut text = format!(
            "{}: sandwich (always valid) {} ≤ W1 ≤ {} (largest 1-D W1; dyadic-tree bound at depth {}). Headline: {}.",
            report.label,
            sig(report.sandwich.lower),
            sig(report.sandwich.upper),
            report.sandwich.depth,
            report.w1.detail
        );
        if let Some(grid) = &report.grid {
            text += &format!(
                " Grid estimate: side {}, {} within {} of the true W1.",
                grid.side,
                sig(grid.w1),
                sig(grid.error_bound)
            );
        }
        if let Some(found) = &report.subsample_transport {
            text += &format!(" Subsamples: {}.", found.detail);
        }
        let timings: Vec<String> =
            report.timings_seconds.iter().map(|timing| format!("{} {} s", timing.phase, sig(timing.seconds))).collect();
        text += &format!(" Timings: {}.", timings.join(", "));
        blocks.push(Block::Text(text));
    }
    blocks
}

/// Every file of the report directory, as (name, text): the plots, `eval.json` (= `json`), `index.md`
/// and `index.html`. `synths` are the loaded synthetic tables in the order of `output.comparisons`.
pub fn report_pages(output: &EvalOutput, json: &str, real: &Table, synths: &[Table]) -> Vec<(String, String)> {
    let windows: Vec<Window> = (0..real.dims()).map(|axis| window(real, axis)).collect();
    let histogram_figures = histograms(output, real, synths, &windows);
    let density_figures = densities(output, real, synths, &windows);
    let mut blocks = vec![Block::Heading("Verdict".into())];
    blocks.extend(verdict_blocks(output));
    blocks.extend([Block::Heading("What was compared".into()), compared(output)]);
    blocks.push(Block::Heading("Column shapes, domain and support".into()));
    blocks.push(shapes_block(output));
    if let Some(block) = verdict_page::pairs_block(output) {
        blocks.push(Block::Heading("Pair trends".into()));
        blocks.push(block);
    }
    if let Some(block) = rules_block(output) {
        blocks.push(Block::Heading("Validity rules".into()));
        blocks.push(block);
    }
    let learning = learning_blocks(output);
    if !learning.is_empty() {
        blocks.push(Block::Heading("Detection and utility".into()));
        blocks.extend(learning);
    }
    let disclosure = disclosure_blocks(output);
    if !disclosure.is_empty() {
        blocks.push(Block::Heading("Disclosure risk (owner only)".into()));
        blocks.extend(disclosure);
    }
    blocks.extend([
        Block::Heading("Transport numbers".into()),
        Block::Text(
            "Distances are in normalised units: each column is scaled to [0, 1] by its public bounds, so 0.01 \
             is 1% of a column's range, and points are compared in ℓ∞ (the largest coordinate difference). \
             W1 (Wasserstein-1) is the average distance rows must move to turn one table into the other: 0 \
             for identical tables, lower is better."
                .into(),
        ),
    ]);
    blocks.extend(headline(output));
    blocks.push(Block::Heading("Columns".into()));
    blocks.push(columns_table(output));
    blocks.push(Block::Figures(histogram_figures.clone()));
    if let Some(table) = pairs_table(output) {
        blocks.push(Block::Heading("Column pairs".into()));
        blocks.push(table);
        blocks.push(Block::Text(format!(
            "Densities of the {} pairs with the largest 2-D W1: real, synthetic, and real − synthetic (blue \
             where the real table has more rows, red where the synthetic one has).",
            density_figures.len() / output.comparisons.len().max(1)
        )));
        blocks.push(Block::Figures(density_figures.clone()));
    }
    blocks.push(Block::Heading("Marginals".into()));
    blocks.push(Block::Text(format!(
        "Total variation of every k-column marginal on one grid of {EQUAL_GRID_MARGINAL_SIDE} cells per axis \
         (comparable across k), then on finer grids for small k ({} cells per axis for k = 1, 2, 3; TV grows \
         with the number of cells).",
        MARGINAL_SIDES.map(|side| side.to_string()).join(", ")
    )));
    blocks.push(marginals_table(&output.comparisons, |report| &report.marginals_equal_grid));
    blocks.push(marginals_table(&output.comparisons, |report| &report.marginals));
    blocks.push(Block::Heading("Details".into()));
    blocks.extend(details(output));

    let mut pages: Vec<(String, String)> = histogram_figures
        .iter()
        .chain(&density_figures)
        .map(|figure| (figure.file.clone(), figure.svg.clone()))
        .collect();
    pages.push(("eval.json".into(), json.to_string()));
    pages.push(("index.md".into(), markdown(TITLE, NOT_PRIVATE, &blocks)));
    pages.push(("index.html".into(), html(TITLE, NOT_PRIVATE, &blocks)));
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::bounds::ColumnBounds;

    fn table(points: Vec<f64>, dims: usize) -> Table {
        let bounds: Vec<ColumnBounds> =
            (0..dims).map(|k| ColumnBounds::new(format!("c{k}"), 0.0, 100.0).unwrap()).collect();
        Table::of_numbers("t.parquet", bounds, points)
    }

    #[test]
    fn file_names_keep_only_safe_characters() {
        assert_eq!(slug("dep_delay-2"), "dep_delay-2");
        assert_eq!(slug("a/b c.é"), "a_b_c__");
    }

    #[test]
    fn concentrated_columns_are_zoomed_to_their_real_quantiles() {
        // Column 0 in [0.10, 0.20) (skewed: 10% of the range), column 1 spread over [0, 1).
        let points: Vec<f64> = (0..1000).flat_map(|i| [0.1 + 0.1 * i as f64 / 1000.0, i as f64 / 1000.0]).collect();
        let real = table(points, 2);
        let zoom = window(&real, 0);
        assert!(zoom.zoomed && zoom.lo < 0.1 && zoom.lo > 0.09 && zoom.hi > 0.2 && zoom.hi < 0.21, "{zoom:?}");
        assert_eq!(window(&real, 1), FULL);
        // Shares count every row of the table, inside the window only.
        let shares = window_shares(&real, &[0], &[Window { lo: 0.1, hi: 0.14995, zoomed: true }], 5);
        assert!((shares.iter().sum::<f64>() - 0.5).abs() < 1e-12, "{shares:?}");
        let all = window_shares(&real, &[0, 1], &[FULL, FULL], 4);
        assert!((all.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(argmax([1.0, 3.0, 3.0, 2.0].into_iter()), Some(1));
    }
}
