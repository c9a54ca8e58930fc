#!/usr/bin/env bash
# The validator image, built and run for real: builds deploy/Dockerfile with podman, runs
# `neurons/validator.py --help` in it, then the validator in the container against a
# development chain served on this host (`shopbench chain serve`) with one reference miner,
# until its weights are on chain; then a restart request (`touch FULL_PATH/restart-request.json`),
# which the validator must honour between rounds by exiting with status 0.
#
# Exit status 0 when the check passed, or when it cannot run on this host (no podman, no
# base image, or a runtime that cannot start containers here: the reason on stderr); 1 when
# the image does not build, or the validator in it fails, where containers do run.
# Needs the project's environment with the subnet extra (scripts/test.sh installs it).
set -uo pipefail
cd "$(dirname "$0")/.."
say() { echo "container check: $*" >&2; }
skip() { say "skipped, $*"; exit 0; }
fail() { say "FAILED: $*"; exit 1; }
as_root_apt() {  # install Debian packages when we may; false otherwise
  [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 \
         && apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; }
}

IMAGE=localhost/shopbench-validator:ci
BASE=localhost/shopbench-ci-base:latest
UPSTREAM_BASE=docker.io/library/python:3.12-slim   # the Dockerfile's PYTHON_IMAGE
work=$(mktemp -d)
pids=()
cleanup() {
  podman rm -f shopbench-ci-validator >/dev/null 2>&1
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# 1. A runtime.
if ! command -v podman >/dev/null 2>&1; then
  as_root_apt podman runc || skip "no podman here and it cannot be installed"
fi

# 2. A base image with Python: the Dockerfile's own, else Debian's Python built from the
# Debian archive (for hosts that reach PyPI and Debian but no container registry); the
# host's CA bundle goes in, so pip trusts what this host trusts.
base_from=$UPSTREAM_BASE
if ! podman image exists "$UPSTREAM_BASE" \
    && ! timeout 120 podman pull -q "$UPSTREAM_BASE" >"$work/pull.log" 2>&1; then
  base_from=localhost/shopbench-debian-python:bookworm
  if ! podman image exists "$base_from"; then
    say "cannot pull $UPSTREAM_BASE ($(tail -n 1 "$work/pull.log")); building $base_from"
    command -v mmdebstrap >/dev/null 2>&1 || as_root_apt mmdebstrap \
      || skip "no base image: $UPSTREAM_BASE cannot be pulled and mmdebstrap is missing"
    mmdebstrap --variant=apt --include=python3,python3-venv,ca-certificates bookworm - \
        http://deb.debian.org/debian 2>"$work/mmdebstrap.log" \
      | podman import -q - "$base_from" >/dev/null \
      || skip "no base image: $UPSTREAM_BASE cannot be pulled; mmdebstrap: $(tail -n 1 "$work/mmdebstrap.log")"
  fi
fi
ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
mkdir -p "$work/base"
if [ -f "$ca" ]; then cp "$ca" "$work/base/host-ca.crt"; else : >"$work/base/host-ca.crt"; fi
cat >"$work/base/Containerfile" <<'EOF'
ARG FROM_IMAGE
FROM ${FROM_IMAGE}
COPY host-ca.crt /usr/local/share/host-ca.crt
RUN python3 --version
ENV PIP_CERT=/usr/local/share/host-ca.crt SSL_CERT_FILE=/usr/local/share/host-ca.crt
EOF
[ -s "$work/base/host-ca.crt" ] || sed -i '/^ENV PIP_CERT/d' "$work/base/Containerfile"

# 3. Can this host start a container at all? The defaults first; else runc with limits no
# higher than this host's (crun refuses hosts with cgroup v1 and v2 controllers mixed, and
# a nested host may refuse raising a limit).
opts_sets=("" "--runtime runc|--ulimit nofile=4096:4096 --ulimit nproc=4096:4096")
global="" run_opts="" probe_error=""
for set in "${opts_sets[@]}"; do
  g=${set%%|*} r=${set#*|}
  [ "$set" = "" ] && r=""
  if [[ "$g" == *runc* ]] && ! command -v runc >/dev/null 2>&1; then as_root_apt runc || continue; fi
  # shellcheck disable=SC2086
  if podman $g build -q --network host $r --build-arg FROM_IMAGE="$base_from" -t "$BASE" \
       "$work/base" >"$work/probe.log" 2>&1 \
     && podman $g run --rm --network host $r "$BASE" python3 -c 'print("ok")' \
       >>"$work/probe.log" 2>&1; then
    global=$g run_opts=$r probe_error=""
    break
  fi
  probe_error=$(grep -m1 -i -E 'error|denied|not supported' "$work/probe.log" || tail -n 1 "$work/probe.log")
done
[ -z "$probe_error" ] || skip "podman cannot start a container on this host: $probe_error"
say "containers run here (podman ${global:-with its defaults} $run_opts)"

# 4. The image: a build that fails here is a failure of the Dockerfile or the project.
say "building $IMAGE from deploy/Dockerfile"
previous=$(podman image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
# shellcheck disable=SC2086
podman $global build -q --network host $run_opts --build-arg PYTHON_IMAGE="$BASE" \
    -f deploy/Dockerfile -t "$IMAGE" . >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log" >&2; fail "podman build -f deploy/Dockerfile ."; }
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect -f '{{.Id}}' "$IMAGE")" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true  # the last run's image, untagged now
fi
# shellcheck disable=SC2086
podman $global run --rm --network host $run_opts "$IMAGE" --help >"$work/help.log" 2>&1 \
  && grep -q -- "--neuron.restart_file" "$work/help.log" \
  || { tail -n 20 "$work/help.log" >&2; fail "neurons/validator.py --help in the image"; }

# 5. The validator in the image against a development chain and a miner on this host.
source scripts/venv.sh
bin=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
"$bin/shopbench" chain serve --port 0 --netuid 2 --block-time 0.5 --tempo 20 \
  >"$work/chain.log" 2>&1 &
pids+=($!)
network=""
for _ in $(seq 1 150); do
  network=$(grep -o 'memory://[0-9.]*:[0-9]*' "$work/chain.log" || true)
  [ -n "$network" ] && break
  sleep 0.2
done
[ -n "$network" ] || { cat "$work/chain.log" >&2; fail "shopbench chain serve did not start"; }
wallets="$work/wallets" state="$work/state"
mkdir -p "$state"
"$bin/shopbench" chain register --subtensor.network "$network" --netuid 2 --create \
  --wallet.path "$wallets" --wallet.name validator --stake 1000 --validator-permit >/dev/null \
  && "$bin/shopbench" chain register --subtensor.network "$network" --netuid 2 --create \
    --wallet.path "$wallets" --wallet.name miner >/dev/null \
  || fail "registering on the development chain"
"$PY" neurons/miner.py --netuid 2 --subtensor.network "$network" --wallet.path "$wallets" \
  --wallet.name miner --axon.ip 127.0.0.1 --axon.port 0 --agent.policy careful \
  --logging.file "$work/miner.log" 2>/dev/null &
pids+=($!)
# shellcheck disable=SC2086
podman $global run -d --name shopbench-ci-validator --network host $run_opts \
    -v "$wallets:/wallets:ro" -v "$state:/data" "$IMAGE" \
    --netuid 2 --subtensor.network "$network" --wallet.path /wallets --wallet.name validator \
    --neuron.catalog_products 1000 --neuron.catalog_workers 1 --neuron.tasks_per_round 2 \
    --neuron.weights_interval_blocks 10 --neuron.metrics_port 0 --neuron.min_round_interval_s 1 \
    --neuron.clock.ntp_servers "" --logging.file /data/validator.log >/dev/null \
  || fail "podman run $IMAGE"
deadline=$((SECONDS + 300))
until "$bin/shopbench" chain show --subtensor.network "$network" --netuid 2 >"$work/subnet.json" \
    2>/dev/null \
  && "$PY" -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1]))["weights"])' \
    "$work/subnet.json"; do
  if [ "$(podman inspect -f '{{.State.Running}}' shopbench-ci-validator)" != true ]; then
    podman logs --tail 30 shopbench-ci-validator >&2
    fail "the validator in the image stopped before setting weights"
  fi
  [ "$SECONDS" -lt "$deadline" ] || { podman logs --tail 30 shopbench-ci-validator >&2;
    fail "the validator in the image set no weights within 300 s"; }
  sleep 2
done
say "the validator in the image set weights on the development chain"

# 6. A restart request: honoured between rounds, by exiting 0, the request file removed.
touch "$state/restart-request.json"
status=$(timeout 300 podman wait shopbench-ci-validator) \
  || { podman logs --tail 30 shopbench-ci-validator >&2; fail "no exit after a restart request"; }
[ "$status" = 0 ] && [ ! -e "$state/restart-request.json" ] \
  && grep -q "restart requested by hand" "$state/validator.log" \
  || { podman logs --tail 30 shopbench-ci-validator >&2;
       fail "a restart request did not end the validator with status 0 (status $status)"; }
say "passed: the image builds, its validator sets weights and restarts on request"
