#!/usr/bin/env bash
# The issue's performance figures in one go: for generated tables of ROWS rows (default 10^7 and 10^8),
# d = 2, 3 and 4, uncompressed and zstd, textbook PMM and the default (--mechanism auto):
#   - synth time / plain decode time of the same columns, measured side by side (benches/end_to_end.rs),
#     and the same ratio for the binning pass alone;
#   - 2 threads against 1 (the same bench with DPSYNTH_BENCH_THREADS=1);
#   - the phase split from the diagnostics: read and bin, merge, tree, noise, consistency, sample and encode, write;
#   - peak memory of one `dpsynth synth` run of each mechanism (/usr/bin/time -v).
# Usage: scripts/bench_end_to_end.sh [ROWS ...]   (tables are cached in target/bench-data)
set -euo pipefail
cd "$(dirname "$0")/.."
rows_list=("${@:-10000000 100000000}")
dir=${DPSYNTH_BENCH_DIR:-target/bench-data}
mkdir -p "$dir"
cargo build --release --quiet
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 2; }
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print $2/1048576 " GiB"}'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for rows in ${rows_list[@]}; do
  echo "== ratios, $rows rows, all cores"
  DPSYNTH_BENCH_ROWS=$rows DPSYNTH_BENCH_DIR=$dir cargo bench --quiet --bench end_to_end 2>/dev/null
  echo "== ratios, $rows rows, 1 thread"
  DPSYNTH_BENCH_ROWS=$rows DPSYNTH_BENCH_DIR=$dir DPSYNTH_BENCH_THREADS=1 cargo bench --quiet --bench end_to_end 2>/dev/null
  echo "== peak memory, $rows rows"
  for dims in 2 3 4; do
    for compression in None Zstd; do
      input="$dir/mixture-$rows-$dims-$compression.parquet"
      bounds=()
      for ((k = 0; k < dims; k++)); do bounds+=(--bounds "x$k=0:1"); done
      for mechanism in pmm auto; do
        /usr/bin/time -f "$mechanism d=$dims $compression: %e s wall, %M KiB peak RSS" \
          target/release/dpsynth synth "$input" "${bounds[@]}" --mechanism $mechanism --epsilon 1 --device cpu \
          --quiet --output "$dir/synth-peak.parquet"
      done
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
