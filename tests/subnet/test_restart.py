"""Kill -9 and restart: the validator keeps its scores, rotation, catalog and archive.

The validator runs in a child process (this file, run as a script) with its miners served
in the same process; the test kills it with SIGKILL in the middle of a round, starts it
again over the same directory, and checks what came back.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from shopbench.archive.jsonl import JsonlSink, read_trajectories
from shopbench.archive.store import WAL_DIR, read_store
from template.base.state import (
    STATE_FILE,
    StateError,
    ValidatorState,
    load_state,
    save_state,
)

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

NETUID = 5
HERE = Path(__file__).resolve()


# -- the child: a validator with two in-process miners -------------------------------------


def _child(state_dir: Path, rounds: int) -> None:
    from shopbench.agents.registry import make_policy
    from template.base.config import (
        ClockConfig,
        ValidatorConfig,
        ValidatorNeuronConfig,
    )
    from template.base.validator import Validator
    from template.chain import LocalChain, MemorySubstrate, SubnetParams
    from template.protocol import AgentCard
    from template.serve import BackgroundServer
    from template.signing import LocalWallet
    from template.transport import CallerGate, create_miner_app

    validator = LocalWallet.derive("restart-validator")

    class Slow:
        """A careful agent for its first round (4 episodes); from its fifth episode on it
        answers a first turn only after 30 s, three times the validator's turn timeout, so
        no later round of this process ends before the test has killed it (the careful
        miner's episodes of that round are archived within a fraction of a second)."""

        name = "slow-careful"

        def __init__(self) -> None:
            self.inner = make_policy("careful", seed=3)
            self.episodes = 0

        async def act(self, messages: Any, tools: Any) -> Any:
            if not any(m.role == "assistant" for m in messages):
                self.episodes += 1
                if self.episodes > 4:
                    await asyncio.sleep(30)
            return await self.inner.act(messages, tools)

    substrate = MemorySubstrate()
    owner = LocalWallet.derive("restart-owner")
    substrate.add_subnet(NETUID, owner.hotkey_ss58, owner.coldkey_ss58,
                         SubnetParams(tempo=100, weights_rate_limit=1))  # fmt: skip
    substrate.register(NETUID, owner.hotkey_ss58, owner.coldkey_ss58)
    substrate.register(NETUID, validator.hotkey_ss58, validator.coldkey_ss58, 10_000, True)
    servers = []
    for name, policy in (("restart-careful", make_policy("careful", seed=1)),
                         ("restart-slow", Slow())):  # fmt: skip
        wallet = LocalWallet.derive(name)
        app = create_miner_app(policy, AgentCard(model=name), wallet.hotkey_ss58,
                               CallerGate.allow({validator.hotkey_ss58}))  # fmt: skip
        server = BackgroundServer(app).start()
        servers.append(server)
        substrate.register(NETUID, wallet.hotkey_ss58, wallet.coldkey_ss58)
        asyncio.run(LocalChain(substrate, wallet, NETUID).serve("127.0.0.1", server.port))
    neuron = ValidatorNeuronConfig(
        full_path=str(state_dir), catalog_products=400, catalog_workers=1,
        catalog_rotation_epochs=0, intents=["product", "shop"], tasks_per_round=4,
        bank_per_intent=6, concurrency=2, turn_timeout_s=10, min_round_interval_s=0,
        weights_interval_blocks=5, metrics_port=0, clock=ClockConfig(ntp_servers=[]),
    )  # fmt: skip

    def saved(result: Any) -> None:
        print("round", result.index, flush=True)
        substrate.advance(10)

    v = Validator(
        ValidatorConfig(netuid=NETUID, neuron=neuron),
        LocalChain(substrate, validator, NETUID), validator,
        on_archived=lambda ts: print(*(f"ack {t.episode_id}" for t in ts), sep="\n", flush=True),
        on_round=saved,
    )  # fmt: skip
    emas = {str(u): m.ema for u, m in v.state.scores.miners.items()}
    print("restored", json.dumps({"round": v.state.round, "emas": emas}), flush=True)

    async def go() -> None:
        try:
            await v.run(rounds=rounds)
        finally:
            await v.close()

    asyncio.run(go())
    for server in servers:
        server.stop()


# -- the test --------------------------------------------------------------------------------


def _spawn(state_dir: Path, rounds: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE), "child", str(state_dir), str(rounds)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip


def test_a_validator_killed_mid_round_restarts_with_everything_it_saved(tmp_path: Path) -> None:
    state_dir = tmp_path / "validator"
    archive = state_dir / "archive"
    first = _spawn(state_dir, rounds=50)
    assert first.stdout is not None
    acked: list[str] = []
    rounds_done = 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            line = first.stdout.readline()
            if not line:
                raise AssertionError(f"the validator exited: {first.stderr.read()}")  # type: ignore[union-attr]
            if line.startswith("ack "):
                acked.append(line.split()[1])
                if rounds_done >= 1:
                    break  # the second round has archived some of its episodes: kill now
            elif line.startswith("round "):
                rounds_done += 1
        else:
            raise AssertionError("no second round within the time allowed")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    assert first.returncode == -signal.SIGKILL
    saved = json.loads((state_dir / STATE_FILE).read_text())
    assert saved["round"] == rounds_done  # killed inside the next round, before its save
    generation = saved["rotation"]["current"]
    manifest = Path(generation["directory"]) / "manifest.json"
    built_at = manifest.stat().st_mtime_ns
    assert list((archive / WAL_DIR).glob("*.wal"))  # the acknowledged tail waits in a segment

    second = _spawn(state_dir, rounds=1)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    restored = json.loads(out.splitlines()[0].removeprefix("restored "))
    assert restored["round"] == saved["round"]
    assert restored["emas"] == {u: m["ema"] for u, m in saved["scores"]["miners"].items()}
    assert all(v > 0 for v in restored["emas"].values())
    after = json.loads((state_dir / STATE_FILE).read_text())
    assert after["round"] == saved["round"] + 1
    assert after["rotation"]["current"]["seed"] == generation["seed"]
    assert manifest.stat().st_mtime_ns == built_at  # the catalog was reopened, not rebuilt
    # the restart replayed the segment: nothing the sink acknowledged was lost or doubled
    final = [t.episode_id for t in read_store(archive)]
    assert set(acked) <= set(final) and len(final) == len(set(final))
    assert not list((archive / WAL_DIR).glob("*.wal"))  # all rolled into shards at close


# -- the pieces: the sink's torn tail, the state file --------------------------------------


def _trajectory(episode_id: str) -> Any:
    from shopbench.records.trajectory import Trajectory

    return Trajectory.model_validate({
        "episode_id": episode_id, "task_id": "t", "intent": "product", "query": "q",
        "split": "live", "agent": "a", "system_prompt_version": "1", "tools": [],
        "messages": [], "tool_log": [], "recommended": [], "recommended_ids": [],
        "token_map": {}, "termination": "turn_limit", "turns": 0,
        "outcome": {"task_id": "t", "intent": "product", "success": False, "rule_scores": [],
                    "mean_rule": 0.0, "slots": [], "shops": 0, "matcher": "lexical"},
        "timings": {"started_at": 0, "total_ms": 0, "policy_ms": 0, "env_ms": 0, "grade_ms": 0},
    })  # fmt: skip


def test_a_torn_last_line_is_cut_and_acknowledged_lines_survive(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path)
    asyncio.run(sink.put([_trajectory("a"), _trajectory("b")]))
    with sink.path.open("ab") as f:
        f.write(b'{"episode_id": "torn", "task')  # a write cut short by a kill
    assert [t.episode_id for t in read_trajectories(sink.path)] == ["a", "b"]
    reopened = JsonlSink(tmp_path)
    assert reopened.repaired_bytes == len(b'{"episode_id": "torn", "task')
    asyncio.run(reopened.put([_trajectory("c")]))
    assert [t.episode_id for t in read_trajectories(sink.path)] == ["a", "b", "c"]


def test_the_state_file_is_replaced_whole_and_belongs_to_one_neuron(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE
    state = ValidatorState(hotkey="hk", netuid=2, round=7)
    state.scores.update(3, "m", 0.5, alpha=0.1)
    save_state(state, path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # it holds the secret catalog seed
    assert not list(tmp_path.glob(".*.tmp"))
    loaded = load_state(path, "hk", 2)
    assert loaded is not None and loaded.round == 7 and loaded.scores.miners[3].ema == 0.05
    with pytest.raises(StateError, match="saved by hotkey hk on netuid 2"):
        load_state(path, "other", 2)
    path.write_text("{not json")
    with pytest.raises(StateError, match="unreadable validator state"):
        load_state(path, "hk", 2)
    assert load_state(tmp_path / "none.json", "hk", 2) is None


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        _child(Path(sys.argv[2]), int(sys.argv[3]))
