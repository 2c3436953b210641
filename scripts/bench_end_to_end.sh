#!/usr/bin/env bash
# synth against the copy floor (docs/benchmarks.md): for each table, in one run and alternating, after one
# warm-up of each,
#   pyarrow   pyarrow's read_table + write_table of every column (uncompressed, as synth writes; time
#             measured inside Python, interpreter start left out)
#   copy      this crate's reader and writer (benches/copy_table.rs): the same columns, row groups and
#             encoding as a synthetic table, nothing else
#   default   dpsynth synth (--mechanism auto)
#   pmm       dpsynth synth --mechanism pmm
# and prints medians of wall and CPU (user + sys) seconds, their ratios to each copy, rows/s, peak RSS, and
# the phase split of the last synth of each mechanism (its --diagnostics).
# Tables: d numeric mixture columns from `dpsynth generate` and mixed tables (float, category, Boolean,
# nullable float, cycling) of MIXED columns, each in every compression.
# Usage: scripts/bench_end_to_end.sh [ROWS ...]   (default 10^7; tables cached in target/bench-data)
# Environment: DPSYNTH_BENCH_DIMS ("2 4 8"), DPSYNTH_BENCH_MIXED ("16 64"), DPSYNTH_BENCH_COMPRESSION
# ("none snappy zstd"), DPSYNTH_BENCH_REPS (3), DPSYNTH_BENCH_DIR, DPSYNTH_BENCH_PYTHON (a Python with pyarrow),
# DPSYNTH_BENCH_KEEP (1; 0 deletes each table after its bench, so that 10^8-row tables, 1.6 GB at d = 2 and
# as much again for synth's output, fit a small disk one at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
rows_list=(${@:-10000000})
dims_list=(${DPSYNTH_BENCH_DIMS-2 4 8})
mixed_list=(${DPSYNTH_BENCH_MIXED-16 64})
compressions=(${DPSYNTH_BENCH_COMPRESSION-none snappy zstd})
reps=${DPSYNTH_BENCH_REPS:-3}
keep=${DPSYNTH_BENCH_KEEP:-1}
dir=${DPSYNTH_BENCH_DIR:-target/bench-data}
python=${DPSYNTH_BENCH_PYTHON:-target/python-test-venv/bin/python}
mkdir -p "$dir"
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 2; }
"$python" -c "import pyarrow" || { echo "needs pyarrow: set DPSYNTH_BENCH_PYTHON"; exit 2; }
cargo build --release --quiet
copy_bin=$(cargo bench --bench copy_table --no-run 2>&1 | grep -o 'target/release/deps/copy_table-[0-9a-f]*' | head -1)
dpsynth=target/release/dpsynth
out=$dir/bench-output.parquet
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print $2/1048576 " GiB"}'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# run NAME COMMAND...: one timed run; appends "NAME wall cpu peak_kib" to $samples.
run() {
  local name=$1
  shift
  rm -f "$out"
  /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" "$@" >"$dir/stdout.txt"
  read -r wall user sys peak <"$dir/time.txt"
  if [[ $name == pyarrow ]]; then read -r wall cpu <"$dir/stdout.txt"; else cpu=$(awk "BEGIN { print $user + $sys }"); fi
  echo "$name $wall $cpu $peak" >>"$samples"
}

# bench TABLE ROWS SYNTH_ARGS...: the four jobs on one table, alternating.
bench() {
  local table=$1 rows=$2
  shift 2
  samples=$(mktemp)
  for ((rep = 0; rep <= reps; rep++)); do
    run pyarrow "$python" scripts/bench_copy_floor.py copy "$table" "$out"
    run copy "$copy_bin" "$table" "$out"
    run default "$dpsynth" synth "$table" "$@" --epsilon 1 --quiet --output "$out" \
      --diagnostics "$dir/diagnostics-default.json"
    run pmm "$dpsynth" synth "$table" "$@" --mechanism pmm --epsilon 1 --quiet --output "$out" \
      --diagnostics "$dir/diagnostics-pmm.json"
    [[ $rep == 0 ]] && : >"$samples" # the warm-up is not counted
  done
  "$python" - "$samples" "$rows" "$(basename "$table")" "$dir" <<'PY'
import json, statistics, sys
samples, rows, table, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
runs = {}
for line in open(samples):
    name, wall, cpu, peak = line.split()
    runs.setdefault(name, []).append((float(wall), float(cpu), int(peak)))
median = {name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs), max(r[2] for r in rs))
          for name, rs in runs.items()}
pw, pc, _ = median["pyarrow"]
cw, cc, _ = median["copy"]
print(f"{table}: {rows} rows, medians of {len(runs['copy'])}")
print(f"  {'job':8} {'wall s':>7} {'CPU s':>7} {'rows/s':>10} {'peak MiB':>8}  {'wall/pyarrow':>12} {'CPU/pyarrow':>11}  {'wall/copy':>9} {'CPU/copy':>8}")
for name in ["pyarrow", "copy", "default", "pmm"]:
    wall, cpu, peak = median[name]
    print(f"  {name:8} {wall:7.2f} {cpu:7.2f} {rows / wall:10.3g} {peak / 1024:8.0f}  {wall / pw:12.2f} {cpu / pc:11.2f}  {wall / cw:9.2f} {cpu / cc:8.2f}")
for mechanism in ["default", "pmm"]:
    timings = json.load(open(f"{directory}/diagnostics-{mechanism}.json"))["timings_seconds"]
    parts = []
    for phase in timings:
        inner = ", ".join(f"{p['phase']} {p['seconds']:.2f}" for p in phase.get("parts", []))
        parts.append(f"{phase['phase']} {phase['seconds']:.2f}" + (f" ({inner})" if inner else ""))
    print(f"  phases of {mechanism}: " + "; ".join(parts))
PY
  rm -f "$samples"
}

for rows in ${rows_list[@]}; do
  for compression in ${compressions[@]}; do
    for dims in ${dims_list[@]}; do
      table=$dir/mixture-$rows-$dims-$compression.parquet
      [[ -f $table ]] || "$dpsynth" generate --rows "$rows" --dims "$dims" --compression "$compression" "$table" >/dev/null
      bounds=()
      for ((k = 0; k < dims; k++)); do bounds+=(--bounds "x$k=0:1"); done
      bench "$table" "$rows" "${bounds[@]}"
      [[ $keep == 1 ]] || rm -f "$table"
    done
    for columns in ${mixed_list[@]}; do
      table=$dir/mixed-$rows-$columns-$compression.parquet
      [[ -f $table ]] || "$python" scripts/bench_copy_floor.py mixed "$rows" "$columns" "$compression" "$table" "$table.toml"
      bench "$table" "$rows" --config "$table.toml"
      [[ $keep == 1 ]] || rm -f "$table" "$table.toml"
    done
  done
done
rm -f "$out" "$dir/time.txt" "$dir/stdout.txt"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
