"""Archives the API and browser tests serve: one the arena wrote, one with the embargo in
force, one whose every miner-written field is an attack, and a pair of episodes of one task
with a known first divergence."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from typer.testing import CliRunner

from shopbench.archive.store import ArchiveStore, EmbargoPolicy, read_store
from shopbench.chat import ChatMessage
from shopbench.cli import app
from shopbench.records.binding import bind_tool_messages, result_digest
from shopbench.records.trajectory import Trajectory
from support.keyed_hash import KeyedHash

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
    arguments, the agent's name) holds :data:`HOSTILE`, and the model and revision its
    agent card named two of the :data:`PAYLOADS` (a card's limits let them through: each is
    one printable line), stored with the embargo lifted. Returns the root and the episode's
    id."""
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
        "status": HOSTILE[:100], "agent_model": PAYLOADS[1], "agent_revision": PAYLOADS[6],
    })  # fmt: skip
    return store([Trajectory.model_validate(record.model_dump())], root, lifted=True), episode_id


def _token_shifter(salt: int) -> Callable[[str], str]:
    """A bijection of product (10-digit) and shop (9-digit) tokens onto tokens of the same
    shape, one per `salt`."""

    def shift(token: str) -> str:
        low = 10 ** (len(token) - 1)
        return str(low + (int(token) - low + salt) % (9 * low))

    return shift


def retokened(t: Trajectory, episode_id: str, *, salt: int) -> Trajectory:
    """`t` as another episode of its task shows it: every token of its map replaced by a
    fresh token of the same shape in the conversation, the tool log, the recommendation and
    the map, the log's digests taken again over the rewritten observations."""
    shift = _token_shifter(salt)
    new = {tok: shift(tok) for tok in t.token_map}
    pattern = re.compile(r"\b\d{9,10}\b")

    def sub(text: str | None) -> str | None:
        return None if text is None else pattern.sub(lambda m: new.get(m.group(), m.group()), text)

    bound = bind_tool_messages(t.messages, t.tool_log)
    messages: list[ChatMessage] = []
    for m in t.messages:
        calls = [
            c.model_copy(update={"function": c.function.model_copy(
                update={"arguments": sub(c.function.arguments)})})
            for c in m.tool_calls or []
        ]  # fmt: skip
        messages.append(m.model_copy(update={
            "content": sub(m.content), "reasoning_content": sub(m.reasoning_content),
            "tool_calls": calls or m.tool_calls,
        }))  # fmt: skip
    log = list(t.tool_log)
    for mi, li in bound.items():
        args = log[li].arguments
        args = json.loads(sub(json.dumps(args)) or "") if isinstance(args, dict) else sub(args)
        log[li] = log[li].model_copy(
            update={"arguments": args, "result_digest": result_digest(messages[mi].content)}
        )
    record = t.model_copy(update={
        "episode_id": episode_id, "messages": messages, "tool_log": log,
        "recommended": [new.get(r, r) for r in t.recommended],
        "token_map": {new[tok]: cid for tok, cid in t.token_map.items()}, "signature": None,
    })  # fmt: skip
    return Trajectory.model_validate(record.model_dump())


DIVERGES_AT = 2
"""The turn at which the pair :func:`diverging` builds first differs."""


def diverging(arena_archive: Path, root: Path) -> tuple[Path, str, str]:
    """Two episodes of one task with a known first divergence, stored with the embargo
    lifted: the careful policy's episode of a shop task, twice, each shown tokens of its own,
    the second viewing the turn's second product twice (its answer repeated, the tool log
    kept in step) at turn :data:`DIVERGES_AT`. Returns the root and the two episode ids."""
    base = min(
        (t for t in read_store(arena_archive)
         if t.intent == "shop" and t.success and t.turns > DIVERGES_AT),
        key=lambda t: t.episode_id,
    )  # fmt: skip
    a = retokened(base, "pair00000000000a", salt=1)
    b = retokened(base, "pair00000000000b", salt=2)
    at = [i for i, m in enumerate(b.messages) if m.role == "assistant"][DIVERGES_AT - 1]
    calls = b.messages[at].tool_calls or []
    assert len(calls) >= 2, "the turn to change views two products"
    first, second = calls[0], calls[1]
    changed = first.model_copy(update={"function": second.function})
    answers = {m.tool_call_id: i for i, m in enumerate(b.messages) if m.role == "tool"}
    messages = list(b.messages)
    messages[at] = messages[at].model_copy(update={"tool_calls": [changed, *calls[1:]]})
    repeated = messages[answers[second.id]].content
    messages[answers[first.id]] = messages[answers[first.id]].model_copy(
        update={"content": repeated}
    )
    log = list(b.tool_log)
    entry = bind_tool_messages(b.messages, b.tool_log)[answers[first.id]]
    log[entry] = log[entry].model_copy(update={
        "arguments": json.loads(second.function.arguments),
        "result_digest": result_digest(repeated),
    })  # fmt: skip
    b = Trajectory.model_validate(
        b.model_copy(update={"messages": messages, "tool_log": log}).model_dump()
    )
    return store([a, b], root, lifted=True), a.episode_id, b.episode_id
