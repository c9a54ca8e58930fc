#!/usr/bin/env bash
# Installs shopbench with its test extras (CPU only; `scale`: Ray, for the two-node curation
# tests), checks the types against their baseline (scripts/typecheck.py, a step of its own)
# and runs the suite; arguments go to pytest.
#   bash scripts/test.sh            the whole check, as CI runs it
#   bash scripts/test.sh --fast     the inner loop: no type check, no test marked slow
#                                   (training, arenas, the browser); a few minutes
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PIP_DISABLE_PIP_VERSION_CHECK=1
source scripts/venv.sh
"$PY" -m pip install -q -e ".[dev,scale]"
if [ "${1:-}" = "--fast" ]; then
  shift
  exec "$PY" -m pytest -q -n 2 -m "not slow" "$@"
fi
"$PY" scripts/typecheck.py
exec "$PY" -m pytest -q -n 2 "$@"
