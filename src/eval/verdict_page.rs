//! The blocks of the report page that answer "may I publish this?": the quality score and verdicts it
//! leads with, then the column shapes, pair trends, validity rules, detection and utility, and the
//! owner-only disclosure figures with what they can and cannot show.

use super::format::sig;
use super::page::{Block, Cell, Grid, Mark};
use super::quality::{FORMULA, GOOD, OFF};
use super::EvalOutput;

/// Verdicts that are off listed per table on the page (the JSON has all).
pub const LISTED_VERDICTS: usize = 8;

/// Pair trends listed on the page: the worst ones.
pub const LISTED_PAIRS: usize = 10;

fn score_cell(score: f64) -> Cell {
    let mark = if score < OFF {
        Mark::Worst
    } else if score >= GOOD {
        Mark::Best
    } else {
        Mark::Plain
    };
    Cell::marked(sig(score), mark)
}

fn head(first: &[&str], output: &EvalOutput) -> Vec<String> {
    first.iter().map(|text| text.to_string()).chain(output.comparisons.iter().map(|r| r.label.clone())).collect()
}

/// The quality score, its components and the verdicts of every table.
pub fn verdict_blocks(output: &EvalOutput) -> Vec<Block> {
    let reports = &output.comparisons;
    let mut rows = vec![{
        let mut row = vec![Cell::plain("quality score (0–100)")];
        row.extend(reports.iter().map(|report| Cell::marked(format!("{:.1}", report.quality.score), Mark::Plain)));
        row
    }];
    for component in &output.first.quality.components {
        let mut row = vec![Cell::plain(component.name.replace('_', " "))];
        row.extend(reports.iter().map(|report| {
            report
                .quality
                .components
                .iter()
                .find(|theirs| theirs.name == component.name)
                .map_or(Cell::plain("–"), |theirs| score_cell(theirs.score))
        }));
        rows.push(row);
    }
    let mut blocks = vec![
        Block::Table(Grid { head: head(&["score"], output), rows, wrapping: vec![] }),
        Block::Text(format!("Components are 0 to 1 (green ≥ {GOOD}, red < {OFF}). {FORMULA}.")),
    ];
    for report in reports {
        let prefix = if reports.len() > 1 { format!("{}: ", report.label) } else { String::new() };
        let good: Vec<&str> = report.verdicts.iter().filter(|v| v.kind == "good").map(|v| v.text.as_str()).collect();
        let off: Vec<String> =
            report.verdicts.iter().filter(|v| v.kind != "good").map(|v| format!("{}: {}", v.kind, v.text)).collect();
        if !good.is_empty() {
            blocks.push(Block::Text(format!("{prefix}good: {}.", good.join("; "))));
        }
        match off.len() {
            0 => blocks.push(Block::Text(format!("{prefix}nothing is off."))),
            count if count > LISTED_VERDICTS => blocks.push(Block::Warning(format!(
                "{prefix}{} … and {} more (every verdict is in eval.json).",
                off[..LISTED_VERDICTS].join(" · "),
                count - LISTED_VERDICTS
            ))),
            _ => blocks.push(Block::Warning(format!("{prefix}{}", off.join(" · ")))),
        }
    }
    blocks
}

/// Column shapes, domain adherence and support of the first table.
pub fn shapes_block(output: &EvalOutput) -> Block {
    let report = &output.first;
    let rows = report
        .column_shapes
        .iter()
        .map(|shape| {
            vec![
                Cell::plain(shape.name.clone()),
                Cell::plain(shape.value_type),
                score_cell(shape.score),
                Cell::plain(format!("{} / {}", sig(shape.null_share_real), sig(shape.null_share_synth))),
                Cell::marked(
                    sig(shape.in_domain_share_synth),
                    if shape.in_domain_share_synth < 1.0 { Mark::Worst } else { Mark::Plain },
                ),
                Cell::plain(format!("{} / {}", shape.distinct_real, shape.distinct_synth)),
                Cell::marked(
                    if shape.discrete { sig(shape.unseen_value_share) } else { "– (continuous)".into() },
                    if shape.discrete && shape.unseen_value_share > 0.01 { Mark::Worst } else { Mark::Plain },
                ),
            ]
        })
        .collect();
    Block::Table(Grid {
        head: [
            "column",
            "type",
            "shape (1 − KS or 1 − TV)",
            "null share real / synthetic",
            "synthetic in domain",
            "distinct real / synthetic",
            "synthetic rows with a value real never has",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        wrapping: vec![],
    })
}

/// The worst pair trends of the first table, with their association measures.
pub fn pairs_block(output: &EvalOutput) -> Option<Block> {
    let report = &output.first;
    if report.pair_trends.is_empty() {
        return None;
    }
    let mut pairs: Vec<_> = report.pair_trends.iter().collect();
    pairs.sort_by(|a, b| a.score.total_cmp(&b.score));
    let rows = pairs
        .iter()
        .take(LISTED_PAIRS)
        .map(|pair| {
            vec![
                Cell::plain(format!("{} × {}", pair.columns[0], pair.columns[1])),
                score_cell(pair.score),
                Cell::plain(pair.association.replace('_', " ")),
                Cell::plain(format!("{} / {}", sig(pair.association_real), sig(pair.association_synth))),
                Cell::plain(sig(pair.unseen_combination_share)),
            ]
        })
        .collect();
    Some(Block::Table(Grid {
        head: [
            "pair (worst first)",
            "trend (1 − TV)",
            "association",
            "real / synthetic",
            "synthetic rows in cells real never has",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        wrapping: vec![],
    }))
}

/// The validity rules of every table.
pub fn rules_block(output: &EvalOutput) -> Option<Block> {
    let first = &output.first;
    if first.rules.is_empty() {
        return None;
    }
    let rows = first
        .rules
        .iter()
        .enumerate()
        .map(|(k, rule)| {
            let mut row = vec![Cell::plain(rule.rule.clone()), Cell::plain(sig(rule.broken_share_real))];
            row.extend(output.comparisons.iter().map(|report| {
                let theirs = &report.rules[k];
                let mark = if theirs.broken_share_synth > theirs.broken_share_real { Mark::Worst } else { Mark::Plain };
                Cell::marked(sig(theirs.broken_share_synth), mark)
            }));
            row
        })
        .collect();
    Some(Block::Table(Grid { head: head(&["rule", "broken share, real"], output), rows, wrapping: vec![] }))
}

/// Detection and utility of every table.
pub fn learning_blocks(output: &EvalOutput) -> Vec<Block> {
    let reports = &output.comparisons;
    let mut rows = Vec::new();
    if output.first.detection.is_some() {
        for (name, pick) in
            [("detection AUC, logistic regression", 0), ("detection AUC, boosted trees", 1), ("detection score", 2)]
        {
            let mut row = vec![Cell::plain(name)];
            row.extend(reports.iter().map(|report| {
                report.detection.as_ref().map_or(Cell::plain("–"), |found| match pick {
                    0 => Cell::plain(sig(found.logistic_regression_auc)),
                    1 => Cell::plain(sig(found.boosted_trees_auc)),
                    _ => score_cell(found.score),
                })
            }));
            rows.push(row);
        }
    }
    if let Some(utility) = &output.first.utility {
        let text = |scores: &super::learn::ModelScores| match (scores.r2, scores.accuracy, scores.macro_f1) {
            (Some(r2), _, _) => format!("R² {}", sig(r2)),
            (_, Some(accuracy), Some(f1)) => format!("accuracy {}, F1 {}", sig(accuracy), sig(f1)),
            _ => "–".into(),
        };
        let mut row = vec![Cell::plain(format!("{}: train on synthetic, test on real", utility.target))];
        row.extend(reports.iter().map(|report| {
            report.utility.as_ref().map_or(Cell::plain("–"), |found| Cell::plain(text(&found.train_synth_test_real)))
        }));
        rows.push(row);
        let mut row = vec![Cell::plain(format!("{}: train on real, test on real", utility.target))];
        row.extend(reports.iter().map(|_| Cell::plain(text(&utility.train_real_test_real))));
        rows.push(row);
    }
    if rows.is_empty() {
        return Vec::new();
    }
    let mut blocks = vec![Block::Table(Grid { head: head(&["measure"], output), rows, wrapping: vec![] })];
    if let Some(found) = &output.first.detection {
        blocks.push(Block::Text(format!(
            "Detection: a classifier is trained to tell real rows from synthetic ones ({} rows drawn from each \
             table, {}-fold cross-validation; sampled). AUC 0.5: it cannot; 1: it always can.",
            found.rows_per_table, found.folds
        )));
    }
    if let Some(utility) = &output.first.utility {
        blocks.push(Block::Text(format!(
            "Utility: {} of {} ({} training and {} test rows, sampled); test rows: {}.",
            utility.model, utility.target, utility.train_rows, utility.test_rows, utility.test_rows_from
        )));
    }
    blocks
}

/// The disclosure figures, with what they can and cannot show.
pub fn disclosure_blocks(output: &EvalOutput) -> Vec<Block> {
    let Some(first) = &output.first.disclosure else { return Vec::new() };
    let reports = &output.comparisons;
    let figures: [(&str, fn(&super::disclosure::Disclosure) -> String); 6] = [
        ("exact copies of a training row (share)", |d| sig(d.exact_copy_share)),
        ("↳ holdout rows equal to a training row", |d| sig(d.holdout_exact_copy_share)),
        ("median distance to closest training row: synthetic / holdout", |d| {
            format!("{} / {}", sig(d.dcr_synth_median), sig(d.dcr_holdout_median))
        }),
        ("DCR ratio (below 1: closer than fresh real rows)", |d| d.dcr_ratio.map_or("–".into(), sig)),
        ("closer to training than to holdout (about 0.5 expected)", |d| sig(d.closer_to_train_share)),
        ("membership-inference AUC (distance attack; 0.5: none)", |d| sig(d.membership_inference_auc)),
    ];
    let rows = figures
        .iter()
        .map(|(name, value)| {
            let mut row = vec![Cell::plain(*name)];
            row.extend(
                reports
                    .iter()
                    .map(|report| report.disclosure.as_ref().map_or(Cell::plain("–"), |d| Cell::plain(value(d)))),
            );
            row
        })
        .collect();
    vec![
        Block::Warning(
            "OWNER ONLY: these figures compare the synthetic rows with individual real rows. Never publish them."
                .into(),
        ),
        Block::Table(Grid { head: head(&["figure"], output), rows, wrapping: vec![] }),
        Block::Text(format!(
            "Holdout {}: real rows synthesis did not read. Distances are Gower's (mean over columns of the \
             normalised difference of a number, 0 or 1 for a category); {} query rows against {} reference rows{}. \
             Under ε-DP the synthetic table depends little on any one row, so these figures should look like a \
             fresh sample's: exact copies at the holdout's level, closer-to-training near 0.5, an attack AUC near \
             0.5. A loud figure on a DP release means a bug or a domain read from the data. A quiet one proves \
             nothing: these are one table against one attack, and only the DP guarantee bounds every attack.",
            first.holdout_file,
            first.query_rows,
            first.reference_rows,
            if first.sampled { " (sampled; exact copies are counted on every row)" } else { "" }
        )),
    ]
}
