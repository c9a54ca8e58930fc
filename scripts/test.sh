#!/usr/bin/env bash
# Installs shopbench with its test extras (CPU only) and runs the suite (arguments go to
# pytest), in the current virtual environment or else in the project's .venv (see venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PIP_DISABLE_PIP_VERSION_CHECK=1
source scripts/venv.sh
"$PY" -m pip install -q -e ".[dev]"
exec "$PY" -m pytest -q -n 2 "$@"
