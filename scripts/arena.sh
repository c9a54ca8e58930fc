#!/usr/bin/env bash
# Installs shopbench with the subnet extra and runs the local arena (all arguments pass on).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install -q -e ".[subnet]"
exec shopbench arena "$@"
