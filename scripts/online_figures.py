#!/usr/bin/env python3
"""Online synthesis figures (issue 14): W1 of `dpsynth stream` releases against t, beside offline PMM.

For d = 1, 2, 3 at one ε, on a generated table (`dpsynth generate`, law --law) read as a stream:
`dpsynth stream` releases at doubling times t; each release is compared by `dpsynth eval --json` with the
first t rows (generated again with the same seed: rows are keyed by (seed, row group), so a shorter table
is a prefix), and so is `dpsynth synth` (PMM, --neighbours replace, same ε) on those t rows. Writes, under
--out:

  online.csv          one line per (d, seed, t): W1 online, W1 offline, their ratio, the theoretical rate
  online_slopes.csv   per d: fitted log-log slopes of mean W1 (online, offline) and of the rate
  w1_vs_t_d{d}.svg    log-log plot per d: online (solid), offline PMM (dashed), rate scaled to the first point
  scale.csv           with --scale N (d = 2): for each doubling t ≤ N, a fresh stream over the first t rows
                      with releases at the doubling times (seconds, elements/s, peak RSS from /usr/bin/time -v,
                      state size), then synth on the same N rows

Theory (Theorem 1.1): E W1 ≲ log(t)·(εt)^{-1/d} for d ≥ 2, log³(εt)·log^{1.5}(t)/(εt) for d = 1.
Standard library only; the dpsynth binary is built first if missing.

Usage: scripts/online_figures.py [--dims 1,2,3] [--epsilon 1] [--max-t 4096] [--seeds 2] [--scale N] [--out DIR]
"""

import argparse
import csv
import json
import math
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "dpsynth"
ROW_GROUP = 64
FIRST_T = 64


def run(command, timed=False):
    command = [str(part) for part in command]
    if timed:
        command = ["/usr/bin/time", "-v"] + command
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stderr}")
    rss = None
    if timed:
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
        rss = int(found.group(1)) * 1024 if found else None
    return seconds, rss


def generate(work, law, dims, rows, seed):
    path = work / f"{law}-d{dims}-n{rows}-s{seed}.parquet"
    if not path.exists():
        run([BINARY, "generate", path, "--rows", rows, "--dims", dims, "--law", law, "--seed", seed,
             "--row-group-rows", ROW_GROUP])
    return path


def bounds(dims):
    return [part for k in range(dims) for part in ("--bounds", f"x{k}=0:1")]


def w1(work, real, synth, dims):
    out = work / "eval.json"
    run([BINARY, "eval", "--real", real, "--synth", synth, *bounds(dims), "--json", out, "--quiet"])
    return json.loads(out.read_text())["w1"]["value"]


def rate(dims, epsilon, t):
    if dims == 1:
        return math.log(max(epsilon * t, math.e)) ** 3 * math.log(t) ** 1.5 / (epsilon * t)
    return math.log(t) * (epsilon * t) ** (-1 / dims)


def slope(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)


def accuracy(args, work, out):
    times = []
    t = FIRST_T
    while t <= args.max_t:
        times.append(t)
        t *= 2
    rows = []
    for dims in args.dims:
        for seed in range(args.seeds):
            data = generate(work, args.law, dims, times[-1], seed)
            releases = work / f"releases-d{dims}-s{seed}"
            state = work / f"state-d{dims}-s{seed}"
            state.unlink(missing_ok=True)
            run([BINARY, "stream", data, "--state", state, "--epsilon", args.epsilon, *bounds(dims),
                 "--release-at", ",".join(map(str, times)), "--output-dir", releases, "--seed", seed,
                 "--quiet"])
            for t in times:
                prefix = generate(work, args.law, dims, t, seed)
                offline = work / "offline.parquet"
                run([BINARY, "synth", prefix, *bounds(dims), "--epsilon", args.epsilon, "--neighbours",
                     "replace", "--seed", seed, "--output", offline, "--quiet"])
                online_w1 = w1(work, prefix, releases / f"release-{t}.parquet", dims)
                offline_w1 = w1(work, prefix, offline, dims)
                rows.append({"d": dims, "seed": seed, "t": t, "w1_online": online_w1,
                             "w1_offline": offline_w1, "ratio": online_w1 / offline_w1,
                             "rate": rate(dims, args.epsilon, t)})
                print(f"d={dims} seed={seed} t={t}: online {online_w1:.4f} offline {offline_w1:.4f}",
                      file=sys.stderr)
    with open(out / "online.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    means = defaultdict(lambda: defaultdict(list))
    for row in rows:
        means[row["d"]][row["t"]].append(row)
    with open(out / "online_slopes.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["d", "slope_online", "slope_offline", "slope_rate", "mean_ratio_online_offline"])
        for dims, by_t in sorted(means.items()):
            ts = sorted(by_t)
            online = [sum(r["w1_online"] for r in by_t[t]) / len(by_t[t]) for t in ts]
            offline = [sum(r["w1_offline"] for r in by_t[t]) / len(by_t[t]) for t in ts]
            theory = [rate(dims, args.epsilon, t) for t in ts]
            ratio = sum(a / b for a, b in zip(online, offline)) / len(ts)
            writer.writerow([dims, f"{slope(ts, online):.3f}", f"{slope(ts, offline):.3f}",
                             f"{slope(ts, theory):.3f}", f"{ratio:.2f}"])
            svg(out / f"w1_vs_t_d{dims}.svg", dims, args.epsilon, ts, online, offline, theory)


def svg(path, dims, epsilon, ts, online, offline, theory):
    width, height, margin = 640, 440, 60
    scaled = [r * online[0] / theory[0] for r in theory]
    ys = online + offline + scaled
    x0, x1 = math.log10(ts[0]), math.log10(ts[-1])
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))

    def px(t):
        return margin + (math.log10(t) - x0) / max(x1 - x0, 1e-9) * (width - 2 * margin)

    def py(y):
        return height - margin - (math.log10(y) - y0) / max(y1 - y0, 1e-9) * (height - 2 * margin)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">d = {dims}, epsilon = {epsilon}: '
           f'W1 against t</text>',
           f'<text x="{width / 2}" y="38" text-anchor="middle" font-size="11">blue: online release (stream); '
           f'red dashed: offline PMM on the first t rows; grey: Theorem 1.1 rate, scaled</text>']
    for decade in range(y0, y1 + 1):
        y = py(10 ** decade)
        out.append(f'<line x1="{margin}" y1="{y:.1f}" x2="{width - margin}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{margin - 6}" y="{y + 4:.1f}" text-anchor="end">1e{decade}</text>')
    for t in ts:
        out.append(f'<text x="{px(t):.1f}" y="{height - margin + 16}" text-anchor="middle">{t}</text>')
    out.append(f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">t (stream elements)</text>')
    for values, colour, dash in ((online, "#1b6ca8", ""), (offline, "#d1495b", ' stroke-dasharray="6 4"'),
                                 (scaled, "#888", ' stroke-dasharray="2 3"')):
        points = " ".join(f"{px(t):.1f},{py(v):.1f}" for t, v in zip(ts, values))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for t, v in zip(ts, values):
            out.append(f'<circle cx="{px(t):.1f}" cy="{py(v):.1f}" r="3" fill="{colour}"/>')
    out.append("</svg>")
    path.write_text("\n".join(out))


def scale(args, work, out):
    """Cost on the same rows: `stream` over the whole table (releases at doubling times) and `synth` on it;
    the state size at each doubling t from fresh streams over the first t rows."""
    rows = args.scale
    data = generate(work, args.law, 2, rows, 0)
    checkpoints = []  # doubling times up to the size asked
    t = 1024
    while t <= rows:
        checkpoints.append(t)
        t *= 2
    lines = []
    for t in checkpoints:
        prefix = generate(work, args.law, 2, t, 0)
        state = work / f"scale-{t}.state"
        state.unlink(missing_ok=True)
        seconds, rss = run([BINARY, "stream", prefix, "--state", state, "--epsilon", args.epsilon, *bounds(2),
                            "--release-at", ",".join(str(c) for c in checkpoints if c <= t),
                            "--output-dir", work / f"scale-releases-{t}", "--seed", 1, "--quiet"], timed=True)
        lines.append({"command": "stream", "t": t, "seconds": f"{seconds:.3f}",
                      "elements_per_second": f"{t / seconds:.1f}", "peak_rss_bytes": rss,
                      "state_bytes": state.stat().st_size})
        print(f"stream t={t}: {seconds:.2f}s, peak RSS {rss}, state {state.stat().st_size} B", file=sys.stderr)
    seconds, rss = run([BINARY, "synth", data, *bounds(2), "--epsilon", args.epsilon, "--neighbours", "replace",
                        "--seed", 1, "--output", work / "scale-synth.parquet", "--quiet"], timed=True)
    lines.append({"command": "synth", "t": rows, "seconds": f"{seconds:.3f}",
                  "elements_per_second": f"{rows / seconds:.1f}", "peak_rss_bytes": rss, "state_bytes": ""})
    stream_seconds = float(lines[-2]["seconds"])
    print(f"synth on the same {rows} rows: {seconds:.2f}s; stream/synth time ratio {stream_seconds / seconds:.1f}",
          file=sys.stderr)
    with open(out / "scale.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="1,2,3", type=lambda text: [int(part) for part in text.split(",")])
    parser.add_argument("--epsilon", default=1.0, type=float)
    parser.add_argument("--max-t", default=4096, type=int)
    parser.add_argument("--seeds", default=2, type=int)
    parser.add_argument("--law", default="mixture")
    parser.add_argument("--scale", type=int, help="also measure cost on this many d = 2 elements")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "target" / "online-figures"))
    args = parser.parse_args()
    if not BINARY.exists():
        run(["cargo", "build", "--release", "--quiet", "--manifest-path", ROOT / "Cargo.toml"])
    out = Path(args.out)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    if not args.skip_accuracy:
        accuracy(args, work, out)
    if args.scale:
        scale(args, work, out)


if __name__ == "__main__":
    main()
