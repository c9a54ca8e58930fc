"""Bad operator input ends the neuron at start in one line, exit status 2, naming what to
change: an unknown network, a port in use (and who holds it), a netuid the chain does not
have, the root network's netuid that a template left in place."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from template.base.neuron import write_local_wallet
from template.base.ports import port_holder
from template.chain import MemorySubstrate, SubnetParams
from template.chain.memory.server import MemoryChainService, memory_chain_app
from template.serve import BackgroundServer

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@pytest.fixture(scope="module")
def wallets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("operator-wallets")
    write_local_wallet(path, "op")
    return path


def run_neuron(
    script: str, args: list[str], wallets: Path, tmp: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """neurons/<script>.py as an operator starts it (no NTP query); it must stop by itself."""
    common = ["--wallet.path", str(wallets), "--wallet.name", "op",
              "--neuron.clock.ntp_servers", ""]  # fmt: skip
    if script == "validator":
        common += ["--neuron.full_path", str(tmp / "validator")]
    else:
        common += ["--agent.policy", "careful"]
    return subprocess.run(
        [sys.executable, str(ROOT / "neurons" / f"{script}.py"), *args, *common],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )  # fmt: skip


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    return lines[0]


@pytest.mark.parametrize("script", ["validator", "miner"])
def test_an_unknown_network_lists_the_known_ones(
    script: str, wallets: Path, tmp_path: Path
) -> None:
    line = one_line(run_neuron(
        script, ["--netuid", "3", "--subtensor.network", "mainnet"], wallets, tmp_path
    ))  # fmt: skip
    assert line.startswith("error: --subtensor.network: unknown network 'mainnet'")
    for known in ("finney", "test", "local", "ws(s)://", "memory://HOST:PORT"):
        assert known in line


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port this test process listens on."""
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_port_in_use_names_the_port_and_its_holder(
    held_port: int, wallets: Path, tmp_path: Path
) -> None:
    holder = f"pid {os.getpid()}"
    assert (port_holder(held_port) or "").startswith(holder)
    validator = one_line(run_neuron(
        "validator", ["--netuid", "3", "--subtensor.network", "ws://127.0.0.1:9",
                      "--neuron.metrics_port", str(held_port)], wallets, tmp_path,
    ))  # fmt: skip
    assert validator.startswith(
        f"error: --neuron.metrics_port {held_port}: port {held_port} is in use"
    )
    assert f"held by {holder}" in validator
    miner = one_line(run_neuron(
        "miner", ["--local", "--local.allow", "x", "--axon.port", str(held_port)], wallets,
        tmp_path,
    ))  # fmt: skip
    assert miner.startswith(f"error: --axon.port {held_port}: port {held_port} is in use")
    assert f"held by {holder}" in miner


@pytest.fixture(scope="module")
def chain_network() -> Iterator[str]:
    """A served development chain with one subnet, netuid 2."""
    chain = MemorySubstrate()
    chain.add_subnet(2, params=SubnetParams(tempo=10))
    with BackgroundServer(memory_chain_app(MemoryChainService(chain))) as server:
        yield server.url.replace("http://", "memory://")


@pytest.mark.parametrize("script", ["validator", "miner"])
def test_a_netuid_the_chain_does_not_have_stops_the_neuron(
    script: str, chain_network: str, wallets: Path, tmp_path: Path
) -> None:
    args = ["--netuid", "7", "--subtensor.network", chain_network, "--axon.port", "0"]
    if script == "validator":
        args = [*args[:4], "--neuron.metrics_port", "0"]
    line = one_line(run_neuron(script, args, wallets, tmp_path))
    assert line.startswith("error: --netuid 7: netuid 7 does not exist on this chain")
    assert chain_network in line


@pytest.mark.parametrize("script", ["validator", "miner"])
def test_the_root_netuid_is_refused_as_a_placeholder(
    script: str, wallets: Path, tmp_path: Path
) -> None:
    line = one_line(run_neuron(script, [], wallets, tmp_path, env={"SHOPBENCH_NETUID": "0"}))
    assert line.startswith("error: SHOPBENCH_NETUID: netuid 0 is the root network, not a subnet")


def _pm2(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: pm2's config file cannot be evaluated")
    return subprocess.run(
        [node, "-e", "console.log(JSON.stringify(require(process.argv[1])))",
         str(DEPLOY / "pm2" / "ecosystem.config.js")],
        capture_output=True, text=True, timeout=60,
        env={**{k: v for k, v in os.environ.items() if k != "NETUID"}, **env},
    )  # fmt: skip


def test_pm2_refuses_to_start_without_a_netuid_and_does_not_restart_a_refused_one() -> None:
    for env in ({}, {"NETUID": ""}, {"NETUID": "0"}):
        refused = _pm2(env)
        assert refused.returncode != 0 and "set NETUID" in refused.stderr
    apps = {a["name"]: a for a in json.loads(_pm2({"NETUID": "12"}).stdout)["apps"]}
    validator = apps["shopbench-validator"]
    assert validator["env"]["SHOPBENCH_NETUID"] == "12"
    assert 2 in validator["stop_exit_codes"] and 0 not in validator["stop_exit_codes"]


def test_systemd_and_compose_do_not_restart_a_validator_refused_at_start() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(DEPLOY / "systemd" / "shopbench-validator.service")
    assert unit["Service"]["RestartPreventExitStatus"].split() == ["2"]
    compose = (DEPLOY / "compose.yaml").read_text()
    assert "SHOPBENCH_NETUID: ${NETUID:?" in compose  # compose refuses to start without one
