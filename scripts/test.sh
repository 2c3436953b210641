#!/usr/bin/env bash
# The test command (README.md): the Rust tests, then the Python package built from this tree into a
# fresh virtual environment and its pytest suite. `.ci/run` installs the system packages, then runs this.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --release

# python/ (pyo3 + maturin): `pip install ./python` compiles the extension in this workspace's target/,
# reusing the crate the tests above just built; the suite compares it with target/release/dpsynth.
venv=target/python-test-venv
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "./python[test]"
"$venv/bin/python" -m pytest -q python/tests
