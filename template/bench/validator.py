"""Validator benchmark: turns per second and per-turn overhead of the real round machinery.

Instant miners — a scripted policy that answers at once: thirteen searches, a view, then a
recommendation and terminate on turn 15, so histories grow to the size of turn 15 — run in
separate processes on loopback ports (several miner apps per process, each with its own
hotkey). The validator plays rounds against them with :func:`template.base.round.play_round`:
signed requests, the environment running every tool call on a real catalog, outcome
grading, the rubric judge, the template penalty, signing and the JSONL sink.

- ``turns_per_s``: assistant turns per second of a round at ``--concurrency`` episodes in
  flight, over all the miners;
- ``p50_overhead_ms`` / ``p99_overhead_ms``: the validator's cost per turn at concurrency 1
  — the signed round trip (the miner answers instantly, so this is signing, HTTP and both
  sides' validation), the tool calls, and the episode's grading, judging, signing and
  archiving spread over its turns.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from itertools import zip_longest
from pathlib import Path
from typing import Any

from shopbench.bench.stats import percentile
from shopbench.chat import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.records.tools import Tool

TURNS = 15
SHOPPER_QUESTIONS = (
    "What is your budget?", "Which color family would you like?", "Do you need free shipping?"
)
_IDS = re.compile(r'"product_id":\s*"([^"]+)"')
_WORD = re.compile(r"[A-Za-z]{3,}")


class InstantPolicy:
    """Answers every turn at once; 15 turns per episode whatever the task, asking the shopper
    of a clarify task a question in each of the first three."""

    name = "instant"

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        turn = 1 + sum(1 for m in messages if m.role == "assistant")
        query = next((m.content or "" for m in messages if m.role == "user"), "")
        words = _WORD.findall(query) or ["item"]
        seen = [i for m in messages if m.role == "tool" for i in _IDS.findall(m.content or "")]
        offered = {t.get("function", {}).get("name") for t in tools}
        if turn < TURNS - 1 or not seen:
            q = " ".join(words[(turn + k) % len(words)] for k in range(3))
            calls = [(Tool.FIND_PRODUCT, {"q": q, "page": 1 + turn % 3})]
            thought = f"Searching for {q} on page {1 + turn % 3} to compare more candidates."
            if turn <= 3 and Tool.ASK_SHOPPER in offered:  # a clarify task: three questions
                calls.append((Tool.ASK_SHOPPER, {"question": SHOPPER_QUESTIONS[turn - 1]}))
                thought += f" Asking the customer: {SHOPPER_QUESTIONS[turn - 1]}"
        elif turn == TURNS - 1:
            calls = [(Tool.VIEW_PRODUCT_INFORMATION, {"product_ids": ",".join(seen[:3])})]
            thought = f"Checking the details of {', '.join(seen[:3])}."
        else:
            calls = [(Tool.RECOMMEND_PRODUCT, {"product_ids": seen[0]}),
                     (Tool.TERMINATE, {"status": "success"})]  # fmt: skip
            thought = f"{seen[0]} fits best; recommending it."
        tool_calls = [
            ToolCall(id=f"call_{turn}_{i}", function=FunctionCall(name=n, arguments=json.dumps(a)))
            for i, (n, a) in enumerate(calls, start=1)
        ]
        return AssistantMessage(reasoning_content=thought, tool_calls=tool_calls)


class _ByPort:
    """One ASGI app per listening port: several miners behind one uvicorn server."""

    def __init__(self, apps: dict[int, Any]) -> None:
        self.apps = apps

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        port = (scope.get("server") or ("", 0))[1]
        await self.apps[port](scope, receive, send)


def serve(validator_hotkey: str, names: list[str]) -> None:
    """Serve one instant miner per name; prints ``{name: port}`` as the first stdout line."""
    import uvicorn

    from template.protocol import AgentCard
    from template.serve import bind
    from template.signing import LocalWallet
    from template.transport import CallerGate, MinerAppConfig, create_miner_app

    policy = InstantPolicy()
    gate = CallerGate.allow({validator_hotkey})
    apps: dict[int, Any] = {}
    sockets = []
    ports: dict[str, int] = {}
    for name in names:
        sock = bind()
        port = int(sock.getsockname()[1])
        apps[port] = create_miner_app(
            policy, AgentCard(model="bench/instant"), LocalWallet.derive(name).hotkey_ss58,
            gate, MinerAppConfig(max_active=64, max_waiting=256),
        )  # fmt: skip
        sockets.append(sock)
        ports[name] = port
    print(json.dumps(ports), flush=True)
    config = uvicorn.Config(_ByPort(apps), log_level="error", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=sockets)


def _start(validator_hotkey: str, names: list[str]) -> tuple[subprocess.Popen[str], dict[str, int]]:
    module = "template.bench.validator"
    args = [sys.executable, "-m", module, "serve", validator_hotkey, ",".join(names)]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=root)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline() if ready else ""
    try:
        return proc, {str(k): int(v) for k, v in json.loads(line).items()}
    except ValueError:
        proc.kill()
        raise RuntimeError("a benchmark miner process did not start (see its stderr)") from None


async def _round(ctx: Any, endpoints: list[Any], tasks: list[Any], index: int) -> tuple[Any, float]:
    from template.base.round import play_round

    started = time.perf_counter()
    result = await play_round(ctx, index, None, 0, endpoints, tasks)
    return result, time.perf_counter() - started


def _cpu_ms(pids: list[int]) -> float:
    """CPU time (user + system, ms) used so far by processes `pids`; -1 where /proc is absent."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return -1.0
        total += (int(fields[11]) + int(fields[12])) * 1000 / tick
    return total


async def _measure(
    env: Any, tasks: list[Any], endpoints: list[Any], wallet: Any, sink_dir: Path,
    concurrency: int, episodes: int, miner_pids: list[int],
) -> dict[str, Any]:  # fmt: skip
    from shopbench.archive.jsonl import JsonlSink
    from shopbench.judging.registry import make_judge
    from shopbench.scoring.consensus import ConsensusConfig
    from template.base.metrics import ValidatorMetrics
    from template.base.round import RoundContext, RoundLimits
    from template.signing import HotkeySigner
    from template.transport import ClientConfig, MinerClient

    kept: list[Any] = []

    def context(conc: int) -> RoundContext:
        return RoundContext(
            env=env, client=client, judge=make_judge(), consensus=ConsensusConfig(),
            signer=HotkeySigner(wallet.hotkey), sink=JsonlSink(sink_dir),
            metrics=ValidatorMetrics(),
            limits=RoundLimits(turn_timeout_s=30, episode_timeout_s=300, round_timeout_s=600,
                               concurrency=conc),
            on_archived=kept.extend,
        )  # fmt: skip

    async with MinerClient(wallet, ClientConfig(max_concurrency=concurrency)) as client:
        await _round(context(concurrency), endpoints, tasks[:1], 0)  # connections, warm caches
        per_miner = -(-episodes // len(endpoints))
        chosen = [tasks[i % len(tasks)] for i in range(per_miner)]
        cpu = _cpu_ms(miner_pids)
        own = time.process_time()
        result, wall = await _round(context(concurrency), endpoints, chosen, 1)
        own_ms = (time.process_time() - own) * 1000
        miners_ms = _cpu_ms(miner_pids) - cpu if cpu >= 0 else -1.0
        turns = sum(m.turns for m in result.miners)
        kept.clear()
        one, serial_wall = await _round(context(1), endpoints[:1], tasks[:8], 2)
    played = list(kept)
    spent = sum(t.timings.total_ms for t in played)
    after_ms = max(0.0, serial_wall * 1000 - spent) / max(1, len(played))  # judge, sign, sink
    overheads = [
        t.policy_ms + t.env_ms + (traj.timings.grade_ms + after_ms) / max(1, traj.turns)
        for traj in played
        for t in traj.timings.turns
    ]
    return {
        "turns_per_s": round(turns / wall, 1) if wall else 0.0,
        "p50_overhead_ms": round(percentile(overheads, 0.5), 2),
        "p99_overhead_ms": round(percentile(overheads, 0.99), 2),
        "turns": turns,
        "episodes": sum(m.episodes for m in result.miners),
        "failures": _merge(m.failures for m in result.miners),
        "serial_turns": len(overheads),
        "serial_failures": _merge(m.failures for m in one.miners),
        "wall_s": round(wall, 2),
        # CPU per turn, which the machine's other load does not change much: the validator
        # is one process (its CPU bounds turns/s), the miners share the other cores.
        "validator_cpu_ms_per_turn": round(own_ms / turns, 2) if turns else 0.0,
        "miner_cpu_ms_per_turn": round(miners_ms / turns, 2) if turns and miners_ms >= 0 else None,
    }


def _merge(tallies: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for tally in tallies:
        for k, v in tally.items():
            out[k] = out.get(k, 0) + v
    return out


def run(
    miners: int = 32,
    concurrency: int = 64,
    episodes: int = 64,
    processes: int = 4,
    products: int = 5_000,
    seed: int = 1,
    intents: list[str] | None = None,
) -> dict[str, Any]:
    """Build a catalog and tasks of `intents` (None: every registered intent), start the
    miner processes, measure; the figures as a dict."""
    from shopbench.catalog.store import build_catalog
    from shopbench.env.env import ShoppingEnv
    from shopbench.tasks.generate import BuildConfig, build_tasks
    from shopbench.tasks.intent_registry import intent_names
    from template.signing import LocalWallet
    from template.transport import MinerEndpoint

    validator = LocalWallet.derive("bench-validator")
    names = [f"bench-miner-{i}" for i in range(miners)]
    groups = [names[i::processes] for i in range(min(processes, miners))]
    started = [_start(validator.hotkey_ss58, g) for g in groups]
    try:
        with tempfile.TemporaryDirectory(prefix="shopbench-bench-validator-") as tmp:
            root = Path(tmp)
            build_catalog(root / "catalog", products, seed, workers=2)
            # Every registered intent by default: each plays offline (a knowledge task's
            # web_search reads the catalog's own knowledge pages), so none is left out.
            tasks = build_tasks(
                BuildConfig(catalog=root / "catalog", intents=intents or list(intent_names()),
                            n=4, seed=seed)
            ).tasks  # fmt: skip
            # Intents in turn, so that every miner's few episodes and the serial run meet each.
            by_intent = [[t for t in tasks if t.intent == i] for i in dict.fromkeys(
                t.intent for t in tasks)]  # fmt: skip
            tasks = [t for group in zip_longest(*by_intent) for t in group if t is not None]
            env = ShoppingEnv.open(root / "catalog")
            ports = {k: v for _, p in started for k, v in p.items()}
            endpoints = [
                MinerEndpoint(uid=i, hotkey=LocalWallet.derive(n).hotkey_ss58,
                              url=f"http://127.0.0.1:{ports[n]}")
                for i, n in enumerate(names)
            ]  # fmt: skip
            out = asyncio.run(
                _measure(
                    env,
                    tasks,
                    endpoints,
                    validator,
                    root / "sink",
                    concurrency,
                    episodes,
                    [proc.pid for proc, _ in started],
                )
            )
    finally:
        for proc, _ in started:
            proc.terminate()
            proc.wait(10)
    out |= {"miners": miners, "concurrency": concurrency, "processes": len(groups),
            "products": products}  # fmt: skip
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3].split(","))
    else:
        print(json.dumps(run(), sort_keys=True))
