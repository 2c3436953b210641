#!/usr/bin/env python3
"""Mixed-type columns: dpsynth beside MST, AIM and covloss on the flights table with its real
categorical columns and nulls, side by side.

How to run. The peers need a virtual environment (any path; the commands below use /tmp/peerenv):

    python3 -m venv /tmp/peerenv
    /tmp/peerenv/bin/pip install smartnoise-synth pyarrow pandas scipy numpy
    /tmp/peerenv/bin/python scripts/mixed_comparison.py --quick        # 1 seed, eps = 1, 50 000 rows
    /tmp/peerenv/bin/python scripts/mixed_comparison.py                # the full sweep (hours: see below)

Tested with smartnoise-synth 1.0.8 (which pulls opendp 0.14.2, smartnoise-sql 1.0.10, private-pgm as
mbi 1.1.0 on jax/jaxlib 0.10.2, and PyTorch 2.15.0 that MST/AIM do not use), pyarrow 26.0.1, pandas 2.3.3,
scipy 1.17.1, numpy 2.4.6, on Python 3.11. dpsynth itself is the binary given by --binary (default
target/release/dpsynth; the script never builds it).

Tables: datasets/flights_mixed.parquet with its public domains datasets/flights_mixed.toml (every flight,
nulls kept): `full` = its 9 columns, `subset` = dep_delay, arr_delay, carrier, origin, month, hour.

Methods, each run as its own child process, once per table x epsilon x seed:
  - dpsynth   `dpsynth synth IN --config TOML --epsilon E --seed S --output OUT` (+ --columns for the
              subset): the default mechanism (auto), pure eps-DP under add-remove (n private).
  - covloss   the same with `--mechanism covloss --neighbours replace --columns ... --bins COL=32` for each
              numeric column: eps-DP under replace (n public). Its --config holds the TOML's bounds and
              lists for the table's columns only (binaries without mixed columns refuse a list of a column they
              do not use). covloss refuses nulls ("give nulls a category of their
              own first"); where the binary does, each nullable numeric column is handed to it as a
              string column of its 32 public bin labels plus "null" (the same bins --bins would cut, with
              null as one more category), and its output labels are mapped back as below. The `note`
              column says so. Seconds and memory are then dpsynth's alone (the recoding is the owner's
              preprocessing, done once per table).
  - mst, aim  smartnoise-synth's `Synthesizer.create("mst"|"aim", epsilon=E, delta=1e-9)`: (eps, delta)-DP
              through zCDP, n public (they sample n rows). Every column is coded on its PUBLIC domain before
              the fit: a numeric column on 32 equal bins of its public bounds, a categorical one by its
              public list, and null as one more code of each nullable column. snsynth is handed those codes
              through BinTransformer(bins=C, lower=-0.5, upper=C-0.5) per column, which is the identity on
              0..C-1 with the cardinality C declared (given bounds: no budget is spent on preprocessing,
              preprocessor_eps=0, and no domain is read from the data, which snsynth's LabelTransformer
              would do). Rows are drawn i.i.d. from the fitted model (mbi's method="sample", not its
              default "round", as scripts/peer_comparison.py explains). numpy is seeded with the run's seed;
              their noise comes from OpenDP, which takes no seed.
Decoding a numeric bin (mst, aim, recoded covloss): sampled, not rounded to the bin's centre. A float
column gets a uniform point of its bin; an integer column, as dpsynth's integer cells do, one of the
integers that fall in the bin, uniformly (a bin holding no integer: a uniform point rounded to nearest).

Scores, real vs synthetic (the real table being the one the method was given):
  - tv_COL      per categorical column, total variation of the 1-D distribution (null a category; a value
                outside the public list one more category);
  - w1_COL      per numeric column, 1-D Wasserstein-1 of the non-null values divided by the public range;
  - null_COL    per nullable column, |real null rate - synthetic null rate|;
  - tv2_mean, tv2_max (and tv2_max_pair): total variation of each 2-way marginal over all column pairs,
                numeric columns on their 32 public bins, null its own bin;
  - assoc_err (and assoc_max): |association(real) - association(synthetic)| averaged over all pairs:
                Cramer's V for two categorical columns (null a category), the correlation ratio eta for a
                numeric and a categorical one (the numeric's non-null rows), Pearson's r for two numeric
                ones (rows where both are non-null);
  - transport_w1: exact l-infinity transport (W1) between 2 000-row subsamples of the numeric part (rows
                with no null in it, each column divided by its public range), by
                scipy.optimize.linear_sum_assignment; transport_floor: the same between two disjoint real
                2 000-row subsamples (the sampling floor; the real subsample is the same for every method
                of a seed);
  - seconds: the child's wall time end to end (read Parquet, fit, sample, write Parquet; Python start-up
                and imports included for mst and aim, whose fit + sample alone is in fit_seconds);
    cpu_seconds: the child's user + system CPU time (ru_utime + ru_stime): on a shared machine, the
                figure that other load does not inflate (dpsynth's is summed over its threads);
    peak_mib: the child's peak resident set (ru_maxrss from os.wait4), for every method: the peers run as a
                child process too, so the figures compare the same quantity. Each child is started from a
                small launcher (LAUNCHER), as Linux would otherwise start its ru_maxrss at this script's own.
The CSV's `binary` column and the summary's header name the dpsynth binary (version, SHA-256 prefix, time
built), as target/release/dpsynth changes between builds.
A method that fails (or passes --timeout) records its error and the sweep goes on.

Usage: mixed_comparison.py [--quick] [--seeds 5] [--epsilons 0.1,1,10] [--methods dpsynth,covloss,mst,aim]
                           [--tables full,subset] [--rows N] [--binary PATH] [--out DIR] [--work DIR]
                           [--timeout SECONDS] [--keep]
Writes OUT/mixed_comparison.csv (one row per method x table x eps x seed, appended as each run ends) and
OUT/mixed_comparison.md (means over seeds), and prints the latter; --quick writes mixed_comparison_quick.*.
OUT defaults to docs/mixed_figures.
"""

import argparse
import csv
import functools
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
import tomllib
import types
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "dpsynth"
DATASET = ROOT / "datasets" / "flights_mixed.parquet"
CONFIG = ROOT / "datasets" / "flights_mixed.toml"
OUT = ROOT / "docs" / "mixed_figures"
WORK = Path("/tmp/mixed_comparison")

TABLES = {
    "full": ["dep_delay", "arr_delay", "air_time", "distance", "carrier", "origin", "dest", "month", "hour"],
    "subset": ["dep_delay", "arr_delay", "carrier", "origin", "month", "hour"],
}
METHODS = ["dpsynth", "covloss", "mst", "aim"]
PRIVACY = {
    "dpsynth": "eps-DP, add-remove (n private)",
    "covloss": "eps-DP, replace (n public)",
    "mst": "(eps, 1e-9)-DP via zCDP, n public",
    "aim": "(eps, 1e-9)-DP via zCDP, n public",
}
BINS = 32  # public equal bins of each numeric column: covloss's --bins, the peers' coding, the 2-way TV
PEER_DELTA = 1e-9
TRANSPORT_ROWS = 2000
QUICK_ROWS = 50_000
NULL_LABEL = "null"


# ----------------------------------------------------------------------------------------------------------
# The public domain


class Column:
    """One column's public domain: numeric (bounds) or categorical (list), nullable or not (the schema)."""

    def __init__(self, name, bounds, categories, field):
        self.name = name
        self.nullable = field.nullable
        if name in categories:
            self.kind = "categorical"
            self.categories = list(categories[name])
            self.index = {value: code for code, value in enumerate(self.categories)}
        elif name in bounds:
            self.kind = "numeric"
            self.lo, self.hi = (float(x) for x in bounds[name])
            self.integer = pa.types.is_integer(field.type)
        else:
            raise ValueError(f"column {name} has neither public bounds nor a public category list")

    @property
    def numeric(self):
        return self.kind == "numeric"

    @property
    def codes(self):
        """Codes of the scoring coding: the values, then null, then (categorical) 'outside the list'."""
        return BINS + 1 if self.numeric else len(self.categories) + 2

    @property
    def peer_cardinality(self):
        """Codes of the peers' coding: the values, then null where the column is nullable."""
        return (BINS if self.numeric else len(self.categories)) + int(self.nullable)

    def bins_of(self, values):
        """dpsynth's bin_of (encoding/read.rs) on float values; NaN (null) becomes code BINS."""
        unit = np.clip((values - self.lo) / (self.hi - self.lo), 0.0, 1.0)
        codes = np.minimum((np.nan_to_num(unit) * BINS).astype(np.int64), BINS - 1)
        return np.where(np.isnan(values), BINS, codes)

    def category_codes(self, values):
        """List index; null -> K; a value outside the list -> K + 1."""
        k = len(self.categories)
        return np.fromiter((k if v is None else self.index.get(v, k + 1) for v in values), np.int64, len(values))

    def decode_bins(self, codes, rng):
        """Numeric values for bin codes (BINS = null -> NaN): sampled inside the bin, not at its centre."""
        codes = np.asarray(codes, dtype=np.int64)
        width = (self.hi - self.lo) / BINS
        u = rng.random(len(codes))
        inside = np.minimum(codes, BINS - 1)
        values = self.lo + (inside + u) * width
        if self.integer:
            first, count = self.integer_cells()
            rounded = np.clip(np.round(values), math.ceil(self.lo), math.floor(self.hi))
            chosen = first[inside] + np.floor(u * np.maximum(count[inside], 1)).astype(np.int64)
            values = np.where(count[inside] > 0, chosen, rounded).astype(float)
        return np.where(codes >= BINS, np.nan, values)

    @functools.cache
    def integer_cells(self):
        """For each bin, the first integer of the bounds that bin_of sends there, and how many (contiguous)."""
        integers = np.arange(math.ceil(self.lo), math.floor(self.hi) + 1, dtype=np.int64)
        bins = self.bins_of(integers.astype(float))
        count = np.bincount(bins, minlength=BINS)[:BINS]
        first = np.zeros(BINS, dtype=np.int64)
        starts = np.searchsorted(bins, np.arange(BINS))
        first[count > 0] = integers[starts[count > 0]]
        return first, count


def load_domain(config, dataset, columns):
    text = tomllib.loads(Path(config).read_text())
    schema = pq.read_schema(dataset)
    return [Column(name, text.get("bounds", {}), text.get("categories", {}), schema.field(name)) for name in columns]


# ----------------------------------------------------------------------------------------------------------
# Reading a table into the scoring form


def read_columns(path, domain):
    """{name: float array (NaN = null)} for numeric columns, {name: object array (None = null)} else."""
    table = pq.read_table(path, columns=[c.name for c in domain])
    data = {}
    for column in domain:
        array = table.column(column.name)
        if column.numeric:
            data[column.name] = pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False).astype(float)
        else:
            if pa.types.is_dictionary(array.type):
                array = array.cast(array.type.value_type)
            data[column.name] = np.asarray(pc.cast(array, pa.string()).to_pylist(), dtype=object)
    return data, table.num_rows


class Scored:
    """A table in the forms the scores need, computed once."""

    def __init__(self, data, rows, domain):
        self.rows = rows
        self.values = data
        self.codes = {}
        for column in domain:
            v = data[column.name]
            self.codes[column.name] = column.bins_of(v) if column.numeric else column.category_codes(v)


# ----------------------------------------------------------------------------------------------------------
# Scores


def tv(p_counts, q_counts):
    p, q = p_counts / max(p_counts.sum(), 1), q_counts / max(q_counts.sum(), 1)
    return 0.5 * float(np.abs(p - q).sum())


def w1_normalised(real, synth, column):
    from scipy.stats import wasserstein_distance

    real, synth = real[~np.isnan(real)], synth[~np.isnan(synth)]
    if len(real) == 0 or len(synth) == 0:
        return float("nan")
    return float(wasserstein_distance(real, synth)) / (column.hi - column.lo)


def cramers_v(a, b, la, lb):
    table = np.bincount(a * lb + b, minlength=la * lb).reshape(la, lb).astype(float)
    table = table[table.sum(1) > 0][:, table.sum(0) > 0]
    k = min(table.shape) - 1
    if k < 1:
        return 0.0
    n = table.sum()
    expected = np.outer(table.sum(1), table.sum(0)) / n
    chi2 = float(((table - expected) ** 2 / expected).sum())
    return math.sqrt(chi2 / n / k)


def correlation_ratio(values, categories, levels):
    keep = ~np.isnan(values)
    values, categories = values[keep], categories[keep]
    if len(values) < 2:
        return 0.0
    counts = np.bincount(categories, minlength=levels)
    sums = np.bincount(categories, weights=values, minlength=levels)
    mean = values.mean()
    total = float(((values - mean) ** 2).sum())
    if total == 0:
        return 0.0
    present = counts > 0
    between = float((counts[present] * (sums[present] / counts[present] - mean) ** 2).sum())
    return math.sqrt(between / total)


def pearson(x, y):
    keep = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[keep], y[keep]
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def association(table, a, b):
    if a.numeric and b.numeric:
        return pearson(table.values[a.name], table.values[b.name])
    if a.numeric or b.numeric:
        num, cat = (a, b) if a.numeric else (b, a)
        return correlation_ratio(table.values[num.name], table.codes[cat.name], cat.codes)
    return cramers_v(table.codes[a.name], table.codes[b.name], a.codes, b.codes)


def numeric_part(table, domain, rng, rows, exclude=None):
    """A `rows`-row subsample (indices and normalised points) of the rows with no null in the numeric part."""
    numeric = [c for c in domain if c.numeric]
    points = np.column_stack([(table.values[c.name] - c.lo) / (c.hi - c.lo) for c in numeric])
    candidates = np.flatnonzero(~np.isnan(points).any(axis=1))
    if exclude is not None:
        candidates = np.setdiff1d(candidates, exclude)
    chosen = rng.choice(candidates, size=min(rows, len(candidates)), replace=False)
    return chosen, points[chosen]


def transport_linf(x, y):
    """Exact W1 under the l-infinity cost between two equal-size point sets (the mean matched distance)."""
    from scipy.optimize import linear_sum_assignment

    m = min(len(x), len(y))
    x, y = x[:m], y[:m]
    if m == 0:
        return float("nan")
    cost = np.zeros((m, m))
    for j in range(x.shape[1]):
        np.maximum(cost, np.abs(x[:, j][:, None] - y[:, j][None, :]), out=cost)
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


def real_references(real, domain, seed):
    """Per (table, seed): the real subsample for transport and the real-vs-real floor, and the real's
    associations (computed once, shared by every method)."""
    rng = np.random.default_rng(10_000 + seed)
    first_index, first = numeric_part(real, domain, rng, TRANSPORT_ROWS)
    _, second = numeric_part(real, domain, rng, TRANSPORT_ROWS, exclude=first_index)
    return {"subsample": first, "floor": transport_linf(first, second)}


def score(real, synth, domain, reference, real_assoc, seed):
    out = {}
    for column in domain:
        if column.numeric:
            out[f"w1_{column.name}"] = w1_normalised(real.values[column.name], synth.values[column.name], column)
        else:
            out[f"tv_{column.name}"] = tv(np.bincount(real.codes[column.name], minlength=column.codes),
                                          np.bincount(synth.codes[column.name], minlength=column.codes))
        if column.nullable:
            null = BINS if column.numeric else len(column.categories)
            out[f"null_{column.name}"] = abs(float((real.codes[column.name] == null).mean())
                                             - float((synth.codes[column.name] == null).mean()))
    pairs = list(itertools.combinations(domain, 2))
    tvs, assoc = {}, []
    for a, b in pairs:
        size = a.codes * b.codes
        r = np.bincount(real.codes[a.name] * b.codes + real.codes[b.name], minlength=size)
        s = np.bincount(synth.codes[a.name] * b.codes + synth.codes[b.name], minlength=size)
        tvs[f"{a.name}x{b.name}"] = tv(r, s)
        assoc.append(abs(real_assoc[(a.name, b.name)] - association(synth, a, b)))
    worst = max(tvs, key=tvs.get)
    out.update(tv2_mean=float(np.mean(list(tvs.values()))), tv2_max=tvs[worst], tv2_max_pair=worst,
               assoc_err=float(np.mean(assoc)), assoc_max=float(np.max(assoc)))
    rng = np.random.default_rng(20_000 + seed)
    _, points = numeric_part(synth, domain, rng, TRANSPORT_ROWS)
    out["transport_w1"] = transport_linf(reference["subsample"], points)
    out["transport_floor"] = reference["floor"]
    w1s = [out[f"w1_{c.name}"] for c in domain if c.numeric]
    tv1 = [out[f"tv_{c.name}"] for c in domain if not c.numeric]
    nulls = [out[f"null_{c.name}"] for c in domain if c.nullable]
    out.update(w1_mean=float(np.nanmean(w1s)) if w1s else "", tv_mean=float(np.mean(tv1)) if tv1 else "",
               null_mean=float(np.mean(nulls)) if nulls else "")
    return out


# ----------------------------------------------------------------------------------------------------------
# Running a method


# Runs one command and reports its child's peak resident set. It is started from this small launcher, not
# from the sweep itself: Linux starts a child's ru_maxrss at its parent's high-water mark (fork copies it and
# exec keeps the larger), so a child of the sweep, which holds the real table, would report at least the
# sweep's own few hundred MiB.
LAUNCHER = """
import json, os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as file:
    json.dump({"maxrss_kib": usage.ru_maxrss, "cpu_seconds": usage.ru_utime + usage.ru_stime}, file)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def measured(command, log, timeout):
    """Runs a child (stdout and stderr to `log`); returns (exit code or 'timeout', wall seconds, peak MiB,
    CPU seconds): the child's ru_maxrss and ru_utime + ru_stime from wait4, through LAUNCHER."""
    usage_file = Path(str(log) + ".rusage.json")
    usage_file.unlink(missing_ok=True)
    launcher = [sys.executable, "-S", "-c", LAUNCHER, str(usage_file)]
    started = time.perf_counter()
    with open(log, "w") as output:
        process = subprocess.Popen(launcher + [str(c) for c in command], stdout=output, stderr=output,
                                   start_new_session=True)
        code = None
        while code is None:
            code = process.poll()
            if code is None and timeout and time.perf_counter() - started > timeout:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                code = "timeout"
            elif code is None:
                time.sleep(0.1)
    seconds = time.perf_counter() - started
    usage = json.loads(usage_file.read_text()) if usage_file.exists() else {}
    usage_file.unlink(missing_ok=True)
    return code, seconds, usage.get("maxrss_kib", float("nan")) / 1024, usage.get("cpu_seconds", float("nan"))


def last_error(log):
    lines = [line.strip() for line in Path(log).read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith(("error", "traceback")) or "Error" in line]
    return (errors[-1] if errors else lines[-1] if lines else "no output")[:400]


def dpsynth_command(args, table, columns, epsilon, seed, dataset, output):
    command = [args.binary, "synth", dataset, "--config", args.config, "--epsilon", epsilon, "--seed", seed,
               "--output", output, "--quiet"]
    if table != "full":
        command += ["--columns", ",".join(columns)]
    return command


def restricted_config(config, columns, path):
    """The config's public domains for `columns` only (the same bounds and lists): covloss in binaries
    without mixed columns refuses a category list for a column it does not use."""
    text = tomllib.loads(Path(config).read_text())
    lines = ["columns = [" + ", ".join(json.dumps(c) for c in columns) + "]", "", "[bounds]"]
    lines += [f"{c} = [{lo}, {hi}]" for c, (lo, hi) in text.get("bounds", {}).items() if c in columns]
    lines += ["", "[categories]"]
    lines += [f"{c} = [" + ", ".join(json.dumps(v) for v in values) + "]"
              for c, values in text.get("categories", {}).items() if c in columns]
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def covloss_command(args, domain, epsilon, seed, dataset, output, recoded):
    config = restricted_config(args.config, [c.name for c in domain], args.work / f"covloss-{len(domain)}.toml")
    command = [args.binary, "synth", dataset, "--config", config, "--mechanism", "covloss",
               "--neighbours", "replace", "--columns", ",".join(c.name for c in domain), "--epsilon", epsilon,
               "--seed", seed, "--output", output, "--quiet"]
    for column in domain:
        if column.numeric and not (recoded and column.nullable):
            command += ["--bins", f"{column.name}={BINS}"]
        elif column.numeric:
            command += ["--categories", f"{column.name}={','.join(bin_labels())}"]
    return command


def bin_labels():
    return [f"b{k:02d}" for k in range(BINS)] + [NULL_LABEL]


def recode_for_covloss(dataset, domain, path):
    """The input with each nullable numeric column as a string column of its public bin labels + 'null'."""
    table = pq.read_table(dataset, columns=[c.name for c in domain])
    labels = np.asarray(bin_labels(), dtype=object)
    fields, arrays = [], []
    for column in domain:
        array = table.column(column.name)
        if column.numeric and column.nullable:
            codes = column.bins_of(pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False).astype(float))
            array = pa.array(labels[codes], type=pa.string())
            fields.append(pa.field(column.name, pa.string(), nullable=False))
        else:
            fields.append(table.schema.field(column.name))
        arrays.append(array)
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)


def decode_covloss(path, domain, seed, output):
    """covloss's output on the recoded input, back to the input's numeric columns (sampled in the bin)."""
    table = pq.read_table(path)
    rng = np.random.default_rng(seed)
    index = {label: code for code, label in enumerate(bin_labels())}
    arrays, fields = [], []
    for column in domain:
        array = table.column(column.name)
        if column.numeric and column.nullable and pa.types.is_string(array.type):
            codes = np.fromiter((index.get(v, BINS) if v is not None else BINS for v in array.to_pylist()),
                                np.int64)
            array = numeric_array(column.decode_bins(codes, rng), column)
        arrays.append(array)
        fields.append(pa.field(column.name, array.type))
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), output)


def numeric_array(values, column):
    mask = np.isnan(values)
    if column.integer:
        return pa.array(np.where(mask, 0, values).astype(np.int64), type=pa.int64(), mask=mask)
    return pa.array(values, type=pa.float64(), mask=mask)


# ----------------------------------------------------------------------------------------------------------
# The peers' worker (a child process, so its time and memory are measured as dpsynth's are)


def peer_worker(method, dataset, config, columns, epsilon, seed, output):
    import pandas as pd
    from snsynth import Synthesizer
    from snsynth.transform import BinTransformer, TableTransformer

    domain = load_domain(config, dataset, columns)
    data, rows = read_columns(dataset, domain)
    coded = {}
    for column in domain:
        if column.numeric:
            codes = column.bins_of(data[column.name])
            if not column.nullable and (codes == BINS).any():
                raise ValueError(f"{column.name}: nulls in a non-nullable column")
        else:
            codes = column.category_codes(data[column.name])
            k = len(column.categories)
            if (codes == k + 1).any():
                raise ValueError(f"{column.name}: a value outside the public category list")
            if not column.nullable and (codes == k).any():
                raise ValueError(f"{column.name}: nulls in a non-nullable column")
        coded[column.name] = codes
    frame = pd.DataFrame(coded)
    # Identity on 0..C-1 with the public cardinality C declared: given bounds, so fit spends nothing.
    transformer = TableTransformer([BinTransformer(bins=c.peer_cardinality, lower=-0.5,
                                                   upper=c.peer_cardinality - 0.5) for c in domain])
    np.random.seed(seed)
    started = time.perf_counter()
    # verbose: AIM logs each round (to the run's log in --work), which shows how far a long run is.
    synthesizer = Synthesizer.create(method, epsilon=float(epsilon), delta=PEER_DELTA, verbose=True)
    synthesizer.fit(frame, transformer=transformer, preprocessor_eps=0.0)
    fitted = time.perf_counter()
    model = synthesizer.synthesizer
    synthesizer.synthesizer = types.SimpleNamespace(
        synthetic_data=functools.partial(model.synthetic_data, method="sample"))
    sample = synthesizer.sample(rows)
    sampled = time.perf_counter()
    rng = np.random.default_rng(seed)
    arrays = []
    for column in domain:
        codes = np.rint(sample[column.name].to_numpy(float)).astype(np.int64)
        if column.numeric:
            arrays.append(numeric_array(column.decode_bins(codes, rng), column))
        else:
            values = [column.categories[c] if c < len(column.categories) else None for c in codes]
            arrays.append(pa.array(values, type=pa.string()))
    pq.write_table(pa.table(dict(zip(columns, arrays))), output)
    Path(str(output) + ".json").write_text(json.dumps(
        {"fit_seconds": fitted - started, "sample_seconds": sampled - fitted}))


# ----------------------------------------------------------------------------------------------------------
# The sweep


FIELDS_HEAD = ["method", "table", "columns", "epsilon", "seed", "privacy", "rows_real", "rows_out", "seconds",
               "cpu_seconds", "fit_seconds", "peak_mib", "status", "error", "note", "binary"]
FIELDS_SCORES = ["tv_mean", "w1_mean", "null_mean", "tv2_mean", "tv2_max", "tv2_max_pair", "assoc_err",
                 "assoc_max", "transport_w1", "transport_floor"]


def all_fields():
    per_column = []
    for name in TABLES["full"]:
        per_column += [f"tv_{name}", f"w1_{name}", f"null_{name}"]
    return FIELDS_HEAD + FIELDS_SCORES + per_column


def rounded(row):
    return {k: (round(v, 6) if isinstance(v, float) and math.isfinite(v) else v) for k, v in row.items()}


def run_one(args, method, table, domain, epsilon, seed, dataset, real, reference, real_assoc, recoded_inputs):
    columns = [c.name for c in domain]
    tag = f"{method}-{table}-e{epsilon}-s{seed}"
    output = args.work / f"{tag}.parquet"
    log = args.work / f"{tag}.log"
    row = {"method": method, "table": table, "columns": ",".join(columns), "epsilon": epsilon, "seed": seed,
           "privacy": PRIVACY[method], "rows_real": real.rows, "note": "",
           "binary": binary_identity(args.binary) if method in ("dpsynth", "covloss") else ""}
    for stale in (output, Path(str(output) + ".json")):
        stale.unlink(missing_ok=True)
    try:
        if method == "dpsynth":
            command = dpsynth_command(args, table, columns, epsilon, seed, dataset, output)
        elif method == "covloss":
            command = covloss_command(args, domain, epsilon, seed, dataset, output, recoded=False)
        else:
            command = [sys.executable, Path(__file__).resolve(), "--worker", method, "--worker-dataset", dataset,
                       "--config", args.config, "--worker-columns", ",".join(columns), "--worker-epsilon",
                       epsilon, "--worker-seed", seed, "--worker-output", output]
        code, seconds, peak, cpu = measured(command, log, args.timeout)
        if method == "covloss" and code not in (0, "timeout") and "has nulls" in Path(log).read_text():
            native_error = last_error(log)
            recoded = recoded_inputs.get(table)
            if recoded is None:
                recoded = args.work / f"covloss-input-{table}.parquet"
                recode_for_covloss(dataset, domain, recoded)
                recoded_inputs[table] = recoded
            raw = args.work / f"{tag}.recoded.parquet"
            command = covloss_command(args, domain, epsilon, seed, recoded, raw, recoded=True)
            code, seconds, peak, cpu = measured(command, log, args.timeout)
            if code == 0:
                decode_covloss(raw, domain, seed, output)
                raw.unlink()
            row["note"] = ("nullable numeric columns recoded as their 32 bin labels + 'null' (native run: "
                           f"{native_error})")
        row.update(seconds=seconds, cpu_seconds=cpu, peak_mib=peak)
        sidecar = Path(str(output) + ".json")
        if sidecar.exists():
            row["fit_seconds"] = sum(json.loads(sidecar.read_text()).values())
            sidecar.unlink()
        if code != 0:
            row.update(status="failed", error=("timeout after %d s" % args.timeout) if code == "timeout"
                       else f"exit {code}: {last_error(log)}")
            return row
        data, rows = read_columns(output, domain)
        synth = Scored(data, rows, domain)
        row.update(rows_out=rows, status="ok", **score(real, synth, domain, reference, real_assoc, seed))
    except Exception as error:  # noqa: BLE001 - a failing method is a result, not a stop
        row.update(status="failed", error=f"{type(error).__name__}: {error}"[:400])
    finally:
        if not args.keep:
            output.unlink(missing_ok=True)
    return row


def binary_identity(binary):
    """The dpsynth binary as a short text: its version, SHA-256 prefix and modification time, read at each
    run (a binary rebuilt during a sweep shows as two identities in the summary's header)."""
    import datetime
    import hashlib

    try:
        version = subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout.strip()
        digest = hashlib.sha256(Path(binary).read_bytes()).hexdigest()[:12]
        built = datetime.datetime.fromtimestamp(Path(binary).stat().st_mtime, datetime.timezone.utc)
        return f"{version}, sha256 {digest}, built {built:%Y-%m-%d %H:%M} UTC"
    except OSError as error:
        return f"unreadable ({error})"


def summary(rows):
    """Markdown: means over seeds per table x epsilon x method (failures counted and quoted)."""
    def mean(group, key):
        values = [float(r[key]) for r in group if r.get("status") == "ok" and r.get(key) not in ("", None)]
        values = [v for v in values if math.isfinite(v)]
        return sum(values) / len(values) if values else None

    def fmt(value, digits=4):
        return "–" if value is None else f"{value:.{digits}f}"

    lines = ["| table | ε | method | ok/runs | cat. TV 1-D | num. W1 1-D | null-rate err | 2-way TV mean | "
             "2-way TV worst | assoc. err | ℓ∞ W1 (floor) | seconds | CPU s | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    keys = sorted({(r["table"], float(r["epsilon"]), r["method"]) for r in rows},
                  key=lambda k: (list(TABLES).index(k[0]) if k[0] in TABLES else 9, k[1], METHODS.index(k[2])
                                 if k[2] in METHODS else 9))
    for table, epsilon, method in keys:
        group = [r for r in rows if r["table"] == table and float(r["epsilon"]) == epsilon and r["method"] == method]
        ok = sum(r.get("status") == "ok" for r in group)
        transport = mean(group, "transport_w1")
        floor = mean(group, "transport_floor")
        cells = [table, f"{epsilon:g}", method, f"{ok}/{len(group)}", fmt(mean(group, "tv_mean")),
                 fmt(mean(group, "w1_mean")), fmt(mean(group, "null_mean")), fmt(mean(group, "tv2_mean")),
                 fmt(mean(group, "tv2_max")), fmt(mean(group, "assoc_err")),
                 f"{fmt(transport)} ({fmt(floor)})" if transport is not None else "–",
                 fmt(mean(group, "seconds") if ok else None, 1), fmt(mean(group, "cpu_seconds") if ok else None, 1),
                 fmt(mean(group, "peak_mib") if ok else None, 0)]
        lines.append("| " + " | ".join(cells) + " |")
        for r in group:
            if r.get("status") != "ok":
                notes.append(f"- {method}, {table}, ε = {epsilon:g}, seed {r['seed']}: {r.get('error', '')}")
                break
        for r in group:
            if r.get("note"):
                notes.append(f"- {method}, {table}, ε = {epsilon:g}: {r['note']}")
                break
    text = "\n".join(lines)
    if notes:
        text += "\n\nFailures and notes (the first of each group):\n\n" + "\n".join(notes)
    return text + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"1 seed, eps = 1, a {QUICK_ROWS}-row subsample")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    parser.add_argument("--epsilons", default="0.1,1,10")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--rows", type=int, help="run on a seeded subsample of this many rows")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--binary", type=Path, default=BINARY)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--work", type=Path, default=WORK, help="synthetic tables and logs (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per run (default 4 h)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic tables in --work")
    parser.add_argument("--worker", choices=["mst", "aim"], help=argparse.SUPPRESS)
    parser.add_argument("--worker-dataset", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-columns", help=argparse.SUPPRESS)
    parser.add_argument("--worker-epsilon", help=argparse.SUPPRESS)
    parser.add_argument("--worker-seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker-output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        peer_worker(args.worker, args.worker_dataset, args.config, args.worker_columns.split(","),
                    args.worker_epsilon, args.worker_seed, args.worker_output)
        return

    if args.quick:
        args.seeds, args.epsilons, args.rows = 1, "1", args.rows or QUICK_ROWS
    args.binary, args.config = args.binary.resolve(), args.config.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "mixed_comparison_quick" if args.quick else "mixed_comparison"
    csv_path, md_path = args.out / f"{stem}.csv", args.out / f"{stem}.md"

    dataset = args.dataset.resolve()
    if args.rows:
        table = pq.read_table(dataset)
        if args.rows < table.num_rows:
            keep = np.sort(np.random.default_rng(0).choice(table.num_rows, args.rows, replace=False))
            dataset = args.work / f"{args.dataset.stem}-{args.rows}.parquet"
            pq.write_table(table.take(pa.array(keep)), dataset, row_group_size=65_536, compression="zstd")

    methods = args.methods.split(",")
    epsilons = [e.strip() for e in args.epsilons.split(",")]
    rows = []
    fields = all_fields()
    with open(csv_path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for table in args.tables.split(","):
            domain = load_domain(args.config, dataset, TABLES[table])
            data, n = read_columns(dataset, domain)
            real = Scored(data, n, domain)
            real_assoc = {(a.name, b.name): association(real, a, b) for a, b in itertools.combinations(domain, 2)}
            recoded_inputs = {}
            for seed in range(1, args.seeds + 1):
                reference = real_references(real, domain, seed)
                for epsilon in epsilons:
                    for method in methods:
                        row = rounded(run_one(args, method, table, domain, epsilon, seed, dataset, real, reference,
                                              real_assoc, recoded_inputs))
                        rows.append(row)
                        writer.writerow(row)
                        file.flush()
                        shown = {k: row.get(k) for k in ["method", "table", "epsilon", "seed", "status", "seconds",
                                                         "peak_mib", "tv2_mean", "transport_w1", "error"]}
                        print(json.dumps(shown), file=sys.stderr, flush=True)
    text = (f"Means over seeds; {csv_path.name} has every run. Input: {args.dataset.name}"
            + (f" (a seeded {args.rows}-row subsample)" if args.rows else "")
            + f"; dpsynth: {args.binary} ("
            + "; ".join(sorted({r["binary"] for r in rows if r.get("binary")}) or ["not run"]) + ").\n\n"
            + summary(rows))
    md_path.write_text(text)
    print(text)
    print(f"wrote {csv_path} and {md_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
