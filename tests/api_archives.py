"""Archives the API and browser tests serve: one the arena wrote, one with the embargo in
force, one whose every miner-written field is an attack."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from keyed_hash import KeyedHash
from typer.testing import CliRunner

from shopbench.archive.store import ArchiveStore, EmbargoPolicy, read_store
from shopbench.chat import ChatMessage
from shopbench.cli import app
from shopbench.records.trajectory import Trajectory

VALIDATOR = "5ApiValidator"


def run_arena(catalog_dir: Path, out: Path) -> str:
    """Run ``shopbench arena`` (3 miners, 2 rounds of 4 tasks) into `out`; its output."""
    result = CliRunner().invoke(
        app,
        ["arena", "--catalog", str(catalog_dir), "--seed", "7", "--miners", "3",
         "--policies", "careful,guesser,random", "--rounds", "2", "--tasks", "4",
         "--out", str(out), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def store(records: Sequence[Trajectory], root: Path, *, lifted: bool) -> Path:
    """`records` put, as one validator's, through a real store at `root` and sealed."""

    async def go() -> None:
        s = ArchiveStore(root, signer=KeyedHash(VALIDATOR), embargo=EmbargoPolicy(lifted=lifted))
        await s.put([r.model_copy(update={"validator_hotkey": VALIDATOR}) for r in records])
        await s.close()

    asyncio.run(go())
    return root


def embargoed(arena_archive: Path, root: Path) -> tuple[Path, set[str]]:
    """The arena's episodes re-stamped into two epochs under a validator's store (embargo
    in force): round one in epoch 3, round two in epoch 4, bucket 1 — the live one.
    Returns the root and the embargoed episode ids."""
    records = sorted(read_store(arena_archive), key=lambda t: (t.block or 0, t.episode_id))
    first_block = records[0].block
    stamped, live = [], set()
    for t in records:
        epoch = 3 if t.block == first_block else 4
        stamped.append(t.model_copy(update={"epoch": epoch, "bucket": 1}))
        if epoch == 4:
            live.add(t.episode_id)
    return store(stamped, root, lifted=False), live


PAYLOADS = (
    "<script>window.__pwned = 'script'; alert('script')</script>",
    '<img src="http://evil.example/x.png" onerror="window.__pwned=\'img\'; alert(1)">',
    '"><svg onload="window.__pwned=\'svg\'; alert(2)"></svg>',
    '<iframe src="http://evil.example/frame"></iframe>',
    '<link rel="stylesheet" href="http://evil.example/x.css">',
    "<a href=\"javascript:window.__pwned='link'\">click</a>",
    '{{ 7*7 }} ${7*7} </pre></details><b id="injected">bold</b>',
)
HOSTILE = " ".join(PAYLOADS)


def hostile(arena_archive: Path, root: Path) -> tuple[Path, str]:
    """One arena episode whose every miner-written field (reasoning, content, tool
    arguments, the agent's name) holds :data:`HOSTILE`, stored with the embargo lifted.
    Returns the root and the episode's id."""
    base = next(
        t
        for t in read_store(arena_archive)
        if t.turns >= 2 and any(m.tool_calls for m in t.messages)
    )
    messages: list[ChatMessage] = []
    for m in base.messages:
        if m.role == "assistant":
            calls = [
                c.model_copy(update={"function": c.function.model_copy(update={
                    "arguments": json.dumps({"q": HOSTILE, "note": HOSTILE}),
                })})
                for c in m.tool_calls or []
            ]  # fmt: skip
            m = m.model_copy(update={
                "reasoning_content": HOSTILE, "content": HOSTILE, "tool_calls": calls or None,
            })  # fmt: skip
        messages.append(m)
    episode_id = "hostile0000000001"
    record = base.model_copy(update={
        "episode_id": episode_id, "messages": messages, "agent": HOSTILE[:200],
        "status": HOSTILE[:100],
    })  # fmt: skip
    return store([Trajectory.model_validate(record.model_dump())], root, lifted=True), episode_id
