#!/usr/bin/env python3
"""dpsynth beside established DP synthesizers: accuracy (same evaluator), time and peak memory.

Peers: MST and AIM from the smartnoise-synth package (PyPI), the marginal-based synthesizers users pick
today for tabular data. They synthesise categorical data, so each column is binned on the same PUBLIC
bounds dpsynth uses (datasets/flights.toml or --config; smartnoise's BinTransformer with lower/upper
given spends no budget) into PEER_BINS equal bins, and each synthetic value is drawn uniformly inside its
bin (the analogue of dpsynth's uniform placement; post-processing). A "binning floor" row shows what that binning
alone costs: the real table binned and redrawn the same way, without any noise.

Every method runs as its own process, once per seed (dpsynth's --seed; for the peers numpy's seed, which
their selection and sampling draw from: their noise comes from OpenDP's sampler, which takes no seed, so
their runs do not repeat); seconds are its wall time end to end (read Parquet, fit, sample, write
Parquet) and peak memory its maximum resident set (getrusage of the child). The scores come from
`dpsynth eval` against the real table (scripts/accuracy_ablation.py's, in normalised l-infinity units):
the joint W1 by exact transport on 1000-row subsamples, the largest 1-D W1, the mean 2-way TV, the
largest mean error, the correlation error and the rank correlation error; the grid estimate of the whole
tables' W1 and its interval, and the covariance error, are in peers.csv too. peers.md gives each score's
mean over seeds.

Privacy models differ and the table says so: dpsynth is pure ε-DP (δ = 0, add-remove neighbours, n
private); MST and AIM are (ε, δ)-DP through zCDP with smartnoise's default δ = 1e-9, and are given the
true n as the number of rows to sample.

The peers install into their own virtual environment, scripts/.venv-peers (smartnoise-synth pulls in
PyTorch: a few GB, once).

Usage: scripts/peer_comparison.py [--epsilons 0.1,1,10] [--methods dpsynth,mst,aim] [--seeds 3]
                                  [--binary target/release/dpsynth]
                                  [--column-sets dep_delay,arr_delay:dep_delay,arr_delay,air_time] [--out DIR]
                                  [--dataset TABLE.parquet --config BOUNDS.toml]
Any table with a config of public bounds works (for example `dpsynth generate ... --schema BOUNDS.toml`);
the default is the bundled flights table.
Writes peers.csv and peers.md under --out (default out/peers).
"""

import argparse
import csv
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import tomllib
import types
from pathlib import Path

from accuracy_ablation import scores

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "dpsynth"
DATASET = ROOT / "datasets" / "flights.parquet"
CONFIG = ROOT / "datasets" / "flights.toml"
VENV = ROOT / "scripts" / ".venv-peers"
PEER_REQUIREMENTS = ["smartnoise-synth==1.0.8", "pyarrow"]
# Bins per column for the peers: 64² = 4 096 cells per pair, inside AIM's default max_cells (10 000).
PEER_BINS = 64
PEER_DELTA = 1e-9
SEED = 1
SEEDS = 3


def venv_python():
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {VENV} (smartnoise-synth and its dependencies, once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", *PEER_REQUIREMENTS], check=True)
    return python


def measured(command, log):
    """Runs a child process (stderr to `log`); returns (wall seconds, peak RSS in MiB). Exits on failure."""
    started = time.perf_counter()
    with open(log, "w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"failed ({code}): {' '.join(map(str, command))}\n{Path(log).read_text()}")
    return seconds, usage.ru_maxrss / 1024


def evaluate(binary, synth, columns, dataset, config, seed, out):
    report = out / (synth.stem + ".eval.json")
    subprocess.run([binary, "eval", "--real", dataset, "--synth", synth, "--config", config,
                    "--columns", ",".join(columns), "--seed", str(seed), "--json", report, "--quiet"], check=True)
    return json.loads(report.read_text())


def fit_and_sample(method, frame, transformer, epsilon, seed):
    """Runs inside the peers' venv: fits smartnoise-synth's `method` (delta = PEER_DELTA, no budget on the
    public `transformer`) and draws len(frame) rows i.i.d. from the fitted model."""
    import numpy as np
    from snsynth import Synthesizer

    np.random.seed(seed)
    synthesizer = Synthesizer.create(method, epsilon=epsilon, delta=PEER_DELTA, verbose=False)
    synthesizer.fit(frame, transformer=transformer, preprocessor_eps=0.0)
    # mbi's synthetic_data defaults to method="round", which writes each column in an order tied to
    # the rows: columns the model never links come out correlated (flights d = 6: hour-month
    # correlation 0.83 against 0.00 real). Draw rows i.i.d. from the model instead (post-processing).
    # (The fitted model is frozen; snsynth's sample() only calls its synthetic_data(rows=...).)
    model = synthesizer.synthesizer
    synthesizer.synthesizer = types.SimpleNamespace(
        synthetic_data=functools.partial(model.synthetic_data, method="sample"))
    return synthesizer.sample(len(frame))


def peer_worker(method, columns, epsilon, output, dataset, config, seed):
    """Runs inside the peers' venv: fit, sample, redraw inside bins, write Parquet."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    bounds = tomllib.loads(Path(config).read_text())["bounds"]
    frame = pq.read_table(dataset, columns=columns).to_pandas()
    if method == "binning-floor":
        bins = {c: np.clip(((frame[c].to_numpy(float) - bounds[c][0]) / (bounds[c][1] - bounds[c][0])
                            * PEER_BINS).astype(int), 0, PEER_BINS - 1) for c in columns}
    else:
        from snsynth.transform import BinTransformer, TableTransformer

        transformer = TableTransformer([
            BinTransformer(bins=PEER_BINS, lower=bounds[c][0], upper=bounds[c][1]) for c in columns])
        sample = fit_and_sample(method, frame, transformer, epsilon, seed)
        # The transformer returns bin centres; recover each bin index from its centre.
        bins = {c: np.clip(np.floor((sample[c].to_numpy(float) - bounds[c][0])
                                    / (bounds[c][1] - bounds[c][0]) * PEER_BINS), 0, PEER_BINS - 1)
                .astype(int) for c in columns}
    rng = np.random.default_rng(seed)
    arrays = {}
    for c in columns:
        lo, hi = bounds[c]
        width = (hi - lo) / PEER_BINS
        arrays[c] = lo + (bins[c] + rng.random(len(bins[c]))) * width
    pq.write_table(pa.table(arrays), output)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", default="0.1,1,10")
    parser.add_argument("--methods", default="dpsynth,mst,aim")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="runs of each method, seeds 1..N")
    parser.add_argument("--column-sets", default="dep_delay,arr_delay:dep_delay,arr_delay,air_time")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "peers")
    parser.add_argument("--dataset", type=Path, default=DATASET, help="Parquet table (default: flights)")
    parser.add_argument("--config", type=Path, default=CONFIG, help="its public bounds (TOML with [bounds])")
    parser.add_argument("--binary", type=Path, default=BINARY, help="the dpsynth that runs and scores")
    parser.add_argument("--worker", nargs=4, metavar=("METHOD", "COLUMNS", "EPSILON", "OUTPUT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        method, columns, epsilon, output = args.worker
        peer_worker(method, columns.split(","), None if epsilon == "-" else float(epsilon), output, args.dataset,
                    args.config, args.seed)
        return

    if args.binary == BINARY and not BINARY.exists():
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    methods = args.methods.split(",")
    python = venv_python() if any(m != "dpsynth" for m in methods) else None
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for column_set in args.column_sets.split(":"):
        columns = column_set.split(",")
        runs = [("binning-floor", None, SEED)] if python else []
        runs += [(m, float(e), seed) for e in args.epsilons.split(",") for m in methods
                 for seed in range(1, args.seeds + 1)]
        for method, epsilon, seed in runs:
            output = args.out / f"{method}-d{len(columns)}-e{epsilon or 0}-s{seed}.parquet"
            if method == "dpsynth":
                command = [args.binary, "synth", args.dataset, "--config", args.config, "--columns", column_set,
                           "--epsilon", str(epsilon), "--seed", str(seed), "--output", output, "--quiet"]
            else:
                command = [python, __file__, "--worker", method, column_set,
                           "-" if epsilon is None else str(epsilon), output, "--dataset", args.dataset,
                           "--config", args.config, "--seed", str(seed)]
            seconds, peak_mib = measured(command, output.with_suffix(".log"))
            report = evaluate(args.binary, output, columns, args.dataset, args.config, seed, args.out)
            row = {
                "method": method, "d": len(columns), "columns": column_set,
                "epsilon": "-" if epsilon is None else epsilon,
                "delta": 0.0 if method == "dpsynth" else (PEER_DELTA if epsilon else "-"), "seed": seed,
                **scores(report),
                "w1": round(report["w1"]["value"], 5), "w1_method": report["w1"]["method"],
                "w1_lower": round(report["w1"]["lower"], 5), "w1_upper": round(report["w1"]["upper"], 5),
                "covariance_error": round(report["covariance_error"]["frobenius"], 5),
                "seconds": round(seconds, 2), "peak_mib": round(peak_mib, 1),
            }
            rows.append(row)
            print(row, flush=True)
            output.unlink()
    with open(args.out / "peers.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    shown = ["subsample_w1", "max_1d_w1", "tv_2way", "mean_error", "correlation_error", "rank_correlation_error",
             "seconds", "peak_mib"]
    lines = ["| method | d | ε | δ | seeds | joint W1 | largest 1-D W1 | 2-way TV | largest mean err | corr. err | "
             "rank corr. err | seconds | peak MiB |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups = {}
    for row in rows:
        groups.setdefault((row["method"], row["d"], row["epsilon"], row["delta"]), []).append(row)
    for (method, d, epsilon, delta), group in groups.items():
        cells = [statistics.mean(row[score] for row in group) for score in shown]
        lines.append(f"| {method} | {d} | {epsilon} | {delta} | {len(group)} | "
                     + " | ".join(f"{cell:.4g}" for cell in cells) + " |")
    (args.out / "peers.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"machine: {os.cpu_count()} cores; written: {args.out}/peers.csv, peers.md")


if __name__ == "__main__":
    main()
