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
use super::table::load_source;
use super::{evaluate_all, load_mixed_table, place_nulls, EvalOptions, EvalOutput, PhaseTiming, Table};
use crate::error::{Error, Result};
use crate::io::paths::{check_output_paths, NamedPath};
use crate::io::source::Source;
use crate::io::staging::{commit_all, StagedFile};
use crate::progress::Progress;

/// A table to compare: a Parquet file or dataset, or one already in memory (the Python package's).
pub enum TableInput {
    File(PathBuf),
    Memory(Source),
}

impl TableInput {
    /// The path, or the in-memory table's name.
    pub fn path(&self) -> &Path {
        match self {
            TableInput::File(path) => path,
            TableInput::Memory(source) => source.path(),
        }
    }

    fn load(&self, hive_columns: bool, options: &EvalOptions) -> Result<Table> {
        match self {
            TableInput::File(path) => load_mixed_table(path, hive_columns, &options.domains(), options.nulls),
            TableInput::Memory(source) => load_source(source, &options.domains(), options.nulls),
        }
    }
}

/// One `dpsynth eval` run.
pub struct EvalRequest {
    pub real: TableInput,
    /// At least one synthetic table.
    pub synths: Vec<TableInput>,
    /// The k-th run report describes the k-th synthetic table; tables after the last report have none.
    pub run_reports: Vec<PathBuf>,
    /// Real rows synthesis did not read (`--holdout`): the disclosure figures and the utility test rows.
    pub holdout: Option<TableInput>,
    pub json: Option<PathBuf>,
    pub report_dir: Option<PathBuf>,
    pub options: EvalOptions,
}

impl EvalRequest {
    fn named_inputs(&self) -> Vec<NamedPath<'_>> {
        fn file<'a>(role: &'a str, input: &'a TableInput) -> Option<NamedPath<'a>> {
            match input {
                TableInput::File(path) => Some(NamedPath::new(role, path)),
                TableInput::Memory(_) => None,
            }
        }
        file("the input --real", &self.real)
            .into_iter()
            .chain(self.synths.iter().filter_map(|input| file("the input --synth", input)))
            .chain(self.holdout.iter().filter_map(|input| file("the input --holdout", input)))
            .chain(self.run_reports.iter().map(|path| NamedPath::new("the input --run-report", path)))
            .collect()
    }
}

/// What the command produced: the numbers, and the text to print when no JSON file was asked for.
pub struct EvalCommandOutput {
    pub output: EvalOutput,
    pub stdout: Option<String>,
}

/// Runs the request on the current rayon pool.
pub fn run(request: &EvalRequest, progress: &Progress) -> Result<EvalCommandOutput> {
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
    let runs: Vec<RunSummary> = request.run_reports.iter().map(|path| read_run_report(path)).collect::<Result<_>>()?;

    let started = Instant::now();
    // The holdout, if any, comes last; it is real data, read like the real table.
    let inputs: Vec<&TableInput> =
        std::iter::once(&request.real).chain(&request.synths).chain(&request.holdout).collect();
    let options = &request.options;
    let step = progress.step("load");
    let synth_count = request.synths.len();
    let mut tables: Vec<Table> = inputs
        .par_iter()
        .enumerate()
        .map(|(index, input)| {
            let is_real = index == 0 || index > synth_count;
            input.load(is_real && options.real_hive_columns, options)
        })
        .collect::<Result<_>>()?;
    place_nulls(&mut tables.iter_mut().collect::<Vec<_>>())?;
    step.finish();
    progress.check_interrupted()?;
    let load_seconds = started.elapsed().as_secs_f64();
    let holdout = if request.holdout.is_some() { tables.pop() } else { None };
    let synth_tables = tables.split_off(1);
    let real = tables.pop().ok_or_else(|| Error::internal("the real table was not loaded"))?;

    let synths: Vec<(&Table, Option<RunSummary>)> =
        synth_tables.iter().enumerate().map(|(k, table)| (table, runs.get(k).cloned())).collect();
    let step = progress.step("compare");
    let mut output = evaluate_all(&real, &synths, holdout.as_ref(), &request.options)?;
    step.finish();
    progress.check_interrupted()?;
    for report in std::iter::once(&mut output.first).chain(&mut output.comparisons) {
        report.timings_seconds.insert(0, PhaseTiming { phase: "load", seconds: load_seconds });
    }

    let json = serde_json::to_string_pretty(&output)
        .map_err(|error| Error::internal(format!("cannot serialise the report: {error}")))?;
    // (flag, path, contents) of every file this run writes.
    let mut files: Vec<(&str, PathBuf, Vec<u8>)> = Vec::new();
    if let Some(dir) = &request.report_dir {
        for (name, text) in report_pages(&output, &json, &real, &synth_tables) {
            files.push(("a --report-dir file", dir.join(name), text.into_bytes()));
        }
    }
    if let Some(path) = &request.json {
        files.push(("--json", path.clone(), json.into_bytes()));
    }
    let outputs: Vec<NamedPath> = files.iter().map(|(role, path, _)| NamedPath::new(role, path)).collect();
    check_output_paths(&request.named_inputs(), &outputs)?;
    if let Some(dir) = &request.report_dir {
        std::fs::create_dir_all(dir)
            .map_err(|error| Error::in_file(dir, format!("cannot create the report directory: {error}")))?;
    }
    let staged: Vec<StagedFile> =
        files.iter().map(|(_, path, bytes)| StagedFile::with_bytes(path, bytes)).collect::<Result<_>>()?;
    commit_all(staged)?;
    let stdout = request.json.is_none().then(|| output.summary());
    Ok(EvalCommandOutput { output, stdout })
}
