#!/usr/bin/env python3
"""The Python package against the CLI on the same table, side by side in one run (issue 19's figures).

For each repeat, in alternating order, each as its own process:
  cli     `dpsynth synth FILE --output OUT.parquet`                (read Parquet, synth, write Parquet)
  path    `dpsynth.synthesize("FILE")`  -> pyarrow.Table           (the same read; the table stays in memory)
  frame   `pq.read_table(FILE)` first, then `dpsynth.synthesize(table)` (the call alone is timed)
Each line gives wall seconds (median over repeats) and the ratio to the CLI. For `frame` it also gives
the resident memory the call added at its peak beside the input table's size: were the numeric columns
copied on the way in, the peak would grow by at least the input's size on top of the output table.

Usage: scripts/python_overhead.py [--rows 10000000] [--dims 4] [--repeats 3] [--python PYTHON]
PYTHON must have the package (pip install ./python); default: the running interpreter.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINARY = ROOT / "target" / "release" / "dpsynth"

CHILD = r"""
import json, resource, sys, time
import pyarrow.parquet as pq
import dpsynth
mode, path, bounds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096
data = pq.read_table(path) if mode == "frame" else path
before_rss = rss()
started = time.perf_counter()
table, report = dpsynth.synthesize(data, epsilon=1.0, bounds=bounds, seed=1, quiet=True)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "rows": table.num_rows, "peak_added": peak - before_rss,
                  "input_bytes": data.nbytes if mode == "frame" else 0, "output_bytes": table.nbytes}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dims", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        table, schema = scratch / "table.parquet", scratch / "bounds.toml"
        subprocess.run([BINARY, "generate", table, "--rows", str(arguments.rows), "--dims", str(arguments.dims),
                        "--schema", schema], check=True)
        import tomllib

        bounds = tomllib.loads(schema.read_text())["bounds"]
        flags = [word for column, (lo, hi) in bounds.items() for word in ("--bounds", f"{column}={lo}:{hi}")]
        seconds = {"cli": [], "path": [], "frame": []}
        memory = []
        for repeat in range(arguments.repeats):
            order = ["cli", "path", "frame"] if repeat % 2 == 0 else ["frame", "path", "cli"]
            for mode in order:
                if mode == "cli":
                    started = time.perf_counter()
                    subprocess.run([BINARY, "synth", table, "--output", scratch / "out.parquet", "--epsilon", "1",
                                    "--seed", "1", "--quiet", *flags], check=True)
                    seconds["cli"].append(time.perf_counter() - started)
                    continue
                done = subprocess.run([arguments.python, "-c", CHILD, mode, table, json.dumps(bounds)],
                                      check=True, capture_output=True, text=True)
                result = json.loads(done.stdout)
                seconds[mode].append(result["seconds"])
                if mode == "frame":
                    memory.append(result)
        cli = statistics.median(seconds["cli"])
        print(f"{arguments.rows} rows, d = {arguments.dims}, {arguments.repeats} repeats, medians; "
              f"{os.cpu_count()} cores")
        for mode, label in [("cli", "CLI synth (Parquet in, Parquet out)"),
                            ("path", "dpsynth.synthesize(path) -> pyarrow.Table"),
                            ("frame", "dpsynth.synthesize(pyarrow.Table) -> pyarrow.Table")]:
            median = statistics.median(seconds[mode])
            print(f"  {label:<52} {median:7.3f} s   {median / cli:5.2f} x CLI")
        peak = statistics.median(result["peak_added"] for result in memory)
        print(f"  frame: peak resident memory added by the call {peak / 2**20:,.0f} MiB; input table "
              f"{memory[0]['input_bytes'] / 2**20:,.0f} MiB, output table {memory[0]['output_bytes'] / 2**20:,.0f} MiB")


if __name__ == "__main__":
    main()
