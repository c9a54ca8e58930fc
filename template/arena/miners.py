"""The arena's miners: real ``neurons/miner.py`` processes in local mode on loopback ports.

Each miner runs as its own process, exactly as an operator would start it (``python -m
neurons.miner --local --local.allow VALIDATOR ...``), with its wallet in the arena's
temporary wallet path and its logs (JSON lines) in ``OUT/logs``. The port it bound is read
from its ``serving`` log line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from shopbench.agents.local.config import HF_PREFIX
from shopbench.arena.errors import ArenaError

READY_TIMEOUT_S = 120.0
_REPO_ROOT = Path(__file__).resolve().parents[2]


class MinerProcess:
    """One miner process; :meth:`wait_ready` gives its port. `policy_config` is a file of
    the model's options (``--agent.policy_config``), for a model policy."""

    def __init__(
        self,
        uid: int,
        policy: str,
        wallet_path: Path,
        wallet_name: str,
        validator_hotkey: str,
        log_path: Path,
        seed: int = 0,
        policy_config: Path | None = None,
    ) -> None:
        self.uid = uid
        self.policy = policy
        self.log_path = log_path
        self.port: int | None = None
        # The miner runs from the repository root: a path it is given is made absolute here.
        if policy.startswith(HF_PREFIX):
            policy = HF_PREFIX + str(Path(policy.removeprefix(HF_PREFIX)).resolve())
        args = [
            sys.executable, "-m", "neurons.miner", "--local",
            "--local.allow", validator_hotkey,
            "--wallet.path", str(wallet_path), "--wallet.name", wallet_name,
            "--axon.ip", "127.0.0.1", "--axon.port", "0",
            "--agent.policy", policy, "--agent.seed", str(seed),
            "--neuron.max_active", "32", "--neuron.max_waiting", "128",
            "--neuron.clock.ntp_servers", "",  # one machine: the clocks are the same clock
            "--logging.format", "json", "--logging.level", "INFO",
        ]  # fmt: skip
        if policy_config is not None:  # a model's options (a reference policy takes none)
            args += ["--agent.policy_config", str(Path(policy_config).resolve())]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        self._log = log_path.open("wb")
        # A new session: a Ctrl-C at the terminal reaches the arena, which stops the miners.
        self.process = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, cwd=_REPO_ROOT, env=env,
            start_new_session=True,
        )  # fmt: skip

    def _serving_port(self) -> int | None:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if '"serving"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == "serving" and isinstance(record.get("port"), int):
                return int(record["port"])
        return None

    def poll_ready(self) -> bool:
        """True once the miner serves; ArenaError if it exited instead."""
        if self.port is None:
            self.port = self._serving_port()
        if self.port is not None:
            return True
        if self.process.poll() is not None:
            raise ArenaError(
                f"miner uid {self.uid} ({self.policy}) exited with status "
                f"{self.process.returncode} before serving; last lines of {self.log_path}:\n"
                + self.tail()
            )
        return False

    def tail(self, lines: int = 8) -> str:
        """The last lines of the miner's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after `grace_s`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(grace_s)
        self._log.close()


def wait_all_ready(miners: list[MinerProcess], timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until every miner serves; ArenaError naming the first that failed or is late."""
    deadline = time.monotonic() + timeout_s
    waiting = list(miners)
    while waiting:
        waiting = [m for m in waiting if not m.poll_ready()]
        if not waiting:
            return
        if time.monotonic() > deadline:
            m = waiting[0]
            raise ArenaError(
                f"miner uid {m.uid} ({m.policy}) did not serve within {timeout_s:g} s; last "
                f"lines of {m.log_path}:\n{m.tail()}"
            )
        time.sleep(0.1)
