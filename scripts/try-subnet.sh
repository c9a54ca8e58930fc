#!/usr/bin/env bash
# Try it before you register: the real neurons as separate processes on a development chain.
# Starts `shopbench chain serve`, registers a validator and two miners on it (development
# wallets), runs `neurons/miner.py` twice and `neurons/validator.py` once, waits until the
# validator has set weights on chain, prints the subnet (`shopbench chain show`) and stops
# everything. Wallets, state, the archive and the logs stay in $SHOPBENCH_TRY_DIR
# (default: ./try-subnet). Arguments pass on to `shopbench chain serve` (e.g. --commit-reveal:
# the weights are committed sealed and appear when the chain reveals them, an epoch later).
# Installs the subnet extra into the current or the project's venv unless
# SHOPBENCH_TRY_NO_INSTALL=1.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PIP_DISABLE_PIP_VERSION_CHECK=1
source scripts/venv.sh
if [ "${SHOPBENCH_TRY_NO_INSTALL:-0}" != 1 ]; then "$PY" -m pip install -q -e ".[subnet]"; fi
bin=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
dir=${SHOPBENCH_TRY_DIR:-try-subnet}
wait_s=${SHOPBENCH_TRY_WAIT_S:-300}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
wallets="$dir/wallets"
pids=()
stop() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT

# 1. The chain: one subnet (netuid 2), a block every half second, an epoch every 20 blocks.
"$bin/shopbench" chain serve --port 0 --netuid 2 --block-time 0.5 --tempo 20 "$@" \
  >"$dir/chain.log" 2>&1 &
pids+=($!)
network=""
for _ in $(seq 1 100); do
  network=$(grep -o 'memory://[0-9.]*:[0-9]*' "$dir/chain.log" || true)
  [ -n "$network" ] && break
  sleep 0.2
done
[ -n "$network" ] || { echo "the chain did not start:" >&2; cat "$dir/chain.log" >&2; exit 1; }
echo "chain: $network"

# 2. Registration: the validator with stake and a permit, two miners.
"$bin/shopbench" chain register --subtensor.network "$network" --netuid 2 --create \
  --wallet.path "$wallets" --wallet.name validator --stake 1000 --validator-permit
for miner in miner-1 miner-2; do
  "$bin/shopbench" chain register --subtensor.network "$network" --netuid 2 --create \
    --wallet.path "$wallets" --wallet.name "$miner"
done

# 3. The miners (a reference policy each) and the validator (a small catalog).
for miner in miner-1 miner-2; do
  "$PY" neurons/miner.py --netuid 2 --subtensor.network "$network" \
    --wallet.path "$wallets" --wallet.name "$miner" \
    --axon.ip 127.0.0.1 --axon.port 0 --agent.policy careful \
    --logging.file "$dir/$miner.log" 2>/dev/null &
  pids+=($!)
done
"$PY" neurons/validator.py --netuid 2 --subtensor.network "$network" \
  --wallet.path "$wallets" --wallet.name validator --neuron.full_path "$dir/validator" \
  --neuron.catalog_products 1000 --neuron.catalog_workers 1 --neuron.tasks_per_round 2 \
  --neuron.weights_interval_blocks 10 --neuron.metrics_port 0 \
  --logging.file "$dir/validator.log" 2>/dev/null &
validator=$!
pids+=("$validator")

# 4. Wait for the validator's weights on chain, then show the subnet.
deadline=$((SECONDS + wait_s))
until "$bin/shopbench" chain show --subtensor.network "$network" --netuid 2 >"$dir/subnet.json" \
  && "$PY" -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1]))["weights"])' \
    "$dir/subnet.json"; do
  if ! kill -0 "$validator" 2>/dev/null; then
    echo "the validator stopped; its log: $dir/validator.log" >&2
    tail -n 20 "$dir/validator.log" >&2 || true
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "no weights on chain after ${wait_s} s; logs in $dir" >&2
    exit 1
  fi
  sleep 2
done
cat "$dir/subnet.json"
echo "weights are on chain; logs, wallets and the validator's archive are in $dir"
