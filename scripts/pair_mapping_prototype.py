#!/usr/bin/env python3
"""Prototype, issue 20: would released 2-way marginals, enforced by conditional rank mapping, close the 2-way gap?

The engine now has the gated design (`dpsynth synth --pair-share S`, src/mechanism/pmm/pairs.rs); this
script stays for the variants it measured that the engine does not run (ungated mapping, other S, B and
thresholds). A measurement, NOT a differentially private implementation: the pair histograms get
numpy's floating-point Laplace noise here, where the engine would use its exact discrete Laplace sampler
on position-keyed streams. Everything else is what the engine would do, on released values only:

  1. `dpsynth synth` with a share (1 - S) of epsilon (BASE_FLAGS, default `--mechanism auto --prune-sigmas 2`);
  2. a tree of d - 1 column pairs: the maximum spanning tree of the pairs' mutual information in that
     synthetic table (post-processing of its release, so choosing costs nothing). This is the prototype's
     first design (2026-11-26); the engine now chooses the tree by noisy scores of how far the joint release is
     from the data on each pair, spending 0.1 of the pair share on them (src/mechanism/pmm/pairs.rs);
  3. each tree pair's B x B histogram on the public bounds, with Laplace noise of scale (d - 1) / (eps S)
     (add-remove: a row moves one cell of each of the d - 1 histograms; the engine's is (d - 1) / (0.9 eps S),
     after the scores), counts below PRUNE x scale zeroed;
  4. in breadth-first order from column 0, for each pair (parent p, child c): inside each bin of the
     synthetic p, the synthetic c values are moved, keeping their order, onto that row of the released
     histogram (uniform within a bin); rows whose released row is empty stay as they were;
  5. each mapped column is then put back onto the synthetic table's own (released, fine) 1-D marginal,
     keeping the new ranks, so the 1-D marginals are the base's;
  with --gate Z, a pair is mapped only where its released rows disagree with the synthetic table's own
  conditionals beyond their noise (median z-score of a chi-square over the parent's bins above Z; read
  from released values only), and otherwise kept as it was.

For each seed it prints and writes (CSV under --out) `dpsynth eval`'s scores of dpsynth at the full epsilon
(`full`) and of the mapped table (`mapped`), both on that seed.

Usage: scripts/pair_mapping_prototype.py [--epsilons 0.1,1] [--seeds 5] [--columns C1,C2,...]
           [--dataset T --config BOUNDS] [--share 0.2] [--bins 32] [--prune 3] [--gate Z] [--out DIR]
           [--binary PATH]
Needs numpy and pyarrow (scripts/peer_comparison.py's virtual environment has both).
"""

import argparse
import csv
import json
import sys
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_ablation import BINARY, CONFIG, DATASET, SCORES, run, scores  # noqa: E402


def normalised(path, columns, low, high):
    table = pq.read_table(path, columns=columns)
    values = np.column_stack([table[c].to_numpy(zero_copy_only=False).astype(float) for c in columns])
    values = values[~np.isnan(values).any(axis=1)]
    return np.clip((values - low) / (high - low), 0, 1)


def cell_of(values, bins):
    """Each normalised value's cell among `bins` equal cells of [0, 1] (1 in the last)."""
    return np.minimum((values * bins).astype(int), bins - 1)


def histogram(x, y, bins):
    return np.histogram2d(cell_of(x, bins), cell_of(y, bins), bins=bins, range=[[0, bins], [0, bins]])[0]


def mutual_information(x, y, bins):
    joint = histogram(x, y, bins)
    joint /= joint.sum()
    product = joint.sum(1, keepdims=True) @ joint.sum(0, keepdims=True)
    kept = joint > 0
    return (joint[kept] * np.log(joint[kept] / product[kept])).sum()


def spanning_tree(table, bins):
    """Edges (parent, child) of the maximum spanning tree by mutual information, grown from column 0."""
    d = table.shape[1]
    weight = {}
    for i in range(d):
        for j in range(i + 1, d):
            weight[i, j] = weight[j, i] = mutual_information(table[:, i], table[:, j], bins)
    reached, edges = {0}, []
    while len(reached) < d:
        _, parent, child = max((weight[i, j], i, j) for i in reached for j in range(d) if j not in reached)
        edges.append((parent, child))
        reached.add(child)
    return edges


def map_onto_pair(table, parent, child, released, bins):
    """Moves the child column, order kept inside each parent bin, onto the released rows."""
    parent_bin = cell_of(table[:, parent], bins)
    mapped = table[:, child].copy()
    for b in range(bins):
        rows, target = np.nonzero(parent_bin == b)[0], released[b]
        if len(rows) == 0 or target.sum() <= 0:
            continue
        order = rows[np.argsort(table[rows, child], kind="stable")]
        u = (np.arange(len(rows)) + 0.5) / len(rows)
        cdf = np.concatenate([[0], np.cumsum(target) / target.sum()])
        cell = np.clip(np.searchsorted(cdf, u, side="right") - 1, 0, bins - 1)
        mapped[order] = (cell + (u - cdf[cell]) / np.maximum(cdf[cell + 1] - cdf[cell], 1e-300)) / bins
    ranks = np.argsort(np.argsort(mapped, kind="stable"), kind="stable")
    return np.sort(table[:, child])[ranks]


def disagreement(table, parent, child, raw, scale, bins):
    """Median over the parent's bins of the z-score of chi^2 = sum_c (R_c - T q_c)^2 / (2 s^2 + T q_c): the
    unthresholded released row R (Laplace variance 2 s^2 a cell, T its sum) against the synthetic table's
    own conditional q. About 0 where the release only repeats what the synthetic table says."""
    parent_bin = cell_of(table[:, parent], bins)
    child_bin = cell_of(table[:, child], bins)
    z_scores = []
    for b in range(bins):
        rows = parent_bin == b
        if rows.sum() == 0:
            continue
        q = np.bincount(child_bin[rows], minlength=bins) / rows.sum()
        total = max(raw[b].sum(), 0)
        chi2 = ((raw[b] - total * q) ** 2 / (2 * scale**2 + total * q)).sum()
        z_scores.append((chi2 - bins) / np.sqrt(2 * bins))
    return np.median(z_scores) if z_scores else 0.0


def evaluate(args, synthetic, columns, seed, out):
    evaluation = out / "eval.json"
    run([args.binary, "eval", "--real", args.dataset, "--synth", synthetic, "--config", args.config,
         "--columns", ",".join(columns), "--seed", seed, "--json", evaluation, "--quiet"])
    return scores(json.loads(evaluation.read_text()))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", default="0.1,1")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--columns", default="dep_delay,arr_delay,air_time,distance")
    parser.add_argument("--dataset", default=str(DATASET))
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument("--base-flags", default="--mechanism auto --prune-sigmas 2")
    parser.add_argument("--share", type=float, default=0.2, help="share S of epsilon on the pair histograms")
    parser.add_argument("--bins", type=int, default=32, help="cells per axis of each pair histogram")
    parser.add_argument("--prune", type=float, default=3.0, help="released counts below PRUNE x scale -> 0")
    parser.add_argument("--gate", type=float, default=None,
                        help="map a pair only where the median disagreement z-score exceeds GATE (default: always)")
    parser.add_argument("--out", default="out/pair-mapping")
    parser.add_argument("--binary", default=str(BINARY))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    columns = args.columns.split(",")
    d = len(columns)
    bounds = tomllib.loads(Path(args.config).read_text())["bounds"]
    low, high = (np.array([bounds[c][k] for c in columns], float) for k in (0, 1))
    real = normalised(args.dataset, columns, low, high)
    rows = []
    for epsilon in map(float, args.epsilons.split(",")):
        for seed in range(1, args.seeds + 1):
            full, base, mapped = (out / f"{name}.parquet" for name in ("full", "base", "mapped"))
            for path, budget in ((full, epsilon), (base, epsilon * (1 - args.share))):
                run([args.binary, "synth", args.dataset, "--config", args.config, "--columns", args.columns,
                     "--epsilon", budget, "--seed", seed, "--output", path, "--quiet", *args.base_flags.split()])
            table = normalised(base, columns, low, high)
            noise = np.random.default_rng(1000 + seed)
            scale = (d - 1) / (epsilon * args.share)
            edges = spanning_tree(table, args.bins)
            mapped_edges = []
            for parent, child in edges:
                raw = histogram(real[:, parent], real[:, child], args.bins) + noise.laplace(0, scale, (args.bins,) * 2)
                if args.gate is not None and disagreement(table, parent, child, raw, scale, args.bins) <= args.gate:
                    continue
                released = np.where(raw < args.prune * scale, 0, raw)
                table[:, child] = map_onto_pair(table, parent, child, released, args.bins)
                mapped_edges.append((parent, child))
            values = table * (high - low) + low
            pq.write_table(pa.table({c: values[:, k] for k, c in enumerate(columns)}), mapped)
            tree = " ".join(f"{columns[p]}-{columns[c]}" + ("" if (p, c) in mapped_edges else "(kept)")
                            for p, c in edges)
            for variant, path in (("full", full), ("mapped", mapped)):
                rows.append({"table": Path(args.dataset).stem, "columns": args.columns, "d": d, "epsilon": epsilon,
                             "seed": seed, "variant": variant, "share": args.share, "bins": args.bins,
                             "prune": args.prune, "gate": args.gate, "tree": tree,
                             **evaluate(args, path, columns, seed, out)})
                print(rows[-1], flush=True)
    with open(out / "pair_mapping.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for epsilon in sorted({row["epsilon"] for row in rows}):
        for variant in ("full", "mapped"):
            group = [row for row in rows if row["epsilon"] == epsilon and row["variant"] == variant]
            means = " ".join(f"{score} {np.mean([row[score] for row in group]):.4g}" for score in SCORES)
            print(f"eps {epsilon} {variant}: {means}")


if __name__ == "__main__":
    main()
