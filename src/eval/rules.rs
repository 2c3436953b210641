//! Validity rules: row-level facts the owner declares (`rules = ["distance / air_time * 60 <= 700"]`),
//! checked on the real and every synthetic table, with the share of rows that break each. A rule is an
//! expression over the compared columns (numbers, dates and timestamps in their stored units, Booleans as
//! true/false) with arithmetic, comparisons, `&&`, `||`, `!` and functions such as `abs`, parsed and
//! evaluated by the exmex crate. A rule that does not evaluate to true is broken (a division by zero, say,
//! gives infinity or NaN, which fail a comparison); a row where a column the rule reads is null is not
//! evaluated (as a SQL CHECK treats an unknown), and counted apart.

use exmex::{Express, FlatExVal, Val};
use rayon::prelude::*;
use serde::Serialize;

use super::table::{Table, ValueType};
use crate::error::{Error, Result};

/// One rule, parsed against the compared columns.
pub struct Rule {
    pub text: String,
    expression: FlatExVal<i64, f64>,
    /// The axis of each of the expression's variables, in its order.
    axes: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleReport {
    pub rule: String,
    /// Share of the rows (where the rule was evaluated) that break it.
    pub broken_share_real: f64,
    pub broken_share_synth: f64,
    /// Rows skipped for a null in a column the rule reads.
    pub not_evaluated_real: u64,
    pub not_evaluated_synth: u64,
}

/// The rules of a `rules` option: one flag value or config list, whose items a config file joins with
/// commas. A comma inside parentheses (a function's arguments) stays in its rule.
pub fn split_rules(text: &str) -> Vec<String> {
    let (mut rules, mut current, mut depth) = (Vec::new(), String::new(), 0i32);
    for character in text.chars() {
        match character {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                rules.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(character);
    }
    rules.push(current);
    rules.into_iter().map(|rule| rule.trim().to_string()).filter(|rule| !rule.is_empty()).collect()
}

/// Parses each rule and checks that it reads only compared numbers, dates, timestamps or Booleans.
pub fn parse_rules(texts: &[String], table: &Table) -> Result<Vec<Rule>> {
    texts
        .iter()
        .map(|text| {
            let invalid = |reason: String| Error::bad_input(format!("rule '{text}': {reason}"));
            let expression =
                exmex::parse_val::<i64, f64>(text).map_err(|error| invalid(format!("cannot be parsed: {error}")))?;
            let axes = expression
                .var_names()
                .iter()
                .map(|name| {
                    let axis = table.columns.iter().position(|column| &column.name == name).ok_or_else(|| {
                        let names: Vec<&str> = table.columns.iter().map(|column| column.name.as_str()).collect();
                        invalid(format!("'{name}' is not a compared column (they are: {})", names.join(", ")))
                    })?;
                    if matches!(table.columns[axis].value_type, ValueType::Categories { .. }) {
                        return Err(invalid(format!(
                            "'{name}' is categorical; rules read numbers, dates, timestamps and Booleans"
                        )));
                    }
                    Ok(axis)
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Rule { text: text.clone(), expression, axes })
        })
        .collect()
}

impl Rule {
    /// (rows that break the rule, rows not evaluated for a null) in `table`.
    fn count(&self, table: &Table) -> (u64, u64) {
        let dims = table.dims();
        table
            .points
            .par_chunks(dims * 4096)
            .map(|rows| {
                let (mut broken, mut skipped) = (0u64, 0u64);
                let mut values: Vec<Val<i64, f64>> = vec![Val::None; self.axes.len()];
                'rows: for row in rows.chunks_exact(dims) {
                    for (slot, &axis) in values.iter_mut().zip(&self.axes) {
                        let column = &table.columns[axis];
                        let unit = row[axis];
                        if column.is_null(unit) {
                            skipped += 1;
                            continue 'rows;
                        }
                        let value = table.bounds[axis].denormalise(unit);
                        *slot = match column.value_type {
                            ValueType::Boolean => Val::Bool(value >= 0.5),
                            // Back to the stored integer (normalising can leave a rounding error).
                            ValueType::Number { integer: true } => Val::Float(value.round()),
                            _ => Val::Float(value),
                        };
                    }
                    let holds = self.expression.eval(&values).ok().and_then(|value| value.to_bool().ok());
                    broken += u64::from(holds != Some(true));
                }
                (broken, skipped)
            })
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }
}

/// Every rule's broken shares in the real and the synthetic table.
pub fn check_rules(rules: &[Rule], real: &Table, synth: &Table) -> Vec<RuleReport> {
    let share = |broken: u64, skipped: u64, rows: usize| broken as f64 / (rows as u64 - skipped).max(1) as f64;
    rules
        .iter()
        .map(|rule| {
            let ((broken_real, skipped_real), (broken_synth, skipped_synth)) = (rule.count(real), rule.count(synth));
            RuleReport {
                rule: rule.text.clone(),
                broken_share_real: share(broken_real, skipped_real, real.rows()),
                broken_share_synth: share(broken_synth, skipped_synth, synth.rows()),
                not_evaluated_real: skipped_real,
                not_evaluated_synth: skipped_synth,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::bounds::ColumnBounds;

    fn table(points: Vec<f64>) -> Table {
        let bounds =
            vec![ColumnBounds::new("distance", 0.0, 100.0).unwrap(), ColumnBounds::new("t", 0.0, 10.0).unwrap()];
        Table::of_numbers("t.parquet", bounds, points)
    }

    #[test]
    fn rules_split_at_top_level_commas_only() {
        assert_eq!(split_rules("a <= 1, max(a, b) >= 2 ,"), ["a <= 1", "max(a, b) >= 2"]);
    }

    #[test]
    fn broken_shares_count_rows_by_hand() {
        // Speeds distance / t: 10, 50 and a division by zero (infinite): two rows of three break "<= 20".
        let real = table(vec![0.1, 0.1, 0.5, 0.1, 0.5, 0.0]);
        let rules = parse_rules(&["distance / t <= 20".to_string()], &real).unwrap();
        let found = check_rules(&rules, &real, &table(vec![0.1, 0.1]));
        assert!((found[0].broken_share_real - 2.0 / 3.0).abs() < 1e-12, "{found:?}");
        assert_eq!(found[0].broken_share_synth, 0.0);
    }

    #[test]
    fn a_bad_rule_names_itself_and_the_column() {
        let real = table(vec![0.1, 0.1]);
        let unknown = parse_rules(&["speed <= 3".to_string()], &real).err().unwrap().to_string();
        assert!(unknown.contains("speed <= 3") && unknown.contains("'speed' is not a compared column"), "{unknown}");
        assert!(parse_rules(&["distance <= (".to_string()], &real).is_err());
    }
}
