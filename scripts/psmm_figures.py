#!/usr/bin/env python3
"""Figures for PSMM, as CSV (no plotting dependencies).

1. psmm_vs_pmm_w1.csv: W1 (from `dpsynth eval`) of PSMM and PMM at equal epsilon on generated data,
   d = 2, 3, 4, a few seeds each.
2. psmm_projection_time.csv: seconds of PSMM's projection (the min-cost flow, from the diagnostics)
   against the number of cells m, for d = 2 and 3.

Usage: scripts/psmm_figures.py [--out DIR] [--rows N] [--epsilon E] [--seeds 3] [--cells 1e4,3e4,1e5]
       [--timing-rows N] [--binary target/release/dpsynth]
Defaults finish in a few minutes on a 2-core machine; m = 10^6 takes 3-6 minutes per run there.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile


def run(binary, *args):
    result = subprocess.run([binary, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)}\n{result.stderr}")
    return result


def generate(binary, directory, rows, dims, seed):
    data = os.path.join(directory, f"data_d{dims}_n{rows}.parquet")
    schema = os.path.join(directory, f"bounds_d{dims}.toml")
    if not os.path.exists(data):
        run(binary, "generate", data, "--rows", str(rows), "--dims", str(dims), "--law", "mixture",
            "--seed", str(seed), "--schema", schema)
    return data, schema


def synth(binary, directory, data, schema, mechanism, epsilon, seed, extra=()):
    stem = os.path.join(directory, f"{os.path.basename(data)}.{mechanism}.{seed}")
    run(binary, "synth", data, "--config", schema, "--output", stem + ".parquet", "--epsilon", str(epsilon),
        "--mechanism", mechanism, "--seed", str(seed), "--report", stem + ".report.json",
        "--diagnostics", stem + ".diag.json", "--quiet", *extra)
    with open(stem + ".report.json") as f:
        report = json.load(f)
    with open(stem + ".diag.json") as f:
        diagnostics = json.load(f)
    return stem + ".parquet", report, diagnostics


def w1_figure(args, directory):
    rows_out = []
    for dims in (2, 3, 4):
        data, schema = generate(args.binary, directory, args.rows, dims, 1)
        for seed in range(1, args.seeds + 1):
            for mechanism in ("pmm", "psmm"):
                table, report, _ = synth(args.binary, directory, data, schema, mechanism, args.epsilon, seed)
                evaluation = os.path.join(directory, "eval.json")
                run(args.binary, "eval", "--real", data, "--synth", table, "--config", schema,
                    "--json", evaluation, "--quiet")
                with open(evaluation) as f:
                    w1 = json.load(f)["w1"]
                parameters = report["parameters"]
                partition = (f"depth {parameters['depth']}" if mechanism == "pmm"
                             else f"{parameters['cells']} cells")
                rows_out.append({
                    "d": dims, "rows": args.rows, "epsilon": args.epsilon, "seed": seed,
                    "mechanism": mechanism, "partition": partition,
                    "w1": w1["value"], "w1_lower": w1["lower"], "w1_upper": w1["upper"],
                    "w1_method": w1["method"],
                    "reported_bound": report["accuracy"]["expected_w1_bound"],
                })
                print(rows_out[-1], flush=True)
    return rows_out


def timing_figure(args, directory):
    rows_out = []
    for dims in (2, 3):
        data, schema = generate(args.binary, directory, args.timing_rows, dims, 2)
        for cells in args.cells:
            _, report, diagnostics = synth(args.binary, directory, data, schema, "psmm", args.epsilon, 1,
                                           ("--cells", str(int(float(cells))), "--neighbours", "replace"))
            parameters = report["parameters"]
            seconds = {t["phase"]: t["seconds"] for t in diagnostics["timings_seconds"]}
            k, m = parameters["cells_per_axis"], parameters["cells"]
            rows_out.append({
                "d": dims, "rows": args.timing_rows, "cells_per_axis": k, "cells": m,
                "arcs": (3 * k - 2) ** dims + 2 * m, "projection_seconds": seconds["projection"],
                "peak_memory_bytes": diagnostics["peak_memory_bytes"],
                "d_bl_to_noisy_measure": parameters["d_bl_to_noisy_measure"],
            })
            print(rows_out[-1], flush=True)
    return rows_out


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="psmm_figures")
    parser.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "dpsynth"))
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cells", type=lambda s: s.split(","), default=["1e4", "3e4", "1e5", "3e5"])
    parser.add_argument("--timing-rows", type=int, default=100_000)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as directory:
        write_csv(os.path.join(args.out, "psmm_vs_pmm_w1.csv"), w1_figure(args, directory))
        write_csv(os.path.join(args.out, "psmm_projection_time.csv"), timing_figure(args, directory))


if __name__ == "__main__":
    main()
