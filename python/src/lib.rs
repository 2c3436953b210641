//! `dpsynth._native`: the Rust side of the Python package. It converts between Python and the dpsynth
//! crate and does nothing else: keywords arrive as the command line's words and are parsed by the CLI's
//! own parser ([`dpsynth::cli::parse_synth`]), so each option keeps its name, checks and default; data
//! frames arrive through the Arrow C stream interface with their columns shared, not copied; a run goes
//! on a thread of its own while the calling thread waits without the GIL, forwarding progress and
//! watching for Ctrl-C.

use std::ffi::OsString;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use arrow::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow::record_batch::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use dpsynth::error::Error;
use dpsynth::eval::command::TableInput;
use dpsynth::io::source::Source;
use dpsynth::options::{SynthArgs, SynthOptions};
use dpsynth::progress::{Progress, ProgressWatcher};
use dpsynth::synth::saved::SavedRelease;
use dpsynth::synth::{self, Fitted};

create_exception!(
    _native,
    PrivacyError,
    PyValueError,
    "A request that would break the privacy guarantee (a budget, relation or policy that cannot hold)."
);

/// How often the waiting thread wakes to forward progress and to check for Ctrl-C.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The capsule name the Arrow PyCapsule interface gives a C stream.
const STREAM_CAPSULE: &std::ffi::CStr = c"arrow_array_stream";

fn to_py(error: Error) -> PyErr {
    match error {
        Error::BadInput(message) => PyValueError::new_err(message),
        Error::Privacy(message) => PrivacyError::new_err(message),
        Error::Interrupted => PyKeyboardInterrupt::new_err("interrupted; nothing was written"),
        Error::Internal(message) => PyRuntimeError::new_err(format!("internal error: {message}")),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|error| PyRuntimeError::new_err(format!("serialising a report: {error}")))
}

/// `data` as an input: a path (str or os.PathLike) to a Parquet file, directory or glob, or an object with
/// `__arrow_c_stream__` (a pyarrow Table or RecordBatchReader, a polars or pandas data frame), called
/// `name` in messages.
fn open_input(data: &Bound<'_, PyAny>, name: &str, hive_columns: bool) -> PyResult<Source> {
    if let Ok(path) = data.extract::<PathBuf>() {
        return Source::open_with(&path, hive_columns).map_err(to_py);
    }
    if hive_columns {
        return Err(PyValueError::new_err(format!(
            "{name}: hive_columns reads the key=value folders of a directory input; this input is a table in memory"
        )));
    }
    let (schema, batches) = import_stream(data, name)?;
    Source::from_batches(name, schema, batches).map_err(to_py)
}

/// Takes the batches of `data`'s Arrow C stream; their buffers stay the producer's (no copy).
fn import_stream(data: &Bound<'_, PyAny>, name: &str) -> PyResult<(SchemaRef, Vec<RecordBatch>)> {
    let capsule = data.call_method1("__arrow_c_stream__", (data.py().None(),))?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let pointer = capsule.pointer_checked(Some(STREAM_CAPSULE))?;
    let unreadable = |error: arrow::error::ArrowError| {
        PyValueError::new_err(format!(
            "{name}: not a readable table: its Arrow stream is not one of record batches ({error}); pass a pyarrow \
             Table or RecordBatchReader, a pandas or polars DataFrame, or a path"
        ))
    };
    // SAFETY: the capsule holds an FFI_ArrowArrayStream (its name says so); from_raw moves the stream out
    // and leaves a released one behind, which the capsule's destructor then ignores.
    let reader = unsafe { RecordBatchStreamReader::from_raw(pointer.as_ptr().cast::<FFI_ArrowArrayStream>()) }
        .map_err(unreadable)?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(unreadable)?;
    Ok((schema, batches))
}

/// `synth`'s arguments from the command line's words (input and outputs aside).
fn synth_args(words: Vec<String>) -> PyResult<SynthArgs> {
    // The input is the data argument, not a word: a placeholder fills the CLI's positional INPUT.
    let words = std::iter::once(OsString::from("data")).chain(words.into_iter().map(OsString::from)).collect();
    let args = dpsynth::cli::parse_synth(words).map_err(to_py)?;
    for (given, flag) in [
        (args.output.is_some(), "output"),
        (args.report.is_some(), "report"),
        (args.diagnostics.is_some(), "diagnostics"),
    ] {
        if given {
            return Err(PyValueError::new_err(format!(
                "'{flag}' is not a keyword here: the table and the reports are returned (write them with pyarrow or json)"
            )));
        }
    }
    if args.save_release.is_some() {
        return Err(PyValueError::new_err(
            "'save_release' is not a keyword here: fit a Synthesizer and call its save(path)",
        ));
    }
    Ok(args)
}

/// The typed options of `args` for `source`: `columns` defaults to every column of it, as on the command line.
fn synth_options(mut args: SynthArgs, source: &Source) -> PyResult<SynthOptions> {
    let names: Vec<String> = source.schema().fields().iter().map(|field| field.name().clone()).collect();
    args.default_columns(&names).map_err(to_py)?;
    args.resolve_options().map_err(to_py)
}

/// A run's progress as Python sees it: events queued by the worker threads and forwarded by the waiting
/// thread, and the flag that Ctrl-C sets to stop the run.
#[derive(Default)]
struct Watch {
    stop: AtomicBool,
    events: Mutex<Vec<(&'static str, String, u64, String)>>,
}

impl Watch {
    fn push(&self, event: &'static str, phase: &str, amount: u64, unit: &str) {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).push((
            event,
            phase.to_string(),
            amount,
            unit.to_string(),
        ));
    }

    /// Hands the queued events to `on_progress(event, phase, amount, unit)`.
    fn forward(&self, on_progress: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let events = std::mem::take(&mut *self.events.lock().unwrap_or_else(PoisonError::into_inner));
        if let Some(callback) = on_progress {
            for event in events {
                callback.call1(event)?;
            }
        }
        Ok(())
    }
}

impl ProgressWatcher for Watch {
    fn started(&self, phase: &str, total: u64, unit: &str) {
        self.push("start", phase, total, unit);
    }

    fn advanced(&self, phase: &str, units: u64) {
        self.push("advance", phase, units, "");
    }

    fn finished(&self, phase: &str) {
        self.push("finish", phase, 0, "");
    }

    fn interrupted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs `work` on a thread of its own while this one waits without the GIL (other Python threads run),
/// waking every [`POLL_INTERVAL`] to hand progress to `on_progress` and to check for Ctrl-C: that stops
/// the run at its next batch and raises KeyboardInterrupt here. A panic becomes a RuntimeError.
fn run_released<T: Send>(
    py: Python<'_>,
    on_progress: Option<&Bound<'_, PyAny>>,
    work: impl FnOnce(&Progress) -> dpsynth::Result<T> + Send,
) -> PyResult<T> {
    let watch = Arc::new(Watch::default());
    let progress = Progress::watched(watch.clone());
    let done = (Mutex::new(false), Condvar::new());
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| work(&progress)));
            *done.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
            done.1.notify_all();
            outcome
        });
        let mut failure: Option<PyErr> = None;
        loop {
            let finished = py.detach(|| {
                let finished = done.0.lock().unwrap_or_else(PoisonError::into_inner);
                let (finished, _) = done
                    .1
                    .wait_timeout_while(finished, POLL_INTERVAL, |finished| !*finished)
                    .unwrap_or_else(PoisonError::into_inner);
                *finished
            });
            if failure.is_none() {
                // An exception from the progress callback or a signal (Ctrl-C) stops the run. Signals are
                // checked after the callback, so one it raises is not missed when the run ends meanwhile.
                if let Err(error) = watch.forward(on_progress).and_then(|()| py.check_signals()) {
                    watch.stop.store(true, Ordering::Relaxed);
                    failure = Some(error);
                }
            }
            if finished {
                break;
            }
        }
        let outcome = worker.join().unwrap_or_else(Err);
        if let Some(error) = failure {
            return Err(error);
        }
        match outcome {
            Ok(result) => result.map_err(to_py),
            Err(_) => {
                Err(PyRuntimeError::new_err("internal error (a bug in dpsynth): the run panicked; nothing was kept"))
            }
        }
    })
}

/// A table for Python: `pyarrow.table(stream)` (or any reader of the Arrow PyCapsule interface) takes
/// its batches once, without copying them.
#[pyclass(frozen, module = "dpsynth._native")]
struct ArrowStream {
    contents: Mutex<Option<(SchemaRef, Vec<RecordBatch>)>>,
}

/// An exported stream in a capsule; its private data is a `Box<dyn RecordBatchReader + Send>`.
#[repr(transparent)]
struct ExportedStream(FFI_ArrowArrayStream);

// SAFETY: the stream owns a `Send` reader and nothing tied to a thread.
unsafe impl Send for ExportedStream {}

impl ArrowStream {
    fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        ArrowStream { contents: Mutex::new(Some((schema, batches))) }
    }
}

#[pymethods]
impl ArrowStream {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The schema is the input's own types: a request for others is not honoured (the interface allows it).
        let _ = requested_schema;
        let (schema, batches) = self
            .contents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| PyValueError::new_err("this table was already taken"))?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
        let stream = ExportedStream(FFI_ArrowArrayStream::new(Box::new(reader)));
        PyCapsule::new_with_value(py, stream, STREAM_CAPSULE)
    }
}

/// A release fitted here, or read from a saved file.
enum Held {
    Fitted(Fitted),
    Saved(SavedRelease),
}

/// A fitted release: its measure and public facts, never the data. Each `sample` is a new draw from it
/// (post-processing: no budget spent).
#[pyclass(frozen, module = "dpsynth._native")]
struct Release {
    held: Held,
    /// The number of the next draw; draw 0 is the table the CLI would write.
    next_draw: AtomicU64,
}

#[pymethods]
impl Release {
    /// The publishable report of the release, as JSON.
    fn report(&self) -> PyResult<String> {
        match &self.held {
            Held::Fitted(fitted) => to_json(fitted.report()),
            Held::Saved(saved) => to_json(saved.report()),
        }
    }

    /// The owner-only diagnostics of the data pass (NOT private), as JSON; null for a saved release, which
    /// holds none.
    fn diagnostics(&self) -> PyResult<String> {
        match &self.held {
            Held::Fitted(fitted) => to_json(fitted.diagnostics()),
            Held::Saved(_) => Ok("null".to_string()),
        }
    }

    /// Saves the release at `path` (atomically; docs/release-format.md), for `load` or `dpsynth sample`.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        run_released(py, None, |_| match &self.held {
            Held::Fitted(fitted) => fitted.save(&path),
            Held::Saved(saved) => saved.save(&path),
        })
    }

    /// The next draw of `rows` rows (default: the released count): the table and its report as JSON.
    #[pyo3(signature = (rows=None, on_progress=None))]
    fn sample(
        &self,
        py: Python<'_>,
        rows: Option<u64>,
        on_progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<(ArrowStream, String)> {
        let draw = self.next_draw.fetch_add(1, Ordering::Relaxed);
        let batches = run_released(py, on_progress.as_ref(), |progress| match &self.held {
            Held::Fitted(fitted) => fitted.sample(rows, draw, progress),
            Held::Saved(saved) => saved.sample(rows, draw, progress),
        })?;
        let drawn = batches.iter().map(|batch| batch.num_rows() as u64).sum();
        let (schema, report) = match &self.held {
            Held::Fitted(fitted) => (fitted.schema(), to_json(&fitted.draw_report(drawn, draw))?),
            Held::Saved(saved) => (saved.schema(), to_json(&saved.draw_report(drawn, draw).map_err(to_py)?)?),
        };
        Ok((ArrowStream::new(schema, batches), report))
    }
}

/// The release saved at `path`: draw 0 is `dpsynth sample PATH --seed SEED`'s table (with `seed` the
/// synth run's, that run's own table); without a seed, fresh placement coins.
#[pyfunction]
#[pyo3(signature = (path, seed=None))]
fn load(py: Python<'_>, path: PathBuf, seed: Option<u64>) -> PyResult<Release> {
    let saved = run_released(py, None, |_| SavedRelease::load(&path, seed, None))?;
    Ok(Release { held: Held::Saved(saved), next_draw: AtomicU64::new(0) })
}

/// Spends the budget once on `data` (called `name` in messages) with the options in `words` (the `synth`
/// command line's), and returns the release to sample from.
#[pyfunction]
#[pyo3(signature = (data, name, words, on_progress=None))]
fn fit(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    name: &str,
    words: Vec<String>,
    on_progress: Option<Bound<'_, PyAny>>,
) -> PyResult<Release> {
    let args = synth_args(words)?;
    let source = open_input(data, name, args.hive_columns)?;
    let options = synth_options(args, &source)?;
    let fitted = run_released(py, on_progress.as_ref(), |progress| synth::fit(&source, &options, progress))?;
    Ok(Release { held: Held::Fitted(fitted), next_draw: AtomicU64::new(0) })
}

/// One `synth` run on `data`: the table (the CLI's output for the same words), the report and the
/// diagnostics as JSON.
#[pyfunction]
#[pyo3(signature = (data, name, words, on_progress=None))]
fn synthesize(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    name: &str,
    words: Vec<String>,
    on_progress: Option<Bound<'_, PyAny>>,
) -> PyResult<(ArrowStream, String, String)> {
    let args = synth_args(words)?;
    let source = open_input(data, name, args.hive_columns)?;
    let options = synth_options(args, &source)?;
    let on_progress = on_progress.as_ref();
    let fitted = run_released(py, on_progress, |progress| synth::fit(&source, &options, progress))?;
    let batches = run_released(py, on_progress, |progress| fitted.sample(options.rows, 0, progress))?;
    let mut report = fitted.report().clone();
    report.release.synthetic_rows = batches.iter().map(|batch| batch.num_rows() as u64).sum();
    Ok((ArrowStream::new(fitted.schema(), batches), to_json(&report)?, to_json(fitted.diagnostics())?))
}

/// `eval` of `synths` (called `synth_names`) against `real` (called `real_name`) with the options in
/// `words` (the `eval` command line's, tables aside): the eval JSON. Paths are read as the CLI reads them.
#[pyfunction]
#[pyo3(signature = (real, real_name, synths, synth_names, words, on_progress=None))]
fn evaluate(
    py: Python<'_>,
    real: &Bound<'_, PyAny>,
    real_name: &str,
    synths: Vec<Bound<'_, PyAny>>,
    synth_names: Vec<String>,
    words: Vec<String>,
    on_progress: Option<Bound<'_, PyAny>>,
) -> PyResult<String> {
    // The tables are arguments, not words: placeholders fill --real and --synth.
    let mut all_words: Vec<OsString> = vec!["--real".into(), "real".into()];
    for _ in &synths {
        all_words.extend(["--synth".into(), "synth".into()]);
    }
    all_words.extend(words.into_iter().map(OsString::from));
    let (mut request, threads, _quiet) = dpsynth::cli::parse_eval(all_words).map_err(to_py)?;
    let table = |data: &Bound<'_, PyAny>, name: &str| -> PyResult<TableInput> {
        match data.extract::<PathBuf>() {
            Ok(path) => Ok(TableInput::File(path)),
            Err(_) => Ok(TableInput::Memory(open_input(data, name, false)?)),
        }
    };
    request.real = table(real, real_name)?;
    request.synths = synths.iter().zip(&synth_names).map(|(data, name)| table(data, name)).collect::<PyResult<_>>()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|error| PyRuntimeError::new_err(format!("cannot start {threads} threads: {error}")))?;
    let done = run_released(py, on_progress.as_ref(), |progress| {
        pool.install(|| dpsynth::eval::command::run(&request, progress))
    })?;
    to_json(&done.output)
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    dpsynth::io::source::silence_decoder_panics();
    module.add("PrivacyError", module.py().get_type::<PrivacyError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_class::<Release>()?;
    module.add_class::<ArrowStream>()?;
    module.add_function(wrap_pyfunction!(fit, module)?)?;
    module.add_function(wrap_pyfunction!(load, module)?)?;
    module.add_function(wrap_pyfunction!(synthesize, module)?)?;
    module.add_function(wrap_pyfunction!(evaluate, module)?)?;
    Ok(())
}
