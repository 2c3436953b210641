//! `dpsynth eval` as a command: load the tables, compare, then write the JSON and the report page or
//! return the summary to print. The CLI only parses options into an [`EvalRequest`].
//!
//! Outputs are built in memory, checked against the inputs (an output path never replaces an input) and
//! only then written, each through a temporary file and a rename: bad input writes nothing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

use super::report_dir::report_pages;
use super::run_report::{read_run_report, RunSummary};
use super::{evaluate_all, load_table, EvalOptions, EvalOutput, PhaseTiming, Table};
use crate::error::{Error, Result};
use crate::io::sink::write_file_atomically;

/// One `dpsynth eval` run.
#[derive(Clone, Debug)]
pub struct EvalRequest {
    pub real: PathBuf,
    /// At least one synthetic table.
    pub synths: Vec<PathBuf>,
    /// The k-th run report describes the k-th synthetic table; tables after the last report have none.
    pub run_reports: Vec<PathBuf>,
    pub json: Option<PathBuf>,
    pub report_dir: Option<PathBuf>,
    pub options: EvalOptions,
}

/// What the command produced: the numbers, and the text to print when no JSON file was asked for.
pub struct EvalCommandOutput {
    pub output: EvalOutput,
    pub stdout: Option<String>,
}

/// Runs the request on the current rayon pool.
pub fn run(request: &EvalRequest) -> Result<EvalCommandOutput> {
    if request.synths.is_empty() {
        return Err(Error::bad_input("give at least one --synth table"));
    }
    if request.run_reports.len() > request.synths.len() {
        return Err(Error::bad_input(format!(
            "--run-report is given {} times for {} --synth tables: the k-th report describes the k-th table",
            request.run_reports.len(),
            request.synths.len()
        )));
    }
    request.options.subsample.validate()?;
    let runs: Vec<RunSummary> = request
        .run_reports
        .iter()
        .map(|path| read_run_report(path))
        .collect::<Result<_>>()?;

    let started = Instant::now();
    let paths: Vec<&PathBuf> = std::iter::once(&request.real)
        .chain(&request.synths)
        .collect();
    let mut tables: Vec<Table> = paths
        .par_iter()
        .map(|path| load_table(path, &request.options.bounds, request.options.nulls))
        .collect::<Result<_>>()?;
    let load_seconds = started.elapsed().as_secs_f64();
    let synth_tables = tables.split_off(1);
    let real = tables
        .pop()
        .ok_or_else(|| Error::internal("the real table was not loaded"))?;

    let synths: Vec<(&Table, Option<RunSummary>)> = synth_tables
        .iter()
        .enumerate()
        .map(|(k, table)| (table, runs.get(k).cloned()))
        .collect();
    let mut output = evaluate_all(&real, &synths, &request.options)?;
    for report in std::iter::once(&mut output.first).chain(&mut output.comparisons) {
        report.timings_seconds.insert(
            0,
            PhaseTiming {
                phase: "load",
                seconds: load_seconds,
            },
        );
    }

    let json = serde_json::to_string_pretty(&output)
        .map_err(|error| Error::internal(format!("cannot serialise the report: {error}")))?;
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    if let Some(dir) = &request.report_dir {
        for (name, text) in report_pages(&output, &json, &real, &synth_tables) {
            files.push((dir.join(name), text.into_bytes()));
        }
    }
    if let Some(path) = &request.json {
        files.push((path.clone(), json.into_bytes()));
    }
    let inputs: Vec<&PathBuf> = paths.into_iter().chain(&request.run_reports).collect();
    for (path, _) in &files {
        if let Some(input) = inputs.iter().find(|input| same_file(path, input)) {
            return Err(Error::in_file(
                path,
                format!(
                    "is an input of this run ({}); choose another output path",
                    input.display()
                ),
            ));
        }
    }
    if let Some(dir) = &request.report_dir {
        std::fs::create_dir_all(dir).map_err(|error| {
            Error::in_file(dir, format!("cannot create the report directory: {error}"))
        })?;
    }
    for (path, bytes) in &files {
        write_file_atomically(path, bytes)?;
    }
    let stdout = request.json.is_none().then(|| output.summary());
    Ok(EvalCommandOutput { output, stdout })
}

/// Whether writing `output` would replace the existing file `input` (through any path or link to it).
fn same_file(output: &Path, input: &Path) -> bool {
    let Ok(input) = input.canonicalize() else {
        return false;
    };
    if let Ok(existing) = output.canonicalize() {
        return existing == input;
    }
    // Not there yet: compare through its (canonical) directory.
    let directory = match output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    match (directory.canonicalize(), output.file_name()) {
        (Ok(directory), Some(name)) => directory.join(name) == input,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_compared_with_inputs_through_any_path() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("real.parquet");
        std::fs::write(&input, b"x").unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert!(same_file(&sub.join("..").join("real.parquet"), &input));
        assert!(same_file(&input, &input));
        assert!(!same_file(&dir.path().join("out.json"), &input));
        assert!(!same_file(
            &dir.path().join("missing").join("real.parquet"),
            &input
        ));
    }
}
