"""An archived episode's tool calls, run again in a fresh episode of the same task.

The replay drives :class:`~shopbench.env.episode.Episode` exactly as the episode loop did:
a turn begun for each turn the log names, each logged call sent with its logged name and
arguments through :meth:`Episode.call` (the one boundary that turns a tool's failure into
an error observation), then the recommendation graded by the environment's own grader.
Tokens are minted by the episode's own key when the validator derived it from the revealed
seed (:mod:`shopbench.env.keys`: the key whose id is the record's episode id), so the token
map comes out of the replay like every observation; an episode whose key was drawn at random
takes its tokens from the record's token map (:class:`~shopbench.env.tokens.RecordedTokenBook`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from shopbench.env.env import ShoppingEnv
from shopbench.env.errors import EnvError
from shopbench.env.keys import find_key
from shopbench.env.tokens import RecordedTokenBook
from shopbench.packs.pack import pack_of, tool_packs
from shopbench.records.outcome import Outcome
from shopbench.records.trajectory import ToolLogEntry, Trajectory
from shopbench.tasks.model import Task
from shopbench.verify.diff import differences


@dataclass(frozen=True)
class Replayed:
    """What a replay produced, in the record's own shapes."""

    tool_log: list[ToolLogEntry]
    recommended: list[str]
    recommended_ids: list[str | None]
    token_map: dict[str, str]
    status: str | None
    outcome: Outcome
    system_prompt: str
    system_prompt_version: str
    tools: list[dict[str, Any]]

    def applied_to(self, record: Trajectory) -> Trajectory:
        """`record` with what the replay produced in place of what it recorded, unjudged and
        unsigned: what the judge reads when re-grading."""
        return record.model_copy(update={
            "tool_log": self.tool_log, "recommended": self.recommended,
            "recommended_ids": self.recommended_ids, "token_map": self.token_map,
            "status": self.status, "outcome": self.outcome, "judge": None, "score": None,
            "signature": None,
        })  # fmt: skip


@dataclass(frozen=True)
class RevealedSeed:
    """A validator's revealed catalog seed and the generation it built: what derives the
    keys of the episodes played on that catalog."""

    seed: int
    generation: int

    def key_of(self, record: Trajectory) -> bytes | None:
        """The derived key whose episode id is the record's; None when no attempt gives it
        (a key drawn at random, another generation, or an id that was altered)."""
        return find_key(
            self.seed, self.generation, record.block, record.miner_uid, record.task_id,
            record.episode_id,
        )  # fmt: skip


def replay_episode(
    env: ShoppingEnv, task: Task, record: Trajectory, key: bytes | None = None
) -> Replayed:
    """Replay `record`'s tool log on `task` in a fresh episode of `env` (never raises for
    anything the log holds: a bad call is an error observation, as it was); with the
    episode's `key` its tokens are minted again, without it they come from the record."""
    # Under the prompt the record was played with; an unknown one shows as a difference.
    with contextlib.suppress(EnvError):
        env = env.with_prompt(record.system_prompt_version)
    if key is not None:
        episode = env.new_episode(task, key=key)
    else:
        book = RecordedTokenBook(record.token_map, secrets.token_bytes(32))
        # The shopper words its answers from the archived episode's id, as it did then.
        episode = env.new_episode(task, tokens=book, dialogue_id=record.episode_id)
    log: list[ToolLogEntry] = []
    # Per pack, the archived words of its answers (an LLM shopper's), in order.
    reworded = {p.name: p.rewordings(record) for p in tool_packs()}
    for entry in record.tool_log:
        while episode.turn < entry.turn and episode.begin_turn():
            pass
        obs = episode.call(entry.name, _as_sent(entry.arguments))
        pack = pack_of(entry.name)
        words = reworded[pack.name] if pack is not None else None
        if obs.error is None and words:
            # The archived words stand if the pack takes them (faithful to its own answer).
            said = words.pop(0)
            if said is not None:
                episode.accept_rewording(said)  # else its own words: a digest that differs
        done = episode.log[-1]
        log.append(entry.model_copy(update={
            "turn": done.turn, "name": done.name, "result_digest": done.digest,
            "error": obs.error,
        }))  # fmt: skip
    ids = [episode.resolve(t) for t in episode.recommended]
    return Replayed(
        tool_log=log,
        recommended=episode.recommended,
        recommended_ids=[episode.resolve(t) if t else None for t in episode.recommended],
        token_map=episode.token_map(),
        status=episode.status,
        outcome=env.grade(task, ids, episode.dialogue()),
        system_prompt=episode.system_prompt,
        system_prompt_version=episode.system_prompt_version,
        tools=episode.tools,
    )


def _as_sent(arguments: dict[str, Any] | str) -> str:
    """The logged arguments as the text the call is replayed with.

    The loop hands the episode the arguments text the agent sent and the log keeps what it
    parsed to. A logged object therefore passed the size check as sent; its compact JSON,
    the shortest text of it, passes that check as the sent text did (the spaced form that
    :meth:`Episode.call` measures a dict by could be over the cap). Text the episode could
    not read was logged as it came, and is replayed as it is.
    """
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def task_differences(record: Trajectory, task: Task) -> Iterator[tuple[str, Any, Any]]:
    """Where the record's copy of the task card differs from the task itself."""
    for name in ("intent", "query", "split", "cluster"):
        yield from differences(getattr(record, name), getattr(task, name), name)


def replay_differences(record: Trajectory, replayed: Replayed) -> Iterator[tuple[str, Any, Any]]:
    """Every field of `record` the replay did not reproduce: the system prompt and tools
    offered, each call's turn, digest and error code, the recommendation, the token map, the
    declared status and the outcome, field by field."""
    system = next((m.content for m in record.messages if m.role == "system"), None)
    yield from differences(system, replayed.system_prompt, "messages[system].content")
    yield from differences(
        record.system_prompt_version, replayed.system_prompt_version, "system_prompt_version"
    )
    yield from differences(record.tools, replayed.tools, "tools")
    for i, (a, b) in enumerate(zip(record.tool_log, replayed.tool_log, strict=True)):
        for name in ("turn", "name", "result_digest", "error"):
            yield from differences(getattr(a, name), getattr(b, name), f"tool_log[{i}].{name}")
    yield from differences(record.recommended, replayed.recommended, "recommended")
    yield from differences(record.recommended_ids, replayed.recommended_ids, "recommended_ids")
    yield from differences(record.token_map, replayed.token_map, "token_map")
    yield from differences(record.status, replayed.status, "status")
    yield from differences(
        record.outcome.model_dump(mode="json"), replayed.outcome.model_dump(mode="json"), "outcome"
    )
