#!/usr/bin/env bash
# On a machine with a real GPU, in one go: is the GPU path right there, and what does it buy?
#   1. correctness on that GPU: the GPU unit tests and the CPU≡GPU conformance suite (DPSYNTH_REQUIRE_GPU=1,
#      so a missing adapter fails instead of skipping);
#   2. the binning bench (criterion, short): the CPU deposit methods on one thread against the GPU binner;
#   3. end to end at ROWS rows (default 10^8), d = 2 and 4, uncompressed: plain decode against synth on the
#      CPU (benches/end_to_end.rs), then `dpsynth synth --device cpu` and `--device gpu` alternating, each
#      run's phase split, and a byte comparison of the two outputs (same --seed: they must be identical);
#   4. the same at d = 2 on 1, 2, 4 and 8 threads: where the GPU pays;
#   5. Private Evolution's nearest-neighbour counts: the pe_nearest bench (k-d tree, CPU scan, GPU scan on the
#      same points), then `synth --mechanism pe` with --device cpu and gpu on 10^6 generated rows and on the
#      bundled flights table, on all threads and on 1, 2 and 4 (outputs compared byte for byte).
# Usage: scripts/gpu_check.sh [ROWS]
# DPSYNTH_GPU_CHECK_SECTIONS picks sections (default "1 2 3 4 5"); DPSYNTH_GPU_CHECK_REPS the alternating
# runs of section 3 (default 3).
# Binaries: built with cargo, or taken from $DPSYNTH_BIN_DIR (dpsynth, lib_tests, it, binning, end_to_end,
# pe_nearest) on a machine without a Rust toolchain. Logs and each run's diagnostics go to $OUT (default
# target/gpu-check); the table data to $DPSYNTH_BENCH_DIR (default /tmp/dpsynth-gpu-check).
set -uo pipefail
cd "$(dirname "$0")/.."
rows=${1:-100000000}
out=${OUT:-target/gpu-check}
data=${DPSYNTH_BENCH_DIR:-/tmp/dpsynth-gpu-check}
mkdir -p "$out" "$data"
reps=${DPSYNTH_GPU_CHECK_REPS:-3}
sections=" ${DPSYNTH_GPU_CHECK_SECTIONS:-1 2 3 4 5} "
wanted() { [[ $sections == *" $1 "* ]]; }

if [[ -n ${DPSYNTH_BIN_DIR:-} ]]; then
  bin=$DPSYNTH_BIN_DIR
else
  bin=target/gpu-check-bin
  mkdir -p "$bin"
  cargo build --release --quiet || exit
  cp target/release/dpsynth "$bin/"
  executable() { grep -o "target/release/deps/$1-[0-9a-f]*" | tail -1; }
  cp "$(cargo test --release --lib --no-run 2>&1 | executable dpsynth)" "$bin/lib_tests"
  cp "$(cargo test --release --test it --no-run 2>&1 | executable it)" "$bin/it"
  cp "$(cargo bench --no-run --bench binning 2>&1 | executable binning)" "$bin/binning"
  cp "$(cargo bench --no-run --bench end_to_end 2>&1 | executable end_to_end)" "$bin/end_to_end"
  cp "$(cargo bench --no-run --bench pe_nearest 2>&1 | executable pe_nearest)" "$bin/pe_nearest"
fi

echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{printf "%.0f GiB", $2/1048576}'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

summary=()
# Seconds since $1 (an $EPOCHREALTIME), two decimals.
since() { awk "BEGIN { printf \"%.2f\", $EPOCHREALTIME - $1 }"; }

export DPSYNTH_REQUIRE_GPU=1
if wanted 1; then
echo "== 1. correctness on this GPU"
"$bin/lib_tests" --test-threads 1 binner::gpu:: binner::device:: mechanism::pe::nearest_gpu:: 2>&1 | grep -E '^test |test result' || echo "FAILED: GPU unit tests"
# The carried test binary spawns dpsynth at its build path: there, section 3 compares the CLI's outputs.
skip=()
[[ -n ${DPSYNTH_BIN_DIR:-} ]] && skip=(--skip synth_output_is_identical_on_cpu_and_gpu)
"$bin/it" --test-threads 1 "${skip[@]}" binner_conformance pe::gpu_and_cpu 2>&1 | grep -E '^test |test result' || echo "FAILED: conformance suite"
fi

if wanted 2; then
echo "== 2. binning bench (10^7 pre-quantised rows; CPU cases on one thread)"
"$bin/binning" --bench --warm-up-time 1 --measurement-time 3 2>&1 | grep -E 'GPU adapter|^binning/|time:|thrpt' || echo "FAILED: binning bench"
fi

if wanted 3; then
echo "== 3. end to end, $rows rows, uncompressed"
DPSYNTH_BENCH_ROWS=$rows DPSYNTH_BENCH_DIR=$data DPSYNTH_BENCH_COMPRESSION=none DPSYNTH_BENCH_REPS=$reps \
  DPSYNTH_BENCH_DIMS=2,4 DPSYNTH_BENCH_MECHANISMS=pmm "$bin/end_to_end" || echo "FAILED: end-to-end bench"
fi
# One `dpsynth synth` of $1 (d = $2) on device $3 with $4 threads (empty: all): a summary line, the phases.
synth() {
  local input=$1 dims=$2 device=$3 threads=$4 bounds=() k diagnostics start seconds
  for ((k = 0; k < dims; k++)); do bounds+=(--bounds "x$k=0:1"); done
  diagnostics="$out/diagnostics-d$dims-$device.json"
  start=$EPOCHREALTIME
  "$bin/dpsynth" synth "$input" "${bounds[@]}" --epsilon 1 --seed 7 --device "$device" --quiet \
    ${threads:+--threads "$threads"} --output "$data/synth-$device.parquet" \
    --report "$data/report-$device.json" --diagnostics "$diagnostics" || exit
  seconds=$(since "$start")
  summary+=("d=$dims $device threads ${threads:-all}: $seconds s")
  python3 - "$diagnostics" "$data/report-$device.json" <<'EOF'
import json, sys
diagnostics, report = (json.load(open(path)) for path in sys.argv[1:])
phases = []
for timing in diagnostics["timings_seconds"]:
    for part in timing.get("parts") or [timing]:
        phases.append(f"{part['phase']} {part['seconds']:.3f}")
print(f"  {report['device']}, {diagnostics['threads']} threads: " + ", ".join(phases))
EOF
}
if wanted 3; then
for dims in 2 4; do
  input="$data/mixture-$rows-$dims-None.parquet"
  for ((rep = 1; rep <= reps; rep++)); do
    for device in cpu gpu; do synth "$input" "$dims" "$device" ""; done
  done
  if cmp -s "$data/synth-cpu.parquet" "$data/synth-gpu.parquet"; then
    summary+=("d=$dims: cpu and gpu outputs identical")
  else
    summary+=("d=$dims: cpu and gpu outputs DIFFER")
  fi
done
fi

if wanted 4; then
echo "== 4. fewer threads, d = 2: where the GPU pays (section 3's table)"
for threads in 1 2 4 8; do
  for device in cpu gpu; do synth "$data/mixture-$rows-2-None.parquet" 2 "$device" "$threads"; done
done
fi

if wanted 5; then
echo "== 5. Private Evolution's nearest-neighbour counts"
"$bin/pe_nearest" --bench --warm-up-time 1 --measurement-time 3 2>&1 | grep -E 'GPU adapter|^pe_nearest|time:|thrpt' \
  || echo "FAILED: pe_nearest bench"
"$bin/dpsynth" generate --rows 1000000 --dims 2 --seed 3 --force "$data/pe-mixture.parquet" \
  --schema "$data/pe-mixture.toml" >/dev/null || exit
# `synth --mechanism pe` of table $1 (bounds $2) on device $3 with $4 threads (empty: all), threshold
# variant: a summary line.
pe_synth() {
  local start
  start=$EPOCHREALTIME
  "$bin/dpsynth" synth "$1" --config "$2" --mechanism pe --neighbours replace --epsilon 1 --delta 1e-6 \
    --seed 7 --device "$3" ${4:+--threads "$4"} --quiet --output "$data/pe-$3.parquet" \
    --report "$data/pe-report-$3.json" || exit
  summary+=("pe $(basename "$1") $3 threads ${4:-all}: $(since "$start") s")
}
# All threads twice, then 1, 2 and 4: the crossover `--device auto` is fitted on
# (search::AUTO_GPU_MAX_CANDIDATE_THREADS).
for table in "$data/pe-mixture.parquet:$data/pe-mixture.toml" datasets/flights.parquet:datasets/flights.toml; do
  for threads in "" "" 1 2 4; do
    for device in cpu gpu; do pe_synth "${table%%:*}" "${table#*:}" "$device" "$threads"; done
  done
  if cmp -s "$data/pe-cpu.parquet" "$data/pe-gpu.parquet"; then
    summary+=("pe $(basename "${table%%:*}"): cpu and gpu outputs identical")
  else
    summary+=("pe $(basename "${table%%:*}"): cpu and gpu outputs DIFFER")
  fi
done
fi

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${summary[@]}"
