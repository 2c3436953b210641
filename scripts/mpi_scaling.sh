#!/usr/bin/env bash
# Strong and weak scaling of `synth` across MPI ranks on this machine (issue 17's figures).
#
# Generates a dataset of FILES Parquet files (ROWS rows in all, d = DIMS mixture) under OUT/data, then
# runs `mpirun -n P dpsynth synth` for each P in RANKS on all of it (strong scaling) and on P/MAXP of
# the files (weak scaling: the same rows per rank), and prints seconds, rows/s per rank and the bytes each
# rank sends into the reduce-scatter (2^r leaves × 8 B), read from the run's diagnostics.
#
# Usage: ROWS=100000000 FILES=64 DIMS=2 RANKS="1 2 4" THREADS=1 OUT=out/mpi-scaling scripts/mpi_scaling.sh
# Needs the MPI build: cargo build --release --features mpi (and Open MPI's mpirun).
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-100000000}; FILES=${FILES:-64}; DIMS=${DIMS:-2}; RANKS=${RANKS:-"1 2 4"}; OUT=${OUT:-out/mpi-scaling}
THREADS=${THREADS:-1}  # per rank: 1 keeps P ranks on P cores
BIN=target/release/dpsynth
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT/data"
per_file=$((ROWS / FILES))
for ((file = 0; file < FILES; file++)); do
  name=$(printf "%s/data/part-%03d.parquet" "$OUT" "$file")
  [ -f "$name" ] || "$BIN" generate "$name" --rows "$per_file" --dims "$DIMS" --seed "$file" \
    --schema "$OUT/bounds.toml" --force >/dev/null
done
max_ranks=$(echo $RANKS | tr ' ' '\n' | sort -n | tail -1)
printf "%-8s %5s %12s %9s %16s %18s\n" scaling ranks rows seconds "rows/s per rank" "sent per rank"
for ranks in $RANKS; do
  for scaling in strong weak; do
    if [ "$scaling" = strong ]; then files=$FILES; else files=$((FILES * ranks / max_ranks)); fi
    input="$OUT/input-$files"
    if [ ! -d "$input" ]; then
      mkdir -p "$input"
      for ((file = 0; file < files; file++)); do
        ln -sf "$(realpath "$(printf "%s/data/part-%03d.parquet" "$OUT" "$file")")" "$input/"
      done
    fi
    started=$(date +%s.%N)
    mpirun --oversubscribe -n "$ranks" "$BIN" synth "$input" --config "$OUT/bounds.toml" --mechanism pmm --epsilon 1 \
      --threads "$THREADS" --output "$OUT/parts-$scaling-$ranks" --diagnostics "$OUT/diag-$scaling-$ranks.json" --quiet
    ended=$(date +%s.%N)
    python3 - "$OUT/diag-$scaling-$ranks.json" "$scaling" "$ranks" "$started" "$ended" <<'PY'
import json, sys
diagnostics, scaling, ranks, started, ended = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
d = json.load(open(diagnostics))
rows = d["rows_read"]
seconds = ended - started
sent = sum(rank["leaves_owned"] for rank in d["ranks"]) * 8  # each rank sends the whole leaf array
print(f"{scaling:<8} {ranks:5d} {rows:12d} {seconds:9.2f} {rows / seconds / ranks:16,.0f} {sent / 2**20:15,.0f} MiB")
PY
  done
done
