//! What made a synthetic table: the few parameters of a `dpsynth synth --report` file that a reader of an
//! evaluation needs (mechanism, ε, δ, neighbouring relation, depth or cells, seeded or not).
//!
//! The file is read as plain JSON by key, not through the synth report's Rust types, so that reports of
//! other versions and mechanisms load as long as they have the keys below; absent optional keys are null.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::io::source::Source;
use crate::synth::report::DOMAIN_KEY;

/// The run behind one synthetic table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    pub file: String,
    pub mechanism: String,
    pub epsilon: f64,
    pub delta: Option<f64>,
    pub epsilon_spent: Option<f64>,
    pub neighbours: Option<String>,
    /// PMM's tree depth (`parameters.depth`), or the inner PMM's for lowdim.
    pub depth: Option<u64>,
    /// PSMM's cells (`parameters.cells`), or the inner PSMM's for lowdim.
    pub cells: Option<u64>,
    /// lowdim's d'.
    pub target_dim: Option<u64>,
    /// False for a seeded run (its noise can be recomputed by anyone who knows the seed).
    pub fit_for_release: Option<bool>,
    pub synthetic_rows: Option<u64>,
    /// The report's bound on the expected W1 (`accuracy.expected_w1_bound`), in its own units.
    pub accuracy_bound: Option<f64>,
    pub tool_version: Option<String>,
    /// Why `--mechanism auto` (the default) chose the mechanism that ran; null for a mechanism named by
    /// the user.
    pub chosen_by: Option<String>,
}

impl RunSummary {
    /// A short label: "pmm, ε = 1, depth 18".
    pub fn label(&self) -> String {
        let mut label = match self.chosen_by {
            Some(_) => format!("auto (chose {}), ε = {}", self.mechanism, self.epsilon),
            None => format!("{}, ε = {}", self.mechanism, self.epsilon),
        };
        if let Some(depth) = self.depth {
            label += &format!(", depth {depth}");
        }
        if let Some(cells) = self.cells {
            label += &format!(", {cells} cells");
        }
        if let Some(target_dim) = self.target_dim {
            label += &format!(", d' = {target_dim}");
        }
        label
    }
}

fn number(value: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(value, |v, key| v.get(key))?.as_f64()
}

fn integer(value: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(value, |v, key| v.get(key))?.as_u64()
}

fn text(value: &Value, path: &[&str]) -> Option<String> {
    Some(path.iter().try_fold(value, |v, key| v.get(key))?.as_str()?.to_string())
}

/// Reads the run report at `path`; a file that is not JSON or lacks `mechanism` or `guarantee.epsilon`
/// is bad input naming the file.
pub fn read_run_report(path: &Path) -> Result<RunSummary> {
    let bytes =
        std::fs::read(path).map_err(|error| Error::in_file(path, format!("cannot read the run report: {error}")))?;
    let report: Value = serde_json::from_slice(&bytes)
        .map_err(|error| Error::in_file(path, format!("is not a JSON run report (dpsynth synth --report): {error}")))?;
    let missing = |key: &str| {
        Error::in_file(
            path,
            format!("is not a dpsynth run report: it has no '{key}' (expected the file of dpsynth synth --report)"),
        )
    };
    let mechanism = text(&report, &["mechanism"]).ok_or_else(|| missing("mechanism"))?;
    let epsilon = number(&report, &["guarantee", "epsilon"]).ok_or_else(|| missing("guarantee.epsilon"))?;
    let parameters = &report["parameters"];
    let inner = &parameters["inner"];
    Ok(RunSummary {
        file: path.display().to_string(),
        mechanism,
        epsilon,
        delta: number(&report, &["guarantee", "delta"]),
        epsilon_spent: number(&report, &["guarantee", "epsilon_spent"]),
        neighbours: text(&report, &["guarantee", "neighbours"]),
        depth: integer(parameters, &["depth"]).or_else(|| integer(inner, &["depth"])),
        cells: integer(parameters, &["cells"]).or_else(|| integer(inner, &["cells"])),
        target_dim: integer(parameters, &["target_dim"]),
        fit_for_release: report["guarantee"]["fit_for_release"].as_bool(),
        synthetic_rows: integer(&report, &["release", "synthetic_rows"]),
        accuracy_bound: number(&report, &["accuracy", "expected_w1_bound"]),
        tool_version: text(&report, &["tool", "version"]),
        chosen_by: text(parameters, &["auto"]).or_else(|| text(inner, &["auto"])),
    })
}

/// Where eval found its public bounds when it was given none.
pub struct PublishedBounds {
    pub bounds: Vec<ColumnBounds>,
    /// The file they came from, and the columns it has that eval cannot compare (categorical, Boolean).
    pub from: String,
    pub not_compared: Vec<String>,
}

/// The public bounds of a synth run, for an eval given none: the run report's columns (`--run-report`),
/// else the domain a synthetic table's footer gives ([`DOMAIN_KEY`]). Categorical and Boolean columns are
/// listed apart: eval compares numbers.
pub fn published_bounds(run_reports: &[PathBuf], synths: &[PathBuf]) -> Result<Option<PublishedBounds>> {
    if let Some(path) = run_reports.first() {
        let report: Value = serde_json::from_slice(
            &std::fs::read(path)
                .map_err(|error| Error::in_file(path, format!("cannot read the run report: {error}")))?,
        )
        .map_err(|error| Error::in_file(path, format!("is not a JSON run report (dpsynth synth --report): {error}")))?;
        let columns = report.pointer("/input/columns").and_then(Value::as_array).cloned().unwrap_or_default();
        let (mut bounds, mut not_compared) = (Vec::new(), Vec::new());
        for column in &columns {
            let name = column.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let number =
                column.get("encoding").and_then(Value::as_str).is_none_or(|coding| coding.starts_with("number"));
            match (number, number_of(column, "lo"), number_of(column, "hi")) {
                (true, Some(lo), Some(hi)) => bounds.push(ColumnBounds::new(name, lo, hi)?),
                _ => not_compared.push(name),
            }
        }
        return Ok(Some(PublishedBounds { bounds, from: path.display().to_string(), not_compared }));
    }
    let Some(path) = synths.first() else { return Ok(None) };
    let source = Source::open(path)?;
    let footer = source.files()[0].parquet_metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
    let Some(domain) = footer.iter().find(|pair| pair.key == DOMAIN_KEY).and_then(|pair| pair.value.as_deref()) else {
        return Ok(None);
    };
    let domain: Value = serde_json::from_str(domain)
        .map_err(|error| Error::in_file(path, format!("its footer's {DOMAIN_KEY} is not JSON: {error}")))?;
    let mut bounds = Vec::new();
    for field in source.schema().fields() {
        let pair = domain["bounds"].get(field.name()).and_then(Value::as_array);
        if let Some([Some(lo), Some(hi)]) = pair.map(|pair| [0, 1].map(|end| pair.get(end).and_then(Value::as_f64))) {
            bounds.push(ColumnBounds::new(field.name().clone(), lo, hi)?);
        }
    }
    let not_compared = source
        .schema()
        .fields()
        .iter()
        .map(|field| field.name().clone())
        .filter(|name| !bounds.iter().any(|axis| &axis.column == name))
        .collect();
    Ok(Some(PublishedBounds { bounds, from: path.display().to_string(), not_compared }))
}

fn number_of(column: &Value, key: &str) -> Option<f64> {
    column.get(key)?.as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_keys_of_each_mechanism_and_refuses_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let pmm = write(
            "pmm.json",
            r#"{"mechanism": "pmm", "guarantee": {"epsilon": 1.0, "delta": 0.0, "neighbours": "add-remove",
                "fit_for_release": false}, "parameters": {"depth": 18}, "release": {"synthetic_rows": 99}}"#,
        );
        let found = read_run_report(&pmm).unwrap();
        assert_eq!(found.depth, Some(18));
        assert_eq!(found.fit_for_release, Some(false));
        assert_eq!(found.synthetic_rows, Some(99));
        assert_eq!(found.label(), "pmm, ε = 1, depth 18");
        let lowdim = write(
            "lowdim.json",
            r#"{"mechanism": "lowdim", "guarantee": {"epsilon": 0.5},
                "parameters": {"target_dim": 2, "inner": {"cells": 4096}}}"#,
        );
        assert_eq!(read_run_report(&lowdim).unwrap().label(), "lowdim, ε = 0.5, 4096 cells, d' = 2");
        for (name, text, fragment) in [
            ("bad.json", "not json", "is not a JSON run report"),
            ("eval.json", r#"{"w1": {"value": 0.1}}"#, "no 'mechanism'"),
            ("noeps.json", r#"{"mechanism": "pmm"}"#, "no 'guarantee.epsilon'"),
        ] {
            let message = read_run_report(&write(name, text)).unwrap_err().to_string();
            assert!(message.contains(name) && message.contains(fragment), "{message}");
        }
    }
}
