#!/usr/bin/env python3
"""Accuracy against theory: W1 of PMM's synthetic data against n, beside the proven bound.

For d = 1, 2, 3 and several ε, on generated tables (`dpsynth generate`, a fixed law) of growing n:
synthesise with `dpsynth synth --mechanism pmm` (the textbook tree, whose bound the report proves; other
options at their defaults), measure W1 with `dpsynth eval`, and read the bound the run report states
(Theorem 3.9 for the schedule used, which with the optimal σ_j of eq. 3.7 is Theorem 3.10's
(√2/(εn))·S² + 2^-⌊r/d⌋ form). Writes, under --out:

  accuracy.csv      one line per run: d, ε, n, seed, W1 (headline, lower, upper, method), bound
  slopes.csv        per (d, ε): fitted log-log slope of mean W1 against n, of the bound, and theory's slope
  slopes.md         the same as a Markdown table
  w1_vs_n_d{d}.svg  log-log plot per d: measured W1 (points, with the sandwich range) and the bound (dashed)

Theory: E W1 ≍ (εn)^{-1/d} for d ≥ 2, and (log²(εn))/(εn) for d = 1 (slope −1 up to the log factor).
Only the standard library is needed; the dpsynth binary is built first if missing.

Usage: scripts/accuracy_vs_theory.py [--quick] [--dims 1,2,3] [--epsilons 0.5,1,4] [--seeds 3] [--out DIR]
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "dpsynth"

# Row counts: half-decades from 10^3; the quick set stops at 10^5 (a minute or two on 2 cores).
FULL_ROWS = [1_000, 3_162, 10_000, 31_623, 100_000, 316_228, 1_000_000]
QUICK_ROWS = [1_000, 3_162, 10_000, 31_623, 100_000]
# The law of the generated rows: a Gaussian mixture, neither uniform (too easy) nor a point mass.
LAW = "mixture"


def run(command):
    command = [str(part) for part in command]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stderr}")
    return result


def ensure_binary():
    if not BINARY.exists():
        run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(ROOT / "Cargo.toml")])


def table(work, dims, rows, seed):
    """The generated input (cached) and its public-bounds config."""
    path = work / f"{LAW}-d{dims}-n{rows}-s{seed}.parquet"
    schema = path.with_suffix(".toml")
    if not path.exists():
        run([BINARY, "generate", path, "--rows", rows, "--dims", dims, "--law", LAW,
             "--seed", seed, "--schema", schema])
    return path, schema


def one_run(work, dims, epsilon, rows, seed):
    data, schema = table(work, dims, rows, seed)
    synth = work / f"synth-d{dims}-e{epsilon}-n{rows}-s{seed}.parquet"
    report = synth.with_suffix(".report.json")
    evaluation = synth.with_suffix(".eval.json")
    run([BINARY, "synth", data, "--config", schema, "--mechanism", "pmm", "--epsilon", epsilon, "--seed", seed,
         "--output", synth, "--report", report, "--quiet"])
    run([BINARY, "eval", "--real", data, "--synth", synth, "--config", schema,
         "--json", evaluation, "--quiet"])
    bound = json.loads(report.read_text())["accuracy"]["expected_w1_bound"]
    w1 = json.loads(evaluation.read_text())["w1"]
    for path in (synth, report, evaluation):
        path.unlink()
    return {
        "d": dims, "epsilon": epsilon, "n": rows, "seed": seed,
        "w1": w1["value"], "w1_lower": w1["lower"], "w1_upper": w1["upper"],
        "w1_method": w1["method"], "bound": bound,
    }


def fitted_slope(xs, ys):
    """Least-squares slope of log y against log x."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sxx


def theory_slope(dims):
    return "-1 (x log^2)" if dims == 1 else f"-1/{dims} = {-1 / dims:.3f}"


def svg_plot(path, dims, series):
    """A log-log plot. series: {epsilon: [(n, mean w1, min lower, max upper, bound)]}."""
    width, height, margin = 640, 440, 60
    points = [p for rows in series.values() for p in rows]
    xs = [p[0] for p in points]
    ys = [v for p in points for v in (p[1], p[2], p[3], p[4]) if v > 0]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))

    def px(n):
        return margin + (math.log10(n) - x0) / max(x1 - x0, 1e-9) * (width - 2 * margin)

    def py(y):
        return height - margin - (math.log10(y) - y0) / max(y1 - y0, 1e-9) * (height - 2 * margin)

    colours = ["#1b6ca8", "#d1495b", "#2e8b57", "#edae49", "#6a4c93"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">'
           f'PMM, d = {dims}: W1 against n</text>',
           f'<text x="{width / 2}" y="38" text-anchor="middle" font-size="11">points: mean W1 over seeds; '
           f'bars: range that holds for the true W1; dashed: the report\'s bound</text>']
    for decade in range(y0, y1 + 1):
        y = py(10 ** decade)
        out.append(f'<line x1="{margin}" y1="{y:.1f}" x2="{width - margin}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{margin - 6}" y="{y + 4:.1f}" text-anchor="end">1e{decade}</text>')
    for decade in range(math.ceil(x0), math.floor(x1) + 1):
        x = px(10 ** decade)
        out.append(f'<line x1="{x:.1f}" y1="{margin}" x2="{x:.1f}" y2="{height - margin}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{height - margin + 16}" text-anchor="middle">1e{decade}</text>')
    out.append(f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">n (rows)</text>')
    out.append(f'<text x="15" y="{height / 2}" transform="rotate(-90 15 {height / 2})" '
               f'text-anchor="middle">W1 (normalised l-infinity)</text>')
    for index, (epsilon, rows) in enumerate(sorted(series.items())):
        colour = colours[index % len(colours)]
        rows = sorted(rows)
        measured = " ".join(f"{px(n):.1f},{py(w):.1f}" for n, w, _, _, _ in rows)
        bound = " ".join(f"{px(n):.1f},{py(b):.1f}" for n, _, _, _, b in rows)
        out.append(f'<polyline points="{measured}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<polyline points="{bound}" fill="none" stroke="{colour}" stroke-dasharray="6 4"/>')
        for n, w, lower, upper, _ in rows:
            out.append(f'<line x1="{px(n):.1f}" y1="{py(max(lower, 10 ** y0)):.1f}" x2="{px(n):.1f}" '
                       f'y2="{py(upper):.1f}" stroke="{colour}" stroke-opacity="0.5"/>')
            out.append(f'<circle cx="{px(n):.1f}" cy="{py(w):.1f}" r="3" fill="{colour}"/>')
        ly = margin + 18 * index + 10
        out.append(f'<line x1="{width - margin - 110}" y1="{ly}" x2="{width - margin - 85}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{width - margin - 80}" y="{ly + 4}">epsilon = {epsilon:g}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n up to 10^5 only")
    parser.add_argument("--dims", default="1,2,3")
    parser.add_argument("--epsilons", default="0.5,1,4")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "accuracy")
    parser.add_argument("--replot", action="store_true",
                        help="recompute slopes and plots from the accuracy.csv already under --out")
    args = parser.parse_args()
    dims_list = [int(d) for d in args.dims.split(",")]
    epsilons = [float(e) for e in args.epsilons.split(",")]
    rows_list = QUICK_ROWS if args.quick else FULL_ROWS
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    if args.replot:
        summarise(args.out, read_results(args.out / "accuracy.csv"))
        return
    ensure_binary()

    results = []
    for dims in dims_list:
        for epsilon in epsilons:
            for rows in rows_list:
                for seed in range(1, args.seeds + 1):
                    result = one_run(work, dims, epsilon, rows, seed)
                    results.append(result)
                    print(f"d={dims} eps={epsilon:g} n={rows} seed={seed}: W1 {result['w1']:.5f} "
                          f"({result['w1_method']}) bound {result['bound']:.5f}", flush=True)
    with open(args.out / "accuracy.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows(results)
    summarise(args.out, results)


def read_results(path):
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    for row in rows:
        for key in ("d", "n", "seed"):
            row[key] = int(row[key])
        for key in ("epsilon", "w1", "w1_lower", "w1_upper", "bound"):
            row[key] = float(row[key])
    return rows


def summarise(out, results):
    """Slopes (CSV, Markdown) and plots from the per-run results."""
    grouped = defaultdict(lambda: defaultdict(list))
    for result in results:
        grouped[(result["d"], result["epsilon"])][result["n"]].append(result)
    slope_rows = []
    plots = defaultdict(dict)
    for (dims, epsilon), by_rows in sorted(grouped.items()):
        series = []
        for rows, runs in sorted(by_rows.items()):
            mean = sum(r["w1"] for r in runs) / len(runs)
            series.append((rows, mean, min(r["w1_lower"] for r in runs),
                           max(r["w1_upper"] for r in runs), runs[0]["bound"]))
        plots[dims][epsilon] = series
        ns = [s[0] for s in series]
        slope_rows.append({
            "d": dims, "epsilon": epsilon,
            "fitted_slope": round(fitted_slope(ns, [s[1] for s in series]), 3),
            # The ends of the interval that provably holds for W1 (exact methods: both equal W1).
            "lower_end_slope": round(fitted_slope(ns, [max(s[2], 1e-12) for s in series]), 3),
            "upper_end_slope": round(fitted_slope(ns, [s[3] for s in series]), 3),
            "bound_slope": round(fitted_slope(ns, [s[4] for s in series]), 3),
            "theoretical_slope": theory_slope(dims),
            "n_range": f"{min(ns)}..{max(ns)}",
            # How loose the W1 estimates are: the largest upper/lower ratio among the runs fitted.
            "max_upper_over_lower": round(max(r["w1_upper"] / r["w1_lower"] for runs in by_rows.values()
                                              for r in runs if r["w1_lower"] > 0), 2),
            "methods": "/".join(sorted({r["w1_method"] for runs in by_rows.values() for r in runs})),
        })
    with open(out / "slopes.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(slope_rows[0]))
        writer.writeheader()
        writer.writerows(slope_rows)
    lines = ["| d | ε | fitted slope (W1) | slope of lower / upper end | slope of the bound | theoretical slope "
             "| n | W1 method | max upper/lower |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['d']} | {r['epsilon']:g} | {r['fitted_slope']} | {r['lower_end_slope']} / "
              f"{r['upper_end_slope']} | {r['bound_slope']} | "
              f"{r['theoretical_slope']} | {r['n_range']} | {r['methods']} | {r['max_upper_over_lower']} |"
              for r in slope_rows]
    (out / "slopes.md").write_text("\n".join(lines) + "\n")
    for dims, series in plots.items():
        svg_plot(out / f"w1_vs_n_d{dims}.svg", dims, series)
    print("\n".join(lines))
    print(f"written: {out}/accuracy.csv, slopes.csv, slopes.md, w1_vs_n_d*.svg")


if __name__ == "__main__":
    main()
