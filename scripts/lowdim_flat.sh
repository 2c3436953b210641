#!/usr/bin/env bash
# lowdim against PMM on all columns and the default, on data near a 2-flat in d = 20, 50, 100 dimensions.
# For each d and ε: `dpsynth generate --law subspace:2` (uniform on a box in a random 2-flat plus ±0.01
# noise), then `synth --mechanism lowdim --target-dim 2`, plain PMM (`--mechanism pmm`) and the default
# (`auto`) at the same ε (all under --neighbours replace, the paper's relation), then `dpsynth eval` of each
# against the real table.
# Joint W1: with ROWS ≤ 2000 eval computes it exactly (dense transport); beyond, it is eval's exact transport
# on 1000-row subsamples (mean of 5), and w1_method says so. Each method's largest 1-D W1 (the lower end of
# eval's sandwich) is written beside it.
# Output: CSV on stdout (and in out/lowdim_flat.csv).
# Usage: [DIMS="20 50 100"] [EPSILONS="1 4 16"] scripts/lowdim_flat.sh [ROWS] [SEEDS]   (defaults 2000 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-2000}
seeds=${2:-3}
cargo build --release --quiet
bin=target/release/dpsynth
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p out
# Prints: the joint W1's method and value, then the largest 1-D W1.
w1() {
  python3 -c 'import json,sys
j = json.load(open(sys.argv[1]))
exact = j["w1"]["method"] == "exact-transport"
joint = j["w1"]["value"] if exact else j["subsample_transport"]["w1"]["mean"]
print(j["w1"]["method"] if exact else "subsample-transport", joint, j["sandwich"]["lower"])' "$1"
}
{
  echo "dims,epsilon,seed,rows,w1_method,w1_lowdim,w1_pmm,lowdim_target_dim,w1_default,max_1d_w1_lowdim,max_1d_w1_pmm,max_1d_w1_default"
  for dims in ${DIMS:-20 50 100}; do
    for seed in $(seq 1 "$seeds"); do
      data="$work/flat-$dims-$seed.parquet"
      "$bin" generate "$data" --rows "$rows" --dims "$dims" --law subspace:2 --seed "$seed" --force \
        --schema "$work/bounds-$dims.toml" > /dev/null
      for eps in ${EPSILONS:-1 4 16}; do
        common=(--config "$work/bounds-$dims.toml" --epsilon "$eps" --neighbours replace --seed "$seed" --quiet)
        "$bin" synth "$data" --output "$work/lowdim.parquet" --report "$work/lowdim.json" \
          --mechanism lowdim --target-dim 2 "${common[@]}"
        "$bin" synth "$data" --output "$work/pmm.parquet" --mechanism pmm "${common[@]}"
        "$bin" synth "$data" --output "$work/default.parquet" "${common[@]}"
        for run in lowdim pmm default; do
          "$bin" eval --real "$data" --synth "$work/$run.parquet" --config "$work/bounds-$dims.toml" \
            --json "$work/eval-$run.json" --quiet
        done
        read -r method lowdim lowdim_1d < <(w1 "$work/eval-lowdim.json")
        read -r _ pmm pmm_1d < <(w1 "$work/eval-pmm.json")
        read -r _ default default_1d < <(w1 "$work/eval-default.json")
        target=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["parameters"]["target_dim"])' "$work/lowdim.json")
        echo "$dims,$eps,$seed,$rows,$method,$lowdim,$pmm,$target,$default,$lowdim_1d,$pmm_1d,$default_1d"
      done
    done
  done
} | tee out/lowdim_flat.csv
