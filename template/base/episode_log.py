"""The miner's own log of the episodes it played: one JSON line per episode.

Every ``POST /step`` names its episode (``episode_id``) and comes signed by a validator's
hotkey; the miner app tells an :class:`EpisodeLog` of each turn it answered or failed, once
the request has passed every check (a refused request names nothing trustworthy). The log
keeps each open episode in memory and writes its line when the miner can tell the episode
is over, or no longer waits to find out:

- ``terminated`` — the miner's reply called ``terminate`` (the status it claimed is kept as
  ``claimed_status``: a claim, not the grader's verdict);
- ``turn_limit`` — it answered the episode's last turn (``turn == max_turns``);
- ``failed`` — it did not answer a turn (``failed`` says why); the validator's loop ends an
  episode at the first turn its agent fails, so the line is written at once;
- ``quiet`` — no request came for ``idle_s``: the validator ended it for a reason a miner is
  not told (the episode's time ran out, too many turns without progress);
- ``evicted`` — more episodes were open than the log keeps; the longest quiet was written;
- ``stopped`` — the miner stopped with the episode open.

Where the miner can know how the validator's record of the episode ends, the line says so
(``termination``, the record's termination reason); whether the episode succeeded is the
grader's alone, published with the record (``shopbench miner report``).

A line is bounded whatever a validator sends: the episode id is the protocol's (64
characters), the query is cut to :data:`MAX_QUERY_CHARS`, the claimed status to
:data:`MAX_STATUS_CHARS`, the refusals are counted by the app's own reasons, the line is
ASCII JSON (a control or bidi character is written as its ``\\u`` escape, so reading the
file in a terminal shows it as text), and the open episodes are at most ``max_open``. The
log is the miner's file alone; scores are not in it (docs/miner.md says why, and where a
score is explained).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.chat import AssistantMessage, clip, read_arguments
from shopbench.records.tools import Tool
from template.protocol import StepRequest

log = logging.getLogger("template.episode_log")

MAX_QUERY_CHARS = 200
"""Characters of the shopper's request kept on a line."""
MAX_STATUS_CHARS = 40
"""Characters of the status a ``terminate`` call declared kept on a line."""
MAX_OPEN = 1024
"""Episodes kept open at once by default; one more writes the longest quiet first."""
TERMINATE = Tool.TERMINATE
"""The tool whose call ends an episode (the environment's ``terminate``)."""

Ended = Literal["terminated", "turn_limit", "failed", "quiet", "evicted", "stopped"]

TERMINATION_OF_FAILURE = {
    "deadline": "policy_timeout",
    "overloaded": "policy_error",
    "policy_failed": "policy_error",
    "invalid_message": "policy_error",
}
"""The termination reason a validator's record carries for a turn the miner failed, by the
miner app's reason (its client sees an error status, or no answer before the deadline)."""


class EpisodeEntry(BaseModel):
    """One line of the log: an episode the miner played, as the miner saw it."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str = Field(description="the id every request of the episode carried")
    validator: str = Field(description="the hotkey that signed its requests")
    query: str = Field(description=f"the shopper's request, cut to {MAX_QUERY_CHARS} characters")
    max_turns: int = Field(description="the episode's turn budget, as the requests gave it")
    last_turn: int = Field(description="the highest turn number asked for")
    turns: int = Field(default=0, description="turns the miner answered")
    tool_calls: int = Field(default=0, description="tool calls in its answers")
    failed: dict[str, int] = Field(
        default_factory=dict,
        description="turns the miner did not answer, by the app's reason (deadline, "
        "overloaded, policy_failed, invalid_message)",
    )
    first_seen: float = Field(description="unix time of its first request")
    last_seen: float = Field(description="unix time of its last request or answer")
    ended: Ended | None = Field(default=None, description="how it ended, as far as the miner knows")
    claimed_status: str | None = Field(
        default=None, description="the status the miner's terminate call claimed (the "
        "grader decides success, not this)",
    )  # fmt: skip
    termination: str | None = Field(
        default=None, description="the termination reason of the validator's record, where "
        "the miner can know it (terminated, turn_limit, policy_timeout, policy_error); None "
        "where it cannot",
    )  # fmt: skip


def _query(request: StepRequest) -> str:
    first = next((m for m in request.messages if m.role == "user"), None)
    return clip(" ".join(str(first.content or "").split()), MAX_QUERY_CHARS) if first else ""


def _declared_status(call_arguments: str) -> str | None:
    parsed = read_arguments(call_arguments)[0]
    status = parsed.get("status") if isinstance(parsed, dict) else None
    return clip(str(status), MAX_STATUS_CHARS) if status is not None else None


class EpisodeLog:
    """The episodes a miner played, appended to `path` as JSON lines (see the module).

    `clock` gives unix time (tests pass their own); writing never raises: a file that
    cannot be written is logged once per failure and the line is lost, never the turn.
    """

    def __init__(
        self,
        path: Path,
        *,
        idle_s: float,
        max_open: int = MAX_OPEN,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if idle_s <= 0 or max_open < 1:
            raise ValueError("idle_s must be > 0 and max_open >= 1")
        self.path = path
        self.idle_s = idle_s
        self.max_open = max_open
        self.clock = clock
        self.open: dict[tuple[str, str], EpisodeEntry] = {}
        self._swept = clock()

    def seen(
        self,
        validator: str,
        request: StepRequest,
        reply: AssistantMessage | None = None,
        failed: str | None = None,
    ) -> None:
        """One turn of `request`'s episode, asked by `validator`: answered with `reply`, or
        not answered for the reason `failed`."""
        now = self.clock()
        key = (validator, request.episode_id)
        entry = self.open.get(key)
        if entry is None:
            if len(self.open) >= self.max_open:
                oldest = min(self.open, key=lambda k: self.open[k].last_seen)
                self._write([self.open.pop(oldest)], "evicted")
            entry = EpisodeEntry(
                episode_id=request.episode_id, validator=validator[:64], query=_query(request),
                max_turns=request.max_turns, last_turn=request.turn, first_seen=now,
                last_seen=now,
            )  # fmt: skip
            self.open[key] = entry
        entry.last_seen = now
        entry.last_turn = max(entry.last_turn, request.turn)
        entry.max_turns = request.max_turns
        ended: Ended | None = None
        if reply is not None:
            entry.turns += 1
            calls = reply.tool_calls or []
            entry.tool_calls += len(calls)
            ends = [c for c in calls if c.function.name == TERMINATE]
            if ends:
                entry.claimed_status = _declared_status(ends[-1].function.arguments)
                ended = entry.termination = "terminated"
            elif request.turn >= request.max_turns:
                ended = entry.termination = "turn_limit"
        elif failed is not None:  # one of the app's own reasons: a closed set
            entry.failed[failed] = entry.failed.get(failed, 0) + 1
            entry.termination = TERMINATION_OF_FAILURE.get(failed, "policy_error")
            ended = "failed"
        if ended is not None:
            self._write([self.open.pop(key)], ended)
        if now - self._swept >= min(1.0, self.idle_s):
            self.sweep()

    def sweep(self) -> None:
        """Write every episode with no request for ``idle_s`` as ended ``quiet``."""
        now = self._swept = self.clock()
        quiet = [k for k, e in self.open.items() if now - e.last_seen >= self.idle_s]
        self._write([self.open.pop(k) for k in quiet], "quiet")

    def close(self) -> int:
        """Write every open episode as ended ``stopped`` (the miner is stopping); how many."""
        done, self.open = list(self.open.values()), {}
        self._write(done, "stopped")
        return len(done)

    def _write(self, entries: Sequence[EpisodeEntry], ended: Ended) -> None:
        if not entries:
            return
        lines = "".join(
            # ASCII: a bidi or control character sent as a query shows as its escape
            json.dumps(e.model_copy(update={"ended": ended}).model_dump(mode="json"),
                       separators=(",", ":")) + "\n"
            for e in sorted(entries, key=lambda e: e.first_seen)
        )  # fmt: skip
        try:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(lines)
        except OSError as e:
            log.warning("episode log %s not written (%s): %d lines lost", self.path, e,
                        len(entries))  # fmt: skip
