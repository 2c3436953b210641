#!/usr/bin/env python3
"""Accuracy ablation (issue 20): what each piece of the engine does to the synthetic table, side by side.

For each column set of the bundled flights table (its public bounds from datasets/flights.toml; or of any
table with public bounds given by --dataset and --config, named by its file's stem) and each
generated table asked for (--generated LAW:ROWS:DIMS, made by `dpsynth generate` with its public bounds),
each epsilon and each seed, it runs every variant through `dpsynth synth` and scores it with `dpsynth eval`:

  - pmm               textbook PMM (--mechanism pmm, add-remove);
  - pmm+marginals=S   PMM with --marginal-share S: each column mapped onto a fine released 1-D marginal;
  - pmm+quantile=S    PMM with --partition quantile --marginal-share S: the marginals released first, the
                      tree's cells cut at their quantiles, the columns mapped back through them;
  - auto              --mechanism auto: the rule docs/mechanisms.md gives, from public inputs only;
  - psmm, lowdim      the other mechanisms at their defaults (lowdim with --root-share 0.1);
  - mst, aim          smartnoise-synth's MST or AIM through scripts/peer_comparison.py's harness (64 bins
                      per column on the same public bounds, rows drawn i.i.d. from the model, delta = 1e-9;
                      numpy seeded with the run's seed; their noise is unseeded);
  - any extra variant given as NAME='--flag value ...'.

Scores (from the eval JSON): exact l-infinity transport on 1000-row subsamples (mean of 5, and its ratio
to the real-vs-real floor), mean pairwise 2-D W1, the largest 1-D W1, the mean 2-way TV on a 32 x 32
grid, the largest mean error and the Frobenius correlation error (normalised units).

Usage: scripts/accuracy_ablation.py [--epsilons 0.1,1] [--seeds 5] [--first-seed 1]
           [--shares 0.1,0.2,0.3] [--quantile-shares 0.3]
           [--column-sets dep_delay,arr_delay:dep_delay,arr_delay,air_time,distance]
           [--variants pmm,psmm,lowdim] [--extra NAME='--flag value'] [--generated mixture:100000:3,...]
           [--no-flights] [--dataset T.parquet --config T.toml] [--out DIR] [--binary PATH]
Writes ablation.csv (a row as each run finishes, so a stopped sweep keeps what it ran) and ablation.md (the
means and spreads, at the end) under --out (default out/ablation). --first-seed K runs seeds K .. K+N-1, to add
seeds to an earlier sweep (give each sweep its own --out).
"""

import argparse
import csv
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "dpsynth"
DATASET = ROOT / "datasets" / "flights.parquet"
CONFIG = ROOT / "datasets" / "flights.toml"
SCORES = ["subsample_w1", "ratio_to_floor", "pairwise_w1", "max_1d_w1", "tv_2way", "mean_error", "correlation_error",
          "rank_correlation_error"]


def peer_command(method, column_set, epsilon, output, dataset, config, seed):
    """The peers' worker of scripts/peer_comparison.py (in its virtual environment)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import peer_comparison

    return [peer_comparison.venv_python(), ROOT / "scripts" / "peer_comparison.py", "--worker", method,
            column_set, epsilon, output, "--dataset", dataset, "--config", config, "--seed", seed]


def variant_arguments(name, extras):
    if name in extras:
        return shlex.split(extras[name])
    if name == "pmm":
        return ["--mechanism", "pmm"]
    if name.startswith("pmm+marginals="):
        return ["--mechanism", "pmm", "--marginal-share", name.split("=", 1)[1]]
    if name.startswith("pmm+quantile="):
        return ["--mechanism", "pmm", "--partition", "quantile", "--marginal-share", name.split("=", 1)[1]]
    if name == "auto":
        return ["--mechanism", "auto"]
    if name == "psmm":
        return ["--mechanism", "psmm"]
    if name == "lowdim":
        return ["--mechanism", "lowdim", "--root-share", "0.1"]
    sys.exit(f"unknown variant {name}")


def scores(evaluation):
    pairs = next((entry for entry in evaluation["marginals"] if entry["k"] == 2), None)
    return {
        "subsample_w1": evaluation["subsample_transport"]["w1"]["mean"],
        "ratio_to_floor": evaluation["subsample_transport"]["ratio_to_floor"],
        "pairwise_w1": evaluation["pairwise_w1"]["mean"] if evaluation.get("pairwise_w1") else None,
        "max_1d_w1": max(column["w1"] for column in evaluation["columns"]),
        "tv_2way": pairs["mean_tv"] if pairs else None,
        "mean_error": evaluation["mean_error"]["max_abs"],
        "correlation_error": evaluation["correlation_error"]["frobenius"],
        "rank_correlation_error": evaluation["rank_correlation_error"]["frobenius"],
    }


def tables(args, out):
    """(name, dataset, config, column sets) of every table the run compares on."""
    found = []
    if not args.no_flights:
        found.append((Path(args.dataset).stem, args.dataset, args.config, args.column_sets.split(":")))
    for spec in filter(None, args.generated.split(",")):
        law, rows, dims = spec.split(":")
        dataset, config = out / f"{law}-{rows}-{dims}.parquet", out / f"{law}-{rows}-{dims}.toml"
        if not dataset.exists():
            run([args.binary, "generate", dataset, "--rows", rows, "--dims", dims, "--law", law, "--seed", 0,
                 "--schema", config, "--force"])
        found.append((f"{law} n={rows}", dataset, config, [",".join(f"x{k}" for k in range(int(dims)))]))
    return found


def run(command):
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, command))}\n{result.stderr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", default="0.1,1")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--shares", default="0.1,0.2,0.3")
    parser.add_argument("--quantile-shares", default="0.3")
    parser.add_argument("--column-sets", default="dep_delay,arr_delay:dep_delay,arr_delay,air_time:"
                                                  "dep_delay,arr_delay,air_time,distance")
    parser.add_argument("--variants", default="pmm,psmm,lowdim")
    parser.add_argument("--extra", action="append", default=[], help="NAME='--flag value ...'")
    parser.add_argument("--generated", default="", help="LAW:ROWS:DIMS,... tables from `dpsynth generate`")
    parser.add_argument("--no-flights", action="store_true", help="only the generated tables")
    parser.add_argument("--dataset", default=str(DATASET), help="the table the column sets are taken from")
    parser.add_argument("--config", default=str(CONFIG), help="its public bounds")
    parser.add_argument("--out", default="out/ablation")
    parser.add_argument("--binary", default=str(BINARY))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extras = dict(entry.split("=", 1) for entry in args.extra)
    variants = [variant for variant in args.variants.split(",") if variant]
    variants[1:1] = [f"pmm+marginals={share}" for share in args.shares.split(",") if share] + [
        f"pmm+quantile={share}" for share in args.quantile_shares.split(",") if share]
    variants += list(extras)
    if not variants:
        sys.exit("no variants to run: give --variants, --shares, --quantile-shares or --extra")
    rows = []
    with open(out / "ablation.csv", "w", newline="") as handle:
        writer = None
        for table, dataset, config, column_sets in tables(args, out):
            for column_set in column_sets:
                for epsilon in args.epsilons.split(","):
                    for seed in range(args.first_seed, args.first_seed + args.seeds):
                        for variant in variants:
                            synthetic = out / f"synth.{variant}.parquet"
                            started = time.perf_counter()
                            if variant in ("mst", "aim"):
                                run(peer_command(variant, column_set, epsilon, synthetic, dataset, config, seed))
                            else:
                                run([args.binary, "synth", dataset, "--config", config, "--columns", column_set,
                                     "--epsilon", epsilon, "--seed", seed, "--output", synthetic, "--quiet",
                                     *variant_arguments(variant, extras)])
                            seconds = time.perf_counter() - started
                            evaluation = out / "eval.json"
                            run([args.binary, "eval", "--real", dataset, "--synth", synthetic, "--config", config,
                                 "--columns", column_set, "--seed", seed, "--json", evaluation, "--quiet"])
                            rows.append({"table": table, "columns": column_set, "d": column_set.count(",") + 1,
                                         "epsilon": epsilon, "seed": seed, "variant": variant,
                                         "seconds": round(seconds, 2), **scores(json.loads(evaluation.read_text()))})
                            if writer is None:
                                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                                writer.writeheader()
                            writer.writerow(rows[-1])
                            handle.flush()
                            print(rows[-1], flush=True)
    lines = ["| table | d | ε | variant | " + " | ".join(SCORES) + " |", "|---|---|---|---|" + "---|" * len(SCORES)]
    groups = {}
    for row in rows:
        groups.setdefault((row["table"], row["d"], row["epsilon"], row["variant"]), []).append(row)
    for (table, d, epsilon, variant), group in groups.items():
        cells = []
        for score in SCORES:
            values = [row[score] for row in group if row[score] is not None]
            cells.append(f"{statistics.mean(values):.4g} ± {statistics.pstdev(values):.2g}" if values else "")
        lines.append(f"| {table} | {d} | {epsilon} | {variant} | " + " | ".join(cells) + " |")
    (out / "ablation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
