#!/usr/bin/env python3
"""Private Evolution figures: the paper's Figures 2-4 at small scale, and PE against PMM and PSMM.

Drives the dpsynth CLI only (python3 standard library). Writes CSV files, hand-written SVG plots and
claims.txt (the paper's qualitative claims, each PASS or FAIL) to --out.

Paper setup (seed 003, §6 / App. E; docs/mechanisms/pe.md): the unit disc (here the ball inscribed in
[0,1]^2, `--pe-domain ball`, data from `dpsynth generate --law ball:R`), epsilon = 1, delta = 1e-4,
T = round(2 ln(n epsilon)), every other parameter from Theorem 4.1, the threshold-at-0 variant ("PE").
W1 is `dpsynth eval`'s headline W1 in normalised l-infinity units (the paper plots l2; the claims are
about shapes, which both metrics show). Means over --runs runs with standard errors.

- fig2.csv / fig2.svg: W1 of the last iterate against T, from S_0 = S (the data itself: a diagnostic,
  NOT private), from the centre, and against beta for S_0 = (1 - 2 beta) S (left, middle, right).
  dpsynth releases only the last iterate, so "W1 against t" is read as W1 of T-step runs, each
  recalibrated for its T (as the paper's Figure 3 does).
- fig3.csv / fig3.svg: W1 against T and against n_s, predicted values marked.
- fig4.csv / fig4.svg: threshold ("PE") against laplace-threshold on the radius-0.02 and radius-0.5 balls.
- compare.csv / compare.svg: PE (each variant) against PMM and PSMM at the same epsilon (PMM and PSMM
  are pure epsilon-DP, delta = 0; PE gets delta too), under --neighbours replace, on the bundled flights
  table (2 and 3 columns) and a generated mixture (--mixture-rows): W1, seconds, peak memory
  (/usr/bin/time -v).

Usage: scripts/pe_figures.py [--out DIR] [--runs 3] [--binary target/release/dpsynth]
       [--sizes 1000,3000,10000] [--fig2-rows 3000] [--mixture-rows 100000] [--skip-paper]
       [--skip-compare] [--skip-flights]
"""

import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

EPSILON = 1.0
DELTA = 1e-4


def run(binary, *args):
    result = subprocess.run([binary, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"dpsynth {' '.join(args)}\n{result.stderr}")
    return result


def timed(binary, *args):
    """Runs dpsynth under /usr/bin/time -v: (seconds, peak resident MiB)."""
    started = time.monotonic()
    result = subprocess.run(["/usr/bin/time", "-v", binary, *args], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        return None, None, result.stderr.strip().splitlines()[0] if result.stderr else "failed"
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    return seconds, int(peak.group(1)) / 1024 if peak else None, None


def generate(binary, directory, name, rows, law, seed, dims=2):
    table = os.path.join(directory, f"{name}.parquet")
    schema = os.path.join(directory, f"{name}.toml")
    run(binary, "generate", table, "--rows", str(rows), "--dims", str(dims), "--law", law,
        "--seed", str(seed), "--schema", schema)
    return table, schema


def synth(binary, directory, table, schema, seed, extra):
    output = os.path.join(directory, "synth.parquet")
    report = os.path.join(directory, "report.json")
    run(binary, "synth", table, "--config", schema, "--output", output, "--report", report,
        "--seed", str(seed), "--epsilon", str(EPSILON), "--neighbours", "replace", "--quiet", *extra)
    with open(report) as handle:
        return output, json.load(handle)


def w1(binary, directory, real, synthetic, schema):
    path = os.path.join(directory, "eval.json")
    run(binary, "eval", "--real", real, "--synth", synthetic, "--config", schema, "--json", path,
        "--subsample-repeats", "0", "--quiet")
    with open(path) as handle:
        return json.load(handle)["w1"]["value"]


def pe_args(*extra):
    return ["--mechanism", "pe", "--delta", str(DELTA), "--pe-domain", "ball", *extra]


def mean_se(values):
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return mean, se


def predicted_steps(n):
    return max(1, round(2 * math.log(n * EPSILON)))


def paper_run(binary, directory, n, law, seed, extra, init_law=None):
    """One PE run on fresh data; returns (W1, report). `init_law` writes S_0 from the same seed."""
    table, schema = generate(binary, directory, "data", n, law, seed)
    if init_law is not None:
        init, _ = generate(binary, directory, "init", n, init_law, seed)
        extra = [*extra, "--pe-init", init]
    output, report = synth(binary, directory, table, schema, 1000 + seed, pe_args(*extra))
    return w1(binary, directory, table, output, schema), report


def averaged(binary, directory, runs, n, law, extra, init_law=None):
    values = [paper_run(binary, directory, n, law, seed, extra, init_law)[0] for seed in range(1, runs + 1)]
    return mean_se(values)


def figure2(binary, directory, runs, n, out):
    rows = []
    steps = [1, 2, 4, 8, predicted_steps(n)]
    for panel, init in [("S0=S (diagnostic)", "ball:1"), ("S0=centre", None)]:
        for t in steps:
            extra = ["--pe-steps", str(t)] + (["--pe-init", "centre"] if init is None else [])
            mean, se = averaged(binary, directory, runs, n, "ball:1", extra, init)
            rows.append({"panel": panel, "x": t, "w1": mean, "se": se})
    for beta in [0.0, 0.125, 0.25, 0.375, 0.5]:
        extra = ["--pe-steps", str(predicted_steps(n))]
        if beta < 0.5:
            mean, se = averaged(binary, directory, runs, n, "ball:1", extra, f"ball:{1 - 2 * beta}")
        else:
            mean, se = averaged(binary, directory, runs, n, "ball:1", extra + ["--pe-init", "centre"])
        rows.append({"panel": "S0=(1-2beta)S", "x": beta, "w1": mean, "se": se})
    write_csv(os.path.join(out, "fig2.csv"), rows)
    return rows


def figure3(binary, directory, runs, sizes, out):
    rows = []
    for n in sizes:
        best = predicted_steps(n)
        for t in sorted({max(1, best // 4), max(1, best // 2), best, 2 * best, 3 * best}):
            mean, se = averaged(binary, directory, runs, n, "ball:1", ["--pe-steps", str(t)])
            rows.append({"panel": "T", "n": n, "x": t, "predicted": best, "w1": mean, "se": se})
        _, report = paper_run(binary, directory, n, "ball:1", 1, [])
        samples = report["parameters"]["samples"]
        for factor in [0.125, 0.25, 0.5, 1, 2, 4, 8]:
            count = max(1, round(samples * factor))
            mean, se = averaged(binary, directory, runs, n, "ball:1", ["--pe-samples", str(count)])
            rows.append({"panel": "n_s", "n": n, "x": count, "predicted": samples, "w1": mean, "se": se})
    write_csv(os.path.join(out, "fig3.csv"), rows)
    return rows


def figure4(binary, directory, runs, sizes, out):
    rows = []
    for radius in ["0.02", "0.5"]:
        for variant in ["threshold", "laplace-threshold"]:
            for n in sizes:
                mean, se = averaged(binary, directory, runs, n, f"ball:{radius}", ["--pe-variant", variant])
                rows.append({"panel": f"radius {radius}", "series": variant, "x": n, "w1": mean, "se": se})
    write_csv(os.path.join(out, "fig4.csv"), rows)
    return rows


def compare(binary, directory, mixture_rows, out, with_flights, only_methods, device):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    flights = os.path.join(root, "datasets", "flights.parquet")
    flights_schema = os.path.join(root, "datasets", "flights.toml")
    mixture, mixture_schema = generate(binary, directory, "mixture", mixture_rows, "mixture", 7)
    tables = [
        ("flights 2 columns", flights, flights_schema, ["--columns", "dep_delay,arr_delay"]),
        ("flights 3 columns", flights, flights_schema, ["--columns", "dep_delay,arr_delay,air_time"]),
    ] if with_flights else []
    tables.append((f"mixture n={mixture_rows} d=2", mixture, mixture_schema, []))
    methods = [
        ("pmm", ["--mechanism", "pmm"]),
        ("psmm", ["--mechanism", "psmm"]),
        ("pe threshold", ["--mechanism", "pe", "--delta", str(DELTA), "--pe-variant", "threshold"]),
        ("pe laplace-threshold", ["--mechanism", "pe", "--delta", str(DELTA), "--pe-variant", "laplace-threshold"]),
        ("pe projection (n_s=100)", ["--mechanism", "pe", "--delta", str(DELTA), "--pe-variant", "projection",
                                     "--pe-samples", "100"]),
    ]
    if only_methods:
        methods = [(method, args) for method, args in methods if method.split(" (")[0] in only_methods]
    methods = [(method, args + (["--device", device] if method.startswith("pe") else []))
               for method, args in methods]
    rows = []
    for label, table, schema, columns in tables:
        for method, args in methods:
            output = os.path.join(directory, "compare.parquet")
            report = os.path.join(directory, "compare.json")
            seconds, peak, error = timed(binary, "synth", table, "--config", schema, *columns, "--output", output,
                                         "--report", report, "--epsilon", str(EPSILON), "--neighbours",
                                         "replace", "--seed", "1", "--quiet", *args)
            row = {"table": label, "method": method, "seconds": seconds, "peak_mib": peak, "w1": None,
                   "note": error or ""}
            if error is None:
                evaluation = os.path.join(directory, "compare_eval.json")
                run(binary, "eval", "--real", table, "--synth", output, "--config", schema, *columns,
                    "--json", evaluation, "--subsample-repeats", "0", "--quiet")
                with open(evaluation) as handle:
                    row["w1"] = json.load(handle)["w1"]["value"]
                with open(report) as handle:
                    parameters = json.load(handle)["parameters"]
                if "samples" in parameters:
                    row["note"] = (f"T={parameters['steps']} n_s={parameters['samples']} "
                                   f"candidates={parameters['candidates_per_step']}")
            rows.append(row)
            print(f"  {label:28} {method:26} W1 {row['w1']} {seconds}s {peak} MiB {row['note']}", flush=True)
    write_csv(os.path.join(out, "compare.csv"), rows)
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)


COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def svg_panels(path, title, panels):
    """panels: [(panel title, x label, log_x, {series: [(x, y, se)]}, marker_x or None)]."""
    width, height, margin = 360, 260, 50
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width * len(panels)}" height="{height + 30}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="10" y="16" font-size="13">{title}</text>']
    for index, (name, xlabel, log_x, series, marker) in enumerate(panels):
        left = index * width + margin
        points = [p for values in series.values() for p in values]
        if not points:
            continue
        fx = (lambda x: math.log10(x)) if log_x else (lambda x: x)
        xs = [fx(p[0]) for p in points]
        ys = [p[1] + p[2] for p in points] + [p[1] - p[2] for p in points]
        x0, x1 = min(xs), max(xs)
        y0, y1 = 0.0, max(ys) * 1.1
        x1 = x1 if x1 > x0 else x0 + 1
        sx = lambda x: left + (fx(x) - x0) / (x1 - x0) * (width - margin - 20)
        sy = lambda y: 30 + (1 - (y - y0) / (y1 - y0)) * (height - margin - 10)
        parts.append(f'<text x="{left}" y="{30 - 6}">{name}</text>')
        parts.append(f'<rect x="{left}" y="30" width="{width - margin - 20}" height="{height - margin - 10}" '
                     'fill="none" stroke="#999"/>')
        for k in range(5):
            y = y0 + (y1 - y0) * k / 4
            parts.append(f'<text x="{left - 4}" y="{sy(y) + 4}" text-anchor="end">{y:.3g}</text>')
        for x in sorted({p[0] for p in points}):
            parts.append(f'<text x="{sx(x)}" y="{height - margin + 34}" text-anchor="middle">{x:g}</text>')
        parts.append(f'<text x="{left + (width - margin) / 2}" y="{height + 24}" text-anchor="middle">{xlabel}</text>')
        if marker is not None:
            parts.append(f'<line x1="{sx(marker)}" x2="{sx(marker)}" y1="30" y2="{height - 20}" '
                         'stroke="#444" stroke-dasharray="4 3"/>')
        for colour, (label, values) in zip(COLOURS * 4, series.items()):
            values = sorted(values)
            line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _ in values)
            parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
            for x, y, se in values:
                parts.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{sy(y - se):.1f}" '
                             f'y2="{sy(y + se):.1f}" stroke="{colour}"/>')
                parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>')
        for k, (colour, label) in enumerate(zip(COLOURS * 4, series)):
            parts.append(f'<text x="{left + 8}" y="{44 + 13 * k}" fill="{colour}">{label}</text>')
    parts.append("</svg>")
    with open(path, "w") as handle:
        handle.write("\n".join(parts))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="pe_figures")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--binary", default="target/release/dpsynth")
    parser.add_argument("--sizes", default="1000,3000,10000")
    parser.add_argument("--fig2-rows", type=int, default=3000)
    parser.add_argument("--mixture-rows", type=int, default=100_000)
    parser.add_argument("--skip-paper", action="store_true")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--skip-flights", action="store_true",
                        help="compare on the generated mixture only")
    parser.add_argument("--methods", default="",
                        help="compare only these (comma-separated: pmm, psmm, pe threshold, pe laplace-threshold, "
                             "pe projection); default all")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"],
                        help="where PE counts its nearest neighbours in the comparison")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sizes = [int(size) for size in args.sizes.split(",")]
    claims = []
    with tempfile.TemporaryDirectory() as directory:
        if not args.skip_paper:
            started = time.monotonic()
            fig2 = figure2(args.binary, directory, args.runs, args.fig2_rows, args.out)
            by_panel = {}
            for row in fig2:
                by_panel.setdefault(row["panel"], []).append((row["x"], row["w1"], row["se"]))
            svg_panels(os.path.join(args.out, "fig2.svg"), f"Figure 2 (n = {args.fig2_rows}): W1 of the last iterate",
                       [(panel, "beta" if "beta" in panel else "T", False, {"PE": values}, None)
                        for panel, values in by_panel.items()])
            same = sorted(by_panel["S0=S (diagnostic)"])
            centre = sorted(by_panel["S0=centre"])
            claims.append(("Fig 2 left: from S_0 = S, W1 grows with the number of steps",
                           same[-1][1] > same[0][1]))
            claims.append(("Fig 2 middle: from the origin, W1 falls with the number of steps",
                           centre[-1][1] < centre[0][1]))
            print(f"figure 2: {time.monotonic() - started:.0f} s", flush=True)

            started = time.monotonic()
            fig3 = figure3(args.binary, directory, args.runs, sizes, args.out)
            panels = []
            for panel in ["T", "n_s"]:
                series = {}
                for row in fig3:
                    if row["panel"] == panel:
                        series.setdefault(f"n={row['n']}", []).append((row["x"], row["w1"], row["se"]))
                panels.append((f"W1 against {panel} (markers: predicted, largest n)", panel, True, series,
                               [r["predicted"] for r in fig3 if r["panel"] == panel][-1]))
                for n in sizes:
                    rows = [r for r in fig3 if r["panel"] == panel and r["n"] == n]
                    at_predicted = [r["w1"] for r in rows if r["x"] == r["predicted"]][0]
                    best = min(r["w1"] for r in rows)
                    claims.append((f"Fig 3 {panel}: at n = {n} the predicted {panel} is within 20 % of the "
                                   f"sweep's minimum ({at_predicted:.4f} vs {best:.4f})", at_predicted <= 1.2 * best))
            svg_panels(os.path.join(args.out, "fig3.svg"), "Figure 3: sensitivity to T and n_s", panels)
            print(f"figure 3: {time.monotonic() - started:.0f} s", flush=True)

            started = time.monotonic()
            fig4 = figure4(args.binary, directory, args.runs, sizes, args.out)
            panels = []
            for radius in ["0.02", "0.5"]:
                series = {}
                for row in fig4:
                    if row["panel"] == f"radius {radius}":
                        series.setdefault(row["series"], []).append((row["x"], row["w1"], row["se"]))
                panels.append((f"data in the radius-{radius} ball", "n", True, series, None))
                largest = {s: sorted(v)[-1][1] for s, v in series.items()}
                better = largest["laplace-threshold"] < largest["threshold"]
                claims.append((f"Fig 4 radius {radius}: laplace-threshold "
                               f"{'beats' if radius == '0.02' else 'loses to'} threshold at n = {sizes[-1]} "
                               f"({largest['laplace-threshold']:.4f} vs {largest['threshold']:.4f})",
                               better if radius == "0.02" else not better))
            svg_panels(os.path.join(args.out, "fig4.svg"), "Figure 4: Gaussian truncate-at-0 vs Laplace + threshold",
                       panels)
            print(f"figure 4: {time.monotonic() - started:.0f} s", flush=True)
        if not args.skip_compare:
            only = {method.strip() for method in args.methods.split(",") if method.strip()}
            rows = compare(args.binary, directory, args.mixture_rows, args.out, not args.skip_flights, only,
                           args.device)
            panels = []
            for table in dict.fromkeys(r["table"] for r in rows):
                series = {r["method"]: [(k + 1, r["w1"], 0.0)] for k, r in enumerate(rows)
                          if r["table"] == table and r["w1"] is not None}
                panels.append((table, "method (see legend order)", False, series, None))
            svg_panels(os.path.join(args.out, "compare.svg"), f"W1 at epsilon = {EPSILON} (PE: delta = {DELTA})", panels)
    with open(os.path.join(args.out, "claims.txt"), "w") as handle:
        for claim, holds in claims:
            line = f"{'PASS' if holds else 'FAIL'}  {claim}"
            print(line)
            handle.write(line + "\n")


if __name__ == "__main__":
    main()
