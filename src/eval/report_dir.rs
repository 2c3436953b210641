//! `--report-dir`: a page for people. `index.html` (self-contained: plots inline), `index.md` (plots as
//! files beside it), one histogram SVG per column, one 2-D density SVG (real beside synthetic) per column
//! pair for d ≤ [`MAX_DENSITY_COLUMNS`], and `eval.json` with every number.
//!
//! Every file is built in memory first and then written through a temporary file and a rename, so a failed
//! run leaves no half-written file.

use std::fmt::Write;
use std::path::Path;

use super::summary::{marginal_histogram, subsets};
use super::svg::{density_pair, escape, histogram};
use super::{EvalReport, Table};
use crate::error::{Error, Result};
use crate::io::sink::write_file_atomically;

/// Bins of each column histogram.
pub const HISTOGRAM_BINS: usize = 50;

/// Cells per axis of the 2-D density pictures.
pub const DENSITY_SIDE: usize = 40;

/// Density pictures are drawn for every column pair up to this many columns (15 pairs); above it, for
/// the pairs of the first this-many columns.
pub const MAX_DENSITY_COLUMNS: usize = 6;

/// One file of the report directory.
struct Page {
    name: String,
    text: String,
}

/// A plot: its file name, caption and SVG text.
struct Plot {
    file: String,
    caption: String,
    svg: String,
}

/// Characters safe in a file name on every platform; others become '_'.
fn slug(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Shares of rows per cell of one table's marginal on `columns`.
fn shares(table: &Table, columns: &[usize], side: usize) -> Vec<f64> {
    let counts = marginal_histogram(&table.points, table.dims(), columns, side);
    let total = table.rows().max(1) as f64;
    counts.iter().map(|&count| count as f64 / total).collect()
}

fn plots(real: &Table, synth: &Table) -> Vec<Plot> {
    let bounds = &real.bounds;
    let mut plots: Vec<Plot> = bounds
        .iter()
        .enumerate()
        .map(|(k, column)| Plot {
            file: format!("hist-{k}-{}.svg", slug(&column.column)),
            caption: format!(
                "{}: histogram, real (bars) and synthetic (line)",
                column.column
            ),
            svg: histogram(
                column,
                &shares(real, &[k], HISTOGRAM_BINS),
                &shares(synth, &[k], HISTOGRAM_BINS),
            ),
        })
        .collect();
    for pair in subsets(bounds.len().min(MAX_DENSITY_COLUMNS), 2) {
        let (i, j) = (pair[0], pair[1]);
        plots.push(Plot {
            file: format!(
                "density-{i}-{j}-{}-{}.svg",
                slug(&bounds[i].column),
                slug(&bounds[j].column)
            ),
            caption: format!(
                "{} (horizontal) and {} (vertical): 2-D density, real beside synthetic",
                bounds[i].column, bounds[j].column
            ),
            svg: density_pair(
                &bounds[i],
                &bounds[j],
                DENSITY_SIDE,
                &shares(real, &pair, DENSITY_SIDE),
                &shares(synth, &pair, DENSITY_SIDE),
            ),
        });
    }
    plots
}

/// The numbers of the report as Markdown (shared by index.md and, converted, index.html).
fn markdown_numbers(report: &EvalReport) -> String {
    let mut md = String::new();
    let w1 = &report.w1;
    let _ = writeln!(
        md,
        "Real: `{}` ({} rows). Synthetic: `{}` ({} rows). Distances in {} (each column scaled by its public bounds).\n",
        report.real.file, report.real.rows, report.synth.file, report.synth.rows, report.units
    );
    let _ = writeln!(
        md,
        "**W1 = {:.6}**, guaranteed within [{:.6}, {:.6}] (method `{}`): {}.\n",
        w1.value,
        w1.lower,
        w1.upper,
        w1.method.name(),
        w1.detail
    );
    let _ = writeln!(
        md,
        "- Sandwich (one pass, always valid): {:.6} ≤ W1 ≤ {:.6} (largest 1-D W1; dyadic-tree bound at depth {}).",
        report.sandwich.lower, report.sandwich.upper, report.sandwich.depth
    );
    if let Some(grid) = &report.grid {
        let _ = writeln!(
            md,
            "- Grid estimate: side {}, W1 of the quantised tables {:.6}, within {:.3e} of the true W1 (worst case 1/side = {:.3e}).",
            grid.side, grid.w1, grid.error_bound, grid.worst_case_error
        );
    }
    let _ = writeln!(
        md,
        "- Mean error (normalised): max {:.3e}, l2 {:.3e}. Covariance error (normalised): max {:.3e}, Frobenius {:.3e}.\n",
        report.mean_error.max_abs,
        report.mean_error.l2,
        report.covariance_error.max_abs,
        report.covariance_error.frobenius
    );
    md += "| column | bounds | W1 (normalised) | W1 (column units) | mean real | mean synthetic | std real | std synthetic | clamped real / synthetic |\n";
    md += "|---|---|---|---|---|---|---|---|---|\n";
    for (k, column) in report.columns.iter().enumerate() {
        let _ = writeln!(
            md,
            "| {} | [{}, {}] | {:.6} | {:.6} | {:.6} | {:.6} | {:.6} | {:.6} | {} / {} |",
            column.name.replace('|', "\\|"),
            column.lo,
            column.hi,
            column.w1,
            column.w1_column_units,
            column.mean_real,
            column.mean_synth,
            column.std_real,
            column.std_synth,
            report.real.clamped_values[k],
            report.synth.clamped_values[k]
        );
    }
    md += "\n| k-way marginals | grid side | max TV | mean TV | subsets | worst |\n|---|---|---|---|---|---|\n";
    for marginal in &report.marginals {
        let _ = writeln!(
            md,
            "| {} | {} | {:.4} | {:.4} | {} | {} |",
            marginal.k,
            marginal.side,
            marginal.max_tv,
            marginal.mean_tv,
            marginal.count,
            marginal.worst_columns.join(", ").replace('|', "\\|")
        );
    }
    md
}

const TITLE: &str = "dpsynth eval: real vs synthetic";
const NOT_PRIVATE: &str =
    "NOT PRIVATE: computed from the real data, for the data owner only. Do not publish.";

fn index_md(report: &EvalReport, plots: &[Plot]) -> String {
    let mut md = format!(
        "# {TITLE}\n\n> {NOT_PRIVATE}\n\n{}\n## Plots\n\n",
        markdown_numbers(report)
    );
    for plot in plots {
        let _ = writeln!(
            md,
            "![{}]({})\n",
            plot.caption.replace(['[', ']'], ""),
            plot.file
        );
    }
    md += "All numbers: [eval.json](eval.json).\n";
    md
}

fn index_html(report: &EvalReport, plots: &[Plot]) -> String {
    let w1 = &report.w1;
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{TITLE}</title>\n<style>\
         body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         th{{background:#f3f3f3}}td:first-child{{text-align:left}}.warn{{background:#fff3cd;padding:.5em 1em}}\
         figure{{display:inline-block;margin:.5em}}figcaption{{font-size:90%;color:#555}}</style></head><body>\n\
         <h1>{TITLE}</h1>\n<p class=\"warn\">{NOT_PRIVATE}</p>\n"
    );
    let _ = writeln!(
        html,
        "<p>Real: <code>{}</code> ({} rows). Synthetic: <code>{}</code> ({} rows). Distances in {} (each column \
         scaled by its public bounds).</p>\n<p><b>W1 = {:.6}</b>, guaranteed within [{:.6}, {:.6}] (method \
         <code>{}</code>): {}.</p>\n<ul><li>Sandwich (one pass, always valid): {:.6} ≤ W1 ≤ {:.6} (largest 1-D W1; \
         dyadic-tree bound at depth {}).</li>",
        escape(&report.real.file),
        report.real.rows,
        escape(&report.synth.file),
        report.synth.rows,
        escape(report.units),
        w1.value,
        w1.lower,
        w1.upper,
        w1.method.name(),
        escape(&w1.detail),
        report.sandwich.lower,
        report.sandwich.upper,
        report.sandwich.depth
    );
    if let Some(grid) = &report.grid {
        let _ = writeln!(
            html,
            "<li>Grid estimate: side {}, W1 of the quantised tables {:.6}, within {:.3e} of the true W1 (worst \
             case 1/side = {:.3e}).</li>",
            grid.side, grid.w1, grid.error_bound, grid.worst_case_error
        );
    }
    let _ = writeln!(
        html,
        "<li>Mean error (normalised): max {:.3e}, l2 {:.3e}. Covariance error (normalised): max {:.3e}, \
         Frobenius {:.3e}.</li></ul>",
        report.mean_error.max_abs,
        report.mean_error.l2,
        report.covariance_error.max_abs,
        report.covariance_error.frobenius
    );
    html += "<table><tr><th>column</th><th>bounds</th><th>W1 (normalised)</th><th>W1 (column units)</th>\
             <th>mean real</th><th>mean synthetic</th><th>std real</th><th>std synthetic</th>\
             <th>clamped real / synthetic</th></tr>\n";
    for (k, column) in report.columns.iter().enumerate() {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>[{}, {}]</td><td>{:.6}</td><td>{:.6}</td><td>{:.6}</td><td>{:.6}</td>\
             <td>{:.6}</td><td>{:.6}</td><td>{} / {}</td></tr>",
            escape(&column.name),
            column.lo,
            column.hi,
            column.w1,
            column.w1_column_units,
            column.mean_real,
            column.mean_synth,
            column.std_real,
            column.std_synth,
            report.real.clamped_values[k],
            report.synth.clamped_values[k]
        );
    }
    html += "</table>\n<table><tr><th>k-way marginals</th><th>grid side</th><th>max TV</th><th>mean TV</th>\
             <th>subsets</th><th>worst</th></tr>\n";
    for marginal in &report.marginals {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{:.4}</td><td>{:.4}</td><td>{}</td><td>{}</td></tr>",
            marginal.k,
            marginal.side,
            marginal.max_tv,
            marginal.mean_tv,
            marginal.count,
            escape(&marginal.worst_columns.join(", "))
        );
    }
    html += "</table>\n<h2>Plots</h2>\n";
    for plot in plots {
        let _ = writeln!(
            html,
            "<figure>{}<figcaption>{} (<a href=\"{}\">SVG</a>)</figcaption></figure>",
            plot.svg,
            escape(&plot.caption),
            escape(&plot.file)
        );
    }
    html += "<p>All numbers: <a href=\"eval.json\">eval.json</a>.</p>\n</body></html>\n";
    html
}

/// Writes the report directory (created if needed; files of the same names are replaced).
pub fn write_report_dir(
    dir: &Path,
    report: &EvalReport,
    json: &str,
    real: &Table,
    synth: &Table,
) -> Result<()> {
    let plots = plots(real, synth);
    let mut pages: Vec<Page> = plots
        .iter()
        .map(|plot| Page {
            name: plot.file.clone(),
            text: plot.svg.clone(),
        })
        .collect();
    pages.push(Page {
        name: "eval.json".into(),
        text: json.to_string(),
    });
    pages.push(Page {
        name: "index.md".into(),
        text: index_md(report, &plots),
    });
    pages.push(Page {
        name: "index.html".into(),
        text: index_html(report, &plots),
    });
    std::fs::create_dir_all(dir).map_err(|error| {
        Error::in_file(dir, format!("cannot create the report directory: {error}"))
    })?;
    for page in pages {
        write_file_atomically(&dir.join(&page.name), page.text.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_keep_only_safe_characters() {
        assert_eq!(slug("dep_delay-2"), "dep_delay-2");
        assert_eq!(slug("a/b c.é"), "a_b_c__");
    }
}
