#!/usr/bin/env bash
# Installs shopbench with the subnet and api extras and runs the local arena (all arguments pass on),
# in the current virtual environment or else in the project's .venv (see venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 PIP_DISABLE_PIP_VERSION_CHECK=1
source scripts/venv.sh
"$PY" -m pip install -q -e ".[subnet,api]"
bin=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
exec "$bin/shopbench" arena "$@"
