//! One quality score per synthetic table, 0–100, from named components (as SDMetrics' Quality score), and
//! the verdicts a page leads with: what is good, what is off, which rules break.

use serde::Serialize;

use super::disclosure::Disclosure;
use super::format::sig;
use super::learn::Detection;
use super::rules::RuleReport;
use super::shapes::{ColumnShape, PairTrend};

/// How the score is made, for the page and the JSON.
pub const FORMULA: &str = "score = 100 × mean of the components computed: column_shapes = mean over columns of \
     1 − KS (numbers, dates, timestamps; null as the lowest value) or 1 − TV of the category shares (categorical, \
     Boolean; null a category); pair_trends = mean over column pairs of 1 − TV of their contingency table \
     (numbers on 10 equal bins of the public bounds); validity = mean over columns of the share of synthetic \
     values inside the public domain, over discrete columns of 1 − the share of synthetic rows with a value the \
     real table never has, and over rules of 1 − max(0, broken share synthetic − broken share real); detection \
     = 2·(1 − max(AUC, 0.5)) of the better classifier";

/// A component at or above this is called good, below [`OFF`] off.
pub const GOOD: f64 = 0.9;
pub const OFF: f64 = 0.8;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Component {
    /// "column_shapes", "pair_trends", "validity" or "detection".
    pub name: &'static str,
    /// 0 to 1.
    pub score: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Quality {
    /// 0 to 100.
    pub score: f64,
    pub components: Vec<Component>,
    pub formula: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// "good", "off", "rule" or "disclosure".
    pub kind: &'static str,
    pub text: String,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), value| (sum + value, count + 1));
    (count > 0).then(|| sum / count as f64)
}

/// The validity component: domain adherence, support of discrete columns, rules.
pub fn validity(shapes: &[ColumnShape], rules: &[RuleReport]) -> Option<f64> {
    let adherence = shapes.iter().map(|shape| shape.in_domain_share_synth);
    let support = shapes.iter().filter(|shape| shape.discrete).map(|shape| 1.0 - shape.unseen_value_share);
    let kept = rules.iter().map(|rule| 1.0 - (rule.broken_share_synth - rule.broken_share_real).max(0.0));
    mean(adherence.chain(support).chain(kept))
}

pub fn quality(
    shapes: &[ColumnShape],
    pairs: &[PairTrend],
    rules: &[RuleReport],
    detection: Option<&Detection>,
) -> Quality {
    let mut components = Vec::new();
    let mut push = |name, score: Option<f64>| {
        if let Some(score) = score {
            components.push(Component { name, score });
        }
    };
    push("column_shapes", mean(shapes.iter().map(|shape| shape.score)));
    push("pair_trends", mean(pairs.iter().map(|pair| pair.score)));
    push("validity", validity(shapes, rules));
    push("detection", detection.map(|found| found.score));
    let score = 100.0 * mean(components.iter().map(|component| component.score)).unwrap_or(0.0);
    Quality { score, components, formula: FORMULA }
}

fn percent(share: f64) -> String {
    format!("{}%", sig(100.0 * share))
}

/// What a reader should see first: each component called good or off, then what is off in detail.
pub fn verdicts(
    quality: &Quality,
    shapes: &[ColumnShape],
    pairs: &[PairTrend],
    rules: &[RuleReport],
    detection: Option<&Detection>,
    disclosure: Option<&Disclosure>,
) -> Vec<Verdict> {
    let mut found = Vec::new();
    let mut say = |kind, text: String| found.push(Verdict { kind, text });
    for component in &quality.components {
        let name = component.name.replace('_', " ");
        if component.score >= GOOD {
            say("good", format!("{name}: {} (at least {GOOD})", sig(component.score)));
        } else if component.score < OFF {
            say("off", format!("{name}: {} (below {OFF})", sig(component.score)));
        }
    }
    for shape in shapes {
        if shape.score < OFF {
            say("off", format!("column {}: shape {} ({})", shape.name, sig(shape.score), shape.metric));
        }
        if shape.in_domain_share_synth < 1.0 {
            say(
                "off",
                format!(
                    "column {}: {} of synthetic values outside the public {}",
                    shape.name,
                    percent(1.0 - shape.in_domain_share_synth),
                    if shape.value_type == "number" { "bounds" } else { "list" }
                ),
            );
        }
        if shape.discrete && shape.unseen_value_share > 0.01 {
            say(
                "off",
                format!(
                    "column {}: {} distinct synthetic values against {} real; {} of synthetic rows take a value the \
                     real table never has",
                    shape.name,
                    shape.distinct_synth,
                    shape.distinct_real,
                    percent(shape.unseen_value_share)
                ),
            );
        }
        if (shape.null_share_real - shape.null_share_synth).abs() > 0.01 {
            say(
                "off",
                format!(
                    "column {}: null in {} of synthetic rows, {} of real",
                    shape.name,
                    percent(shape.null_share_synth),
                    percent(shape.null_share_real)
                ),
            );
        }
    }
    if let Some(worst) = pairs.iter().min_by(|a, b| a.score.total_cmp(&b.score)).filter(|pair| pair.score < OFF) {
        say("off", format!("pair {} × {}: trend {}", worst.columns[0], worst.columns[1], sig(worst.score)));
    }
    if let Some(worst) = pairs.iter().max_by(|a, b| a.association_error.total_cmp(&b.association_error)) {
        if worst.association_error > 0.1 {
            say(
                "off",
                format!(
                    "pair {} × {}: {} {} real, {} synthetic",
                    worst.columns[0],
                    worst.columns[1],
                    worst.association.replace('_', " "),
                    sig(worst.association_real),
                    sig(worst.association_synth)
                ),
            );
        }
    }
    for rule in rules {
        if rule.broken_share_synth > rule.broken_share_real {
            say(
                "rule",
                format!(
                    "'{}' broken by {} of synthetic rows (real: {})",
                    rule.rule,
                    percent(rule.broken_share_synth),
                    percent(rule.broken_share_real)
                ),
            );
        }
    }
    if let Some(detection) = detection {
        let auc = detection.logistic_regression_auc.max(detection.boosted_trees_auc);
        if auc > 0.75 {
            say("off", format!("a classifier tells real rows from synthetic ones (AUC {})", sig(auc)));
        }
    }
    if let Some(risk) = disclosure {
        if risk.exact_copy_share > risk.holdout_exact_copy_share + 0.005 {
            say(
                "disclosure",
                format!(
                    "{} of synthetic rows copy a training row (holdout rows: {})",
                    percent(risk.exact_copy_share),
                    percent(risk.holdout_exact_copy_share)
                ),
            );
        }
        if risk.closer_to_train_share > 0.55 {
            say(
                "disclosure",
                format!(
                    "{} of synthetic rows are closer to a training row than to any holdout row (about 50% expected)",
                    percent(risk.closer_to_train_share)
                ),
            );
        }
        if risk.membership_inference_auc > 0.55 {
            say(
                "disclosure",
                format!(
                    "a distance attack tells training rows from holdout rows (AUC {})",
                    sig(risk.membership_inference_auc)
                ),
            );
        }
    }
    found
}
