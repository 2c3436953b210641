#!/usr/bin/env python3
"""Figures for covloss and microagg (issue 16), as CSV and a Markdown table (no plotting dependencies).

For each table:
  - a generated low-rank Boolean table (`dpsynth generate --law latent-class:4`), p = 32 and 64;
  - the bundled flights table's five numeric columns one-hot over public bins (--bins; the bundled file
    has no carrier/origin columns), when datasets/flights.parquet exists;
it runs
  - covloss at epsilon in {0.5, 1, 4}, with the paper's damping b and with b = n/(2s) (`--damping cells`);
  - microagg at k in {10, 100, 1000} (cells from k' = floor(sqrt k), the proof's variant);
  - the baseline "independent bits with noisy 1-way marginals", honestly epsilon-DP: covloss itself with
    t = 0 (one cell, so the released centroid is the noisy mean), damping b = n (the centroid is the
    mean) and the shares 0.001 : 0.001 : 1 (the second moment and the single weight are released but
    unused);
  - with --baselines pmm: PMM (replace, same epsilon) on the table itself: on the generated table's 0/1
    columns (bounds 0:1; each synthetic value rounded to the nearer of 0 and 1, post-processing) and on
    the flights table's numeric columns (its public bounds), scored on the same bins;
  - with --baselines mst: smartnoise-synth's MST (epsilon, delta = 1e-9, in the peers' virtual environment
    of scripts/peer_comparison.py) on the encoded codes (each bit, each bin index, binned with public
    bounds), its rows drawn i.i.d. from the fitted model and decoded to bin centres;
and scores each output with `dpsynth eval --marginals` (sqrt MSE_2, sqrt MSE_3, exact for p <= 64), with
the synth run's seconds per phase (encode = plain decode and bit packing; release = second moment, cells,
noise) and peak memory from its diagnostics.

Usage: scripts/covloss_figures.py [--out DIR] [--rows N] [--bits 32,64] [--seeds 2]
       [--binary target/release/dpsynth] [--no-flights] [--baselines pmm,mst]
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

FLIGHTS_BINS = ["dep_delay=8", "arr_delay=8", "air_time=8", "distance=10", "dep_time=24"]
FLIGHTS_COLUMNS = "dep_delay,arr_delay,air_time,distance,dep_time"


def run(binary, *args):
    started = time.time()
    result = subprocess.run([binary, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)}\n{result.stderr}")
    return time.time() - started


def method_runs(rows, baselines):
    """(label, epsilon, kind, synth arguments); kind is "encoded" (covloss, microagg: the encoding's
    arguments apply), "pmm" (the table's numeric arguments) or "mst" (run in the peers' environment)."""
    runs = []
    for epsilon in (0.5, 1.0, 4.0):
        for damping in ("paper", "cells"):
            runs.append((f"covloss eps={epsilon} b={damping}", epsilon,
                         "encoded", ["--mechanism", "covloss", "--epsilon", str(epsilon), "--neighbours", "replace",
                                     "--damping", damping]))
    for k in (10, 100, 1000):
        runs.append((f"microagg k={k}", None, "encoded", ["--mechanism", "microagg", "--k", str(k)]))
    for epsilon in (0.5, 1.0, 4.0):
        runs.append((f"independent bits eps={epsilon}", epsilon, "encoded",
                     ["--mechanism", "covloss", "--epsilon", str(epsilon), "--neighbours", "replace",
                      "--covloss-t", "0", "--damping", str(rows), "--covloss-shares", "0.001,0.001,1"]))
    for baseline in baselines:
        for epsilon in (0.5, 1.0, 4.0):
            arguments = ["--mechanism", "pmm", "--neighbours", "replace"] if baseline == "pmm" else []
            runs.append((f"{baseline} eps={epsilon}", epsilon, baseline, [*arguments, "--epsilon", str(epsilon)]))
    return runs


def peer_comparison():
    """scripts/peer_comparison.py: the peers' environment and their fitting."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import peer_comparison

    return peer_comparison


def venv_python():
    """The peers' environment (smartnoise-synth), made by scripts/peer_comparison.py on first use."""
    return str(peer_comparison().venv_python())


def round_bits(output):
    """PMM's values on 0/1 columns rounded to the nearer of 0 and 1 (post-processing), in place."""
    code = ("import sys, pyarrow.compute as pc, pyarrow.parquet as pq\n"
            "t = pq.read_table(sys.argv[1])\n"
            "t = t.from_arrays([pc.cast(pc.greater_equal(c, 0.5), c.type) for c in t.columns], names=t.column_names)\n"
            "pq.write_table(t, sys.argv[1])\n")
    subprocess.run([venv_python(), "-c", code, output], check=True)


def mst_worker(table, columns, bins, epsilon, seed, output):
    """Runs inside the peers' environment: MST on the codes of `columns` (a bit, or the bin of a public
    `bins` entry COLUMN=LO:HI:K), decoded to bits and bin centres."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from snsynth.transform import BinTransformer, TableTransformer

    data = pq.read_table(table, columns=columns)
    codes, widths = {}, {}
    for column in columns:
        values = data.column(column).to_numpy(zero_copy_only=False).astype(float)
        if column in bins:
            lo, hi, k = bins[column]
            codes[column] = np.minimum((np.clip((values - lo) / (hi - lo), 0, 1) * k).astype(int), k - 1)
            widths[column] = k
        else:
            codes[column] = values.astype(int)
            widths[column] = 2
    import pandas as pd

    frame = pd.DataFrame(codes)
    # Bins of width 1 centred on the codes 0..K-1: public, so no budget goes to the transformer.
    transformer = TableTransformer([BinTransformer(bins=widths[c], lower=-0.5, upper=widths[c] - 0.5)
                                    for c in columns])
    sample = peer_comparison().fit_and_sample("mst", frame, transformer, epsilon, seed)
    arrays = {}
    for column in columns:
        code = np.clip(np.round(sample[column].to_numpy(float)), 0, widths[column] - 1)
        if column in bins:
            lo, hi, k = bins[column]
            arrays[column] = lo + (code + 0.5) * (hi - lo) / k
        else:
            arrays[column] = code.astype(data.schema.field(column).type.to_pandas_dtype())
    pq.write_table(pa.table(arrays), output)


def evaluate(binary, directory, table, encoding_args, outputs):
    path = os.path.join(directory, "marginals.json")
    args = ["eval", "--real", table, "--marginals", "--json", path, "--quiet", *encoding_args]
    for output in outputs:
        args += ["--synth", output]
    run(binary, *args)
    with open(path) as handle:
        return json.load(handle)["comparisons"]


def table_rows(binary, directory, name, table, rows, encoding_args, numeric_args, mst_spec, seeds, baselines):
    """`numeric_args`: PMM's columns and bounds; `mst_spec`: (columns, {column: (lo, hi, bins)})."""
    results = []
    for seed in range(seeds):
        outputs, facts = [], []
        columns, bins = mst_spec
        for label, epsilon, kind, mechanism_args in method_runs(rows, baselines):
            stem = os.path.join(directory, f"{name}.{len(outputs)}.{seed}")
            output, diagnostics, report = stem + ".parquet", stem + ".diag.json", stem + ".report.json"
            if kind == "mst":
                started = time.time()
                subprocess.run([venv_python(), __file__, "--mst-worker", json.dumps(
                    [table, columns, bins, epsilon, seed, output])], check=True)
                facts.append((label, epsilon, time.time() - started, {}, None, {}))
                outputs.append(output)
                continue
            input_args = encoding_args if kind == "encoded" else numeric_args
            seconds = run(binary, "synth", table, "--output", output, "--diagnostics", diagnostics,
                          "--report", report, "--quiet", "--seed", str(seed), *input_args, *mechanism_args)
            if kind == "pmm" and not bins:  # every column is a bit
                round_bits(output)
            with open(diagnostics) as handle:
                diag = json.load(handle)
            with open(report) as handle:
                parameters = json.load(handle)["parameters"]
            phases = {phase["phase"]: phase["seconds"] for phase in diag["timings_seconds"]}
            facts.append((label, epsilon, seconds, phases, diag.get("peak_memory_bytes"), parameters))
            outputs.append(output)
        for (label, epsilon, seconds, phases, memory, parameters), comparison in zip(
                facts, evaluate(binary, directory, table, encoding_args, outputs)):
            degrees = {degree["degree"]: degree for degree in comparison["marginals"]["degrees"]}
            results.append({
                "table": name, "method": label, "seed": seed,
                "bits": comparison["marginals"]["bits"], "rows": comparison["marginals"]["real_rows"],
                "sqrt_mse_1": degrees[1]["root_mse"], "sqrt_mse_2": degrees[2]["root_mse"],
                "sqrt_mse_3": degrees[3]["root_mse"], "max_error_2": degrees[2]["max_abs_error"],
                "t": parameters.get("t"), "cells": parameters.get("cells"), "damping": parameters.get("damping"),
                "seconds": round(seconds, 3), "encode_seconds": round(phases.get("encode", 0.0), 3),
                "release_seconds": round(phases.get("release", 0.0), 3),
                "sample_seconds": round(phases.get("sample", 0.0), 3),
                "peak_memory_mib": round(memory / 2**20, 1) if memory else None,
            })
            for output in outputs:
                if os.path.exists(output):
                    os.remove(output)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="covloss_figures")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--bits", default="32,64")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--binary", default="target/release/dpsynth")
    parser.add_argument("--no-flights", action="store_true")
    parser.add_argument("--baselines", default="", help="comma-separated: pmm, mst")
    parser.add_argument("--mst-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mst_worker:
        table, columns, bins, epsilon, seed, output = json.loads(args.mst_worker)
        mst_worker(table, columns, bins, epsilon, seed, output)
        return
    baselines = [b for b in args.baselines.split(",") if b]
    if any(b not in ("pmm", "mst") for b in baselines):
        sys.exit(f"--baselines: pmm and mst, got {args.baselines}")
    os.makedirs(args.out, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for bits in [int(b) for b in args.bits.split(",")]:
            table = os.path.join(directory, f"latent_p{bits}.parquet")
            run(args.binary, "generate", table, "--rows", str(args.rows), "--dims", str(bits),
                "--law", "latent-class:4", "--seed", "1")
            names = [f"x{i}" for i in range(bits)]
            numeric = ["--columns", ",".join(names)] + [f"--bounds={name}=0:1" for name in names]
            results += table_rows(args.binary, directory, f"latent-class:4 p={bits}", table, args.rows,
                                  ["--columns", ",".join(names)], numeric, (names, {}), args.seeds, baselines)
        flights = os.path.join("datasets", "flights.parquet")
        if not args.no_flights and os.path.exists(flights):
            config = os.path.join("datasets", "flights.toml")
            numeric = ["--config", config, "--columns", FLIGHTS_COLUMNS]
            encoding = list(numeric)
            for bins in FLIGHTS_BINS:
                encoding += ["--bins", bins]
            import tomllib

            with open(config, "rb") as handle:
                bounds = tomllib.load(handle)["bounds"]
            mst_bins = {name: (*bounds[name], int(count))
                        for name, count in (entry.split("=") for entry in FLIGHTS_BINS)}
            results += table_rows(args.binary, directory, "flights (58 binned bits)", flights, 327_346,
                                  encoding, numeric, (FLIGHTS_COLUMNS.split(","), mst_bins), args.seeds, baselines)
    fields = list(results[0].keys())
    with open(os.path.join(args.out, "covloss_marginals.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(results)
    # The mean over seeds per (table, method), as a Markdown table.
    groups = {}
    for row in results:
        groups.setdefault((row["table"], row["method"]), []).append(row)
    lines = ["| table | method | sqrt MSE_2 | sqrt MSE_3 | max err_2 | t | cells | b | seconds | encode s | release s | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (table, method), rows in groups.items():
        mean = lambda key: sum(row[key] for row in rows) / len(rows)
        first = rows[0]
        lines.append(f"| {table} | {method} | {mean('sqrt_mse_2'):.4f} | {mean('sqrt_mse_3'):.4f} | "
                     f"{mean('max_error_2'):.3f} | {first['t']} | {first['cells']} | {first['damping'] or ''} | "
                     f"{mean('seconds'):.2f} | {mean('encode_seconds'):.2f} | {mean('release_seconds'):.2f} | "
                     f"{first['peak_memory_mib']} |")
    with open(os.path.join(args.out, "covloss_marginals.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
