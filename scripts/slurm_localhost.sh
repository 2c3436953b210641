#!/usr/bin/env bash
# Runs the Slurm path for real on this one machine: starts munge, slurmctld and slurmd (Debian's
# packages: munge, slurm-wlm) with a one-node configuration under a scratch directory, submits
# scripts/slurm/dpsynth.sbatch on a generated dataset, and checks that its parts hold the rows of the
# single-machine run with the same seed. Stops the daemons on exit. Needs root (slurmd) and the MPI
# build (cargo build --release --features mpi).
#
# Usage: sudo scripts/slurm_localhost.sh [TASKS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${1:-2}
scratch=$(mktemp -d /tmp/dpsynth-slurm.XXXXXX)
host=$(hostname -s)
cpus=$(nproc)
cleanup() {
  pkill -F "$scratch/slurmd.pid" 2>/dev/null || true
  pkill -F "$scratch/slurmctld.pid" 2>/dev/null || true
  pkill -F "$scratch/munged.pid" 2>/dev/null || true
}
trap cleanup EXIT

# munge: a fresh key, its own socket.
mkdir -p "$scratch/munge"
dd if=/dev/urandom of="$scratch/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$scratch/munge/munge.key"
munged --force --key-file="$scratch/munge/munge.key" --socket="$scratch/munge/socket" \
  --pid-file="$scratch/munged.pid" --log-file="$scratch/munged.log" --seed-file="$scratch/munge/seed"

mkdir -p "$scratch/spool" "$scratch/state"
cat > "$scratch/slurm.conf" <<CONF
ClusterName=dpsynth-local
SlurmctldHost=$host
AuthType=auth/munge
AuthInfo=socket=$scratch/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$scratch/state
SlurmdSpoolDir=$scratch/spool
SlurmctldPidFile=$scratch/slurmctld.pid
SlurmdPidFile=$scratch/slurmd.pid
SlurmctldLogFile=$scratch/slurmctld.log
SlurmdLogFile=$scratch/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$scratch/slurm.conf"
slurmctld -i
slurmd
for _ in $(seq 60); do sinfo -h -o %t 2>/dev/null | grep -q idle && break; sleep 1; done
sinfo

# A dataset in four files, and the single-machine reference with the same seed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$scratch/data"
for part in 0 1 2 3; do
  target/release/dpsynth generate "$scratch/data/part-$part.parquet" --rows 250000 --dims 3 --seed "$part" \
    --schema "$scratch/bounds.toml" --force >/dev/null
done
# A seed before the [bounds] table: the reference and the job draw the same noise. Cell order: in random
# order each rank permutes its own part, and the parts would not be the reference's rows.
{ echo "seed = 7"; echo 'row-order = "cells"'; cat "$scratch/bounds.toml"; } > "$scratch/run.toml"
target/release/dpsynth synth "$scratch/data" --config "$scratch/run.toml" --epsilon 1 \
  --output "$scratch/single.parquet" --quiet

sbatch --wait --ntasks="$TASKS" --cpus-per-task=1 --output="$scratch/job.log" \
  scripts/slurm/dpsynth.sbatch "$scratch/data" "$scratch/run.toml" "$scratch/parts" 1
cat "$scratch/job.log"
ls -l "$scratch/parts"
python3 - "$scratch" "$TASKS" <<'PY'
import json, subprocess, sys
scratch, tasks = sys.argv[1], int(sys.argv[2])
parts = sorted(__import__("glob").glob(f"{scratch}/parts/part-*.parquet"))
assert len(parts) == tasks, parts
report = json.load(open(f"{scratch}/parts.report.json"))
diagnostics = json.load(open(f"{scratch}/parts.diagnostics.json"))
assert len(diagnostics["ranks"]) == tasks
# The parts, read as one table, against the single-machine table: eval's W1 between them is 0.
out = subprocess.run(["target/release/dpsynth", "eval", "--real", f"{scratch}/single.parquet", "--synth",
                      f"{scratch}/parts", "--config", f"{scratch}/bounds.toml", "--json", f"{scratch}/eval.json",
                      "--quiet"], check=True)
w1 = json.load(open(f"{scratch}/eval.json"))["w1"]["value"]
assert w1 == 0, w1
print(f"slurm: {tasks} ranks wrote {report['release']['synthetic_rows']} rows in {len(parts)} parts; "
      f"W1 to the single-machine table = {w1}")
PY
