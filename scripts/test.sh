#!/usr/bin/env bash
# The test command (README.md): the Rust tests, then the Python package built from this tree into a
# fresh virtual environment and its pytest suite. `.ci/run` installs the system packages, then runs this.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --release

# PMM across MPI ranks (the `mpi` feature; tests/it/cluster.rs runs mpirun -n 2..4 on this machine).
# It needs Open MPI (mpirun, mpicc) and libclang; .ci/run installs them and sets DPSYNTH_REQUIRE_MPI=1.
if command -v mpirun >/dev/null && command -v mpicc >/dev/null; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    cargo test --release --features mpi -- cluster::
elif [ "${DPSYNTH_REQUIRE_MPI:-0}" = 1 ]; then
  echo "error: DPSYNTH_REQUIRE_MPI=1 but Open MPI (mpirun, mpicc) is not installed" >&2
  exit 1
else
  echo "NOTE: no Open MPI (mpirun, mpicc): the MPI tests were not run (apt install openmpi-bin libopenmpi-dev libclang-dev)"
fi

# python/ (pyo3 + maturin): `pip install ./python` compiles the extension in this workspace's target/,
# reusing the crate the tests above just built; the suite compares it with target/release/dpsynth.
venv=target/python-test-venv
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "./python[test]"
"$venv/bin/python" -m pytest -q python/tests
