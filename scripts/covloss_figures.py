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
and scores each output with `dpsynth eval --marginals` (sqrt MSE_2, sqrt MSE_3, exact for p <= 64), with
the synth run's seconds per phase (encode = plain decode and bit packing; release = second moment, cells,
noise) and peak memory from its diagnostics.

Usage: scripts/covloss_figures.py [--out DIR] [--rows N] [--bits 32,64] [--seeds 2]
       [--binary target/release/dpsynth] [--no-flights]
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


def method_runs(rows):
    runs = []
    for epsilon in (0.5, 1.0, 4.0):
        for damping in ("paper", "cells"):
            runs.append((f"covloss eps={epsilon} b={damping}", epsilon,
                         ["--mechanism", "covloss", "--epsilon", str(epsilon), "--neighbours", "replace",
                          "--damping", damping]))
    for k in (10, 100, 1000):
        runs.append((f"microagg k={k}", None, ["--mechanism", "microagg", "--k", str(k)]))
    for epsilon in (0.5, 1.0, 4.0):
        runs.append((f"independent bits eps={epsilon}", epsilon,
                     ["--mechanism", "covloss", "--epsilon", str(epsilon), "--neighbours", "replace",
                      "--covloss-t", "0", "--damping", str(rows), "--covloss-shares", "0.001,0.001,1"]))
    return runs


def evaluate(binary, directory, table, encoding_args, outputs):
    path = os.path.join(directory, "marginals.json")
    args = ["eval", "--real", table, "--marginals", "--json", path, "--quiet", *encoding_args]
    for output in outputs:
        args += ["--synth", output]
    run(binary, *args)
    with open(path) as handle:
        return json.load(handle)["comparisons"]


def table_rows(binary, directory, name, table, rows, encoding_args, seeds):
    results = []
    for seed in range(seeds):
        outputs, facts = [], []
        for label, epsilon, mechanism_args in method_runs(rows):
            stem = os.path.join(directory, f"{name}.{len(outputs)}.{seed}")
            output, diagnostics, report = stem + ".parquet", stem + ".diag.json", stem + ".report.json"
            seconds = run(binary, "synth", table, "--output", output, "--diagnostics", diagnostics,
                          "--report", report, "--quiet", "--seed", str(seed), *encoding_args, *mechanism_args)
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
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for bits in [int(b) for b in args.bits.split(",")]:
            table = os.path.join(directory, f"latent_p{bits}.parquet")
            run(args.binary, "generate", table, "--rows", str(args.rows), "--dims", str(bits),
                "--law", "latent-class:4", "--seed", "1")
            columns = ",".join(f"x{i}" for i in range(bits))
            results += table_rows(args.binary, directory, f"latent-class:4 p={bits}", table, args.rows,
                                  ["--columns", columns], args.seeds)
        flights = os.path.join("datasets", "flights.parquet")
        if not args.no_flights and os.path.exists(flights):
            encoding = ["--config", os.path.join("datasets", "flights.toml"), "--columns", FLIGHTS_COLUMNS]
            for bins in FLIGHTS_BINS:
                encoding += ["--bins", bins]
            results += table_rows(args.binary, directory, "flights (58 binned bits)", flights, 327_346,
                                  encoding, args.seeds)
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
