#!/usr/bin/env bash
# Seconds per phase of `dpsynth eval` against rows and columns: two generated mixture tables (different
# seeds) per (n, d), one eval each, phases read from the JSON. Usage:
#   scripts/eval_timing.sh [N,...] [D,...]     (defaults: 100000,1000000 and 2,4,6,8)
# Writes out/eval_timing/timing.csv. Needs target/release/dpsynth (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
rows_list=${1:-100000,1000000}
dims_list=${2:-2,4,6,8}
bin=target/release/dpsynth
out=out/eval_timing
mkdir -p "$out"
echo "rows,dims,load,w1,moments_and_marginals,pairwise_w1,subsample_transport,column_shapes_and_pair_trends,rules,detection,disclosure,wall" > "$out/timing.csv"
for rows in ${rows_list//,/ }; do
  for dims in ${dims_list//,/ }; do
    real="$out/real-$rows-$dims.parquet" synth="$out/synth-$rows-$dims.parquet"
    [ -f "$real" ] || "$bin" generate "$real" --rows "$rows" --dims "$dims" --seed 1 --schema "$out/bounds-$rows-$dims.toml"
    [ -f "$synth" ] || "$bin" generate "$synth" --rows "$rows" --dims "$dims" --seed 2
    holdout="$out/holdout-$rows-$dims.parquet"
    [ -f "$holdout" ] || "$bin" generate "$holdout" --rows "$rows" --dims "$dims" --seed 3
    start=$(date +%s.%N)
    # A rule that reads a column on every row, and a holdout, so the validity and disclosure phases are timed.
    "$bin" eval --real "$real" --synth "$synth" --config "$out/bounds-$rows-$dims.toml" --json "$out/eval-$rows-$dims.json" \
      --holdout "$holdout" --rules "abs(x0) >= 0" --quiet
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    python3 - "$out/eval-$rows-$dims.json" "$rows" "$dims" "$wall" >> "$out/timing.csv" <<'PY'
import json, sys
path, rows, dims, wall = sys.argv[1:]
phases = {t["phase"]: t["seconds"] for t in json.load(open(path))["timings_seconds"]}
keys = ["load", "w1", "moments_and_marginals", "pairwise_w1", "subsample_transport_all_tables",
        "column_shapes_and_pair_trends", "rules", "detection", "disclosure"]
print(",".join([rows, dims] + ["%.2f" % phases[k] for k in keys] + ["%.2f" % float(wall)]))
PY
    tail -1 "$out/timing.csv"
  done
done
