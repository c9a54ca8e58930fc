#!/usr/bin/env bash
# Installs shopbench with its test extras (CPU only) and runs the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install -q -e ".[dev]"
python3 -m pytest -q -n 2 "$@"
