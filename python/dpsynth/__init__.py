"""dpsynth: differentially private synthetic tables, provably close to the original in Wasserstein distance.

The mechanisms live in the Rust crate; this package only hands it data and options:

* data is a pyarrow Table or RecordBatchReader, a pandas or polars DataFrame (through the Arrow PyCapsule
  interface: numeric columns are shared with Rust, not copied), or a path to a Parquet file, directory or
  glob;
* every option of ``dpsynth synth`` is a keyword of the same name (dashes become underscores) with the
  same default, parsed by the command line's own parser; ``config="run.toml"`` reads a config file;
* errors are ``ValueError`` (bad input, naming the column and the reason) or :class:`PrivacyError` (a
  request that would break the guarantee); Ctrl-C stops a run; progress goes to the ``dpsynth`` logger and,
  when tqdm is installed and stderr is a terminal, to a progress bar.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import pyarrow as pa

from . import _native
from ._native import PrivacyError

__all__ = ["synthesize", "evaluate", "load", "Synthesizer", "PrivacyError", "__version__"]
__version__: str = _native.__version__

logger = logging.getLogger("dpsynth")

#: Bounds per column: ``{"age": (0, 120)}``, or the command line's ``["age=0:120"]``.
Bounds = Union[Mapping[str, Tuple[float, float]], Sequence[str]]


def synthesize(
    data: Any,
    *,
    epsilon: Optional[float] = None,
    bounds: Optional[Bounds] = None,
    mechanism: Optional[str] = None,
    neighbours: Optional[str] = None,
    rows: Optional[int] = None,
    seed: Optional[int] = None,
    config: Union[str, "os.PathLike[str]", None] = None,
    quiet: bool = False,
    **options: Any,
) -> Tuple[pa.Table, Dict[str, Any]]:
    """One ``dpsynth synth`` run on ``data``: the synthetic table and the run report.

    Every keyword is the ``synth`` option of the same name (``root_share`` is ``--root-share``); one left
    out (None) takes the command line's default (``mechanism`` auto, ``neighbours`` add-remove, ``rows`` the
    released count) or the value in ``config``. With ``seed`` the run is reproducible and its report says
    it is not fit for release. ``quiet`` turns off the progress bar (the logger still gets the phases).

    Returns ``(table, report)``: a pyarrow Table with the input's column names and types, and the report
    as a dict with the same keys as ``synth --report``'s JSON. The owner-only diagnostics (NOT private)
    are logged at DEBUG level.
    """
    words = _words(dict(options, epsilon=epsilon, bounds=bounds, mechanism=mechanism, neighbours=neighbours,
                        rows=rows, seed=seed, config=config))
    source, name = _input(data)
    stream, report, diagnostics = _call(_native.synthesize, source, name, words, _progress(quiet))
    logger.debug("diagnostics (NOT private, owner only): %s", diagnostics)
    return pa.table(stream), json.loads(report)


def evaluate(
    real: Any,
    synth: Any,
    *,
    bounds: Optional[Bounds] = None,
    config: Union[str, "os.PathLike[str]", None] = None,
    report_dir: Union[str, "os.PathLike[str]", None] = None,
    **options: Any,
) -> Dict[str, Any]:
    """``dpsynth eval``: how close ``synth`` is to ``real`` (W1 and friends), as the eval JSON's dict.

    ``synth`` is one table or a list of them (compared side by side). Tables are anything
    :func:`synthesize` accepts. Every ``eval`` option is a keyword (``subsample_rows``, ``seed``,
    ``grid_side``, ``nulls``, ``threads``, ...); ``report_dir`` also writes the HTML report page there.
    NOT private: the numbers are computed from the real data, for its owner only.
    """
    synths = list(synth) if isinstance(synth, (list, tuple)) else [synth]
    words = _words(dict(options, bounds=bounds, config=config, report_dir=report_dir))
    real_source, real_name = _input(real)
    inputs = [_input(table) for table in synths]
    output = _call(_native.evaluate, real_source, real_name, [source for source, _ in inputs],
                   [name for _, name in inputs], words)
    return json.loads(output)


class Synthesizer:
    """A mechanism fitted once and sampled any number of times, the way benchmark harnesses drive peers.

    ``fit`` spends the budget once; ``sample(n)`` draws n rows from the released measure without reading
    the data again or spending more (post-processing). For scripts written for smartnoise-synth::

        synth = Synthesizer.create("mst", epsilon=1.0)           # smartnoise-synth
        synth = dpsynth.Synthesizer.create("pmm", epsilon=1.0)   # dpsynth
        synth.fit(df, bounds={"x": (0, 1), "y": (0, 10)})      # dpsynth needs public bounds
        rows = synth.sample(1000)                                 # a DataFrame like the one fitted

    ``sample`` returns the kind of table that was fitted (pandas, polars, else pyarrow).
    """

    def __init__(self, mechanism: str = "auto", *, epsilon: Optional[float] = None, quiet: bool = False,
                 **options: Any) -> None:
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.quiet = quiet
        self.options = options
        self._release: Optional[_native.Release] = None
        self._kind = "pyarrow"
        #: The report of the last fit or sample (a dict with the ``synth --report`` keys).
        self.report: Optional[Dict[str, Any]] = None

    @classmethod
    def create(cls, synth: str = "auto", epsilon: Optional[float] = None, **options: Any) -> "Synthesizer":
        """smartnoise-synth's constructor: ``Synthesizer.create("pmm", epsilon=1.0, ...)``."""
        return cls(synth, epsilon=epsilon, **options)

    def fit(self, data: Any, bounds: Optional[Bounds] = None, **options: Any) -> "Synthesizer":
        """Spends the budget on ``data`` once. Keywords add to (and override) the constructor's options.

        A second fit would spend the budget again on the same people; it raises :class:`PrivacyError`
        (create another Synthesizer if that is what you mean).
        """
        if self._release is not None:
            raise PrivacyError("this Synthesizer is already fitted: a second fit would spend epsilon again; "
                               "create a new Synthesizer to fit other data")
        merged = dict(self.options, **options)
        words = _words(dict(merged, mechanism=self.mechanism, epsilon=self.epsilon, bounds=bounds))
        source, name = _input(data)
        self._kind = _kind(data)
        self._release = _call(_native.fit, source, name, words, _progress(self.quiet))
        self.report = json.loads(self._release.report())
        logger.debug("diagnostics (NOT private, owner only): %s", self._release.diagnostics())
        return self

    def sample(self, samples: Optional[int] = None) -> Any:
        """``samples`` rows (default: the released row count) drawn from the release; no budget is spent."""
        if self._release is None:
            raise ValueError("sample before fit: call fit(data, bounds=...) first")
        stream, report = self._release.sample(samples, _progress(self.quiet))
        self.report = json.loads(report)
        table = pa.table(stream)
        if self._kind == "pandas":
            return table.to_pandas()
        if self._kind == "polars":
            import polars

            return polars.from_arrow(table)
        return table

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Saves the release at ``path`` (atomically): the measure, the columns' public domains and the report,
        never the data or the diagnostics. :func:`load` and ``dpsynth sample PATH`` draw from it."""
        if self._release is None:
            raise ValueError("save before fit: call fit(data, bounds=...) first")
        self._release.save(os.fspath(path))

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"], *, seed: Optional[int] = None,
             quiet: bool = False) -> "Synthesizer":
        """A Synthesizer fitted from the release saved at ``path`` (by :meth:`save` or ``synth --save-release``);
        a damaged, truncated or foreign file raises ValueError. Its first ``sample(n)`` is
        ``dpsynth sample PATH --rows n --seed SEED``'s table: with the fitting run's seed, that run's own first
        draw; without one, fresh placement coins. Sampling reads no data and spends no budget; it returns a
        pyarrow Table."""
        fitted = cls(quiet=quiet)
        fitted._release = _call(_native.load, os.fspath(path), seed)
        fitted.report = json.loads(fitted._release.report())
        fitted.mechanism = fitted.report["mechanism"]
        return fitted

    def fit_sample(self, data: Any, bounds: Optional[Bounds] = None, **options: Any) -> Any:
        """``fit`` then ``sample()`` (smartnoise-synth's name)."""
        return self.fit(data, bounds=bounds, **options).sample()


def load(path: Union[str, "os.PathLike[str]"], *, seed: Optional[int] = None, quiet: bool = False) -> Synthesizer:
    """:meth:`Synthesizer.load`: the release saved at ``path``, ready to ``sample`` without the data."""
    return Synthesizer.load(path, seed=seed, quiet=quiet)


def _call(function: Any, *arguments: Any) -> Any:
    """Calls the extension, naming an unknown keyword as the caller wrote it (the parser saw a flag)."""
    try:
        return function(*arguments)
    except PrivacyError:
        raise
    except ValueError as error:
        match = re.match(r"unexpected argument '--([^']+)'", str(error))
        if match is None:
            raise
        keyword = match.group(1).replace("-", "_")
        raise ValueError(f"unknown keyword '{keyword}': the keywords are the command line's options with "
                         f"underscores for dashes (see `dpsynth synth --help` and `dpsynth eval --help`)") from None


def _kind(data: Any) -> str:
    module = type(data).__module__.split(".")[0]
    return module if module in ("pandas", "polars") else "pyarrow"


def _input(data: Any) -> Tuple[Any, str]:
    """``data`` as the extension takes it (a path string or an Arrow stream) and its name for messages."""
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        return path, path
    name = f"{type(data).__module__.split('.')[0]}.{type(data).__name__}"
    if hasattr(data, "__arrow_c_stream__"):
        return data, name
    if _kind(data) == "pandas":  # pandas before 2.2 has no __arrow_c_stream__
        return pa.Table.from_pandas(data, preserve_index=False), name
    raise TypeError(f"dpsynth reads a pyarrow Table or RecordBatchReader, a pandas or polars DataFrame, or a "
                    f"path to Parquet data; got {name}")


def _words(options: Mapping[str, Any]) -> List[str]:
    """Keywords as the command line's words: ``root_share=0.1`` is ``--root-share 0.1``; True is a bare flag,
    None and False are left out; a dict of bounds (or categories, bins) is one ``COLUMN=...`` per entry;
    ``columns``, ``exclude`` and ``covloss_shares`` are comma-separated lists; other lists repeat the flag."""
    words: List[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            words.append(flag)
        elif isinstance(value, Mapping):
            words += [f"{flag}={column}={_entry(key, entry)}" for column, entry in value.items()]
        elif isinstance(value, (list, tuple)) and key in ("columns", "exclude", "covloss_shares"):
            words.append(f"{flag}={','.join(_text(item) for item in value)}")
        elif isinstance(value, (list, tuple)):
            words += [f"{flag}={_text(item)}" for item in value]
        else:
            # FLAG=VALUE: a value such as -1 is then a (refused) value, never read as a flag.
            words.append(f"{flag}={_text(value)}")
    return words


def _entry(key: str, entry: Any) -> str:
    if key == "bounds":
        low, high = entry
        return f"{_text(low)}:{_text(high)}"
    if isinstance(entry, (list, tuple)):
        return ",".join(_text(item) for item in entry)
    return _text(entry)


def _text(value: Any) -> str:
    # repr keeps every digit of a float (str would too on Python 3, but repr says so).
    return repr(value) if isinstance(value, float) else os.fspath(value) if isinstance(value, os.PathLike) else str(value)


class _Progress:
    """Forwards a run's phases to the ``dpsynth`` logger, and to tqdm bars on a terminal."""

    def __init__(self, bars: bool) -> None:
        self.bars: Dict[str, Any] = {}
        self.tqdm = None
        if bars and sys.stderr is not None and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.tqdm = tqdm
            except ImportError:
                pass

    def __call__(self, event: str, phase: str, amount: int, unit: str) -> None:
        if event == "start":
            # A phase of uncounted work (amount 0) gets a bar without a total: tqdm shows its elapsed time.
            counted = amount > 0
            if counted:
                logger.info("%s: %d %s", phase, amount, unit)
            else:
                logger.info("%s", phase)
            if self.tqdm is not None:
                total = amount if counted else None
                self.bars[phase] = self.tqdm(total=total, unit=f" {unit}" if unit else "it", desc=phase, leave=False)
        elif event == "advance":
            bar = self.bars.get(phase)
            if bar is not None:
                bar.update(amount)
        elif event == "finish":
            bar = self.bars.pop(phase, None)
            if bar is not None:
                bar.close()
            logger.debug("%s: done", phase)


def _progress(quiet: bool) -> _Progress:
    return _Progress(bars=not quiet)
