"""A real Ray cluster on loopback for the tests: a head and a second worker node, each a
``ray start --block`` process of its own (one CPU and a small object store each), stopped
with their process groups when the test is done.

The cluster is the outside world the Ray engine talks to; nothing of Ray is faked.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.object_store import free_port

OBJECT_STORE_BYTES = 250_000_000
READY_TIMEOUT_S = 90.0


def ray_env(**extra: str) -> dict[str, str]:
    """The environment of a node or driver: no usage stats, one thread per library, and no
    token authentication (a loopback cluster of the test's own; without this, a token file
    another local Ray run left in ``~/.ray`` turns it on for the nodes and not the driver)."""
    fixed = {"RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1", "RAY_AUTH_MODE": "disabled"}
    return os.environ | fixed | extra


def _ray() -> str:
    return str(Path(sys.executable).with_name("ray"))


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [_ray(), "start", "--block", "--num-cpus", "1",
             "--object-store-memory", str(OBJECT_STORE_BYTES), "--disable-usage-stats", *args],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the node's process group (``ray start --block`` and everything it
    started), SIGKILL when it lingers."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_for(address: str, nodes: int, env: dict[str, str], logs: list[Path]) -> None:
    probe = (
        "import ray, sys, time\n"
        f"ray.init(address={address!r}, logging_level='ERROR', log_to_driver=False)\n"
        f"end = time.time() + {READY_TIMEOUT_S}\n"
        f"while sum(n['Alive'] for n in ray.nodes()) < {nodes}:\n"
        "    if time.time() > end: sys.exit(1)\n"
        "    time.sleep(0.5)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          timeout=READY_TIMEOUT_S + 30)  # fmt: skip
    if done.returncode != 0:
        text = "\n".join(p.read_text(errors="replace")[-2000:] for p in logs if p.exists())
        raise RuntimeError(f"the Ray cluster did not come up: {done.stderr[-2000:]!r}\n{text}")


@contextmanager
def ray_cluster(nodes: int = 2, *, node_env: dict[str, str] | None = None) -> Iterator[str]:
    """A Ray cluster of `nodes` nodes (the head and workers, separate processes) on
    127.0.0.1; yields the head's address (HOST:PORT). `node_env` is added to every node's
    environment (what its workers import with)."""
    # Ray's unix sockets live under the temp folder: keep its path short.
    temp = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))
    env = ray_env(**(node_env or {}))
    port = free_port()
    address = f"127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    logs = [temp / f"node-{i}.log" for i in range(nodes)]
    try:
        procs.append(_start(
            ["--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
             "--include-dashboard=false", "--temp-dir", str(temp / "ray")],
            env, logs[0],
        ))  # fmt: skip
        _wait_for(address, 1, ray_env(), logs)
        for i in range(1, nodes):
            procs.append(_start(["--address", address, "--node-ip-address", "127.0.0.1"],
                                env, logs[i]))  # fmt: skip
        _wait_for(address, nodes, ray_env(), logs)
        yield address
    finally:
        for proc in reversed(procs):
            _stop(proc)
        # A node's session folder is large (its object store spill, its logs).
        deadline = time.time() + 10
        while time.time() < deadline:
            shutil.rmtree(temp, ignore_errors=True)
            if not temp.exists():
                break
            time.sleep(0.5)
