"""One decision stream, one share: a miner earns nothing for the decisions it took from another.

A miner that replays another's decisions — word for word, reworded, or padded with a
search that shows the same products, a look at one more product or a refused call — adds no
decision to the archive and, unchecked, takes a full share of emission from the miner it
copies. :class:`CopyBook` remembers each miner's decisions (:mod:`shopbench.records.decisions`,
the normalisation curation's ``duplicates`` rule reads), its score and its answer time over
the episode on every task of the last ``window_rounds`` rounds it played. Two miners that
played at least ``min_shared`` of the same tasks and made the same decisions
(:func:`~shopbench.records.decisions.same_decisions`) on at least ``min_same_share`` of
them are one decision stream. Tasks on which both did nothing are no evidence either way.

Who follows whom is decided on evidence first: on the tasks with the same decisions, the
miner that answered slower on at least ``min_later_share`` of them (``min_timed`` at least)
follows the other, whoever registered first — a relay cannot answer a turn before the miner
it relays has answered it. Without that evidence (the same policy on two hotkeys answers as
fast as itself) the later registered follows (the higher block, then the higher uid).

**Credit is per task** (:meth:`CopyBook.copied_tasks`, :func:`credited_score`): the
follower's episodes of the round whose decisions are those the followed miner made on the
same task count 0 in its round score; its other episodes count as they scored. So a copy
earns nothing, and a miner that plays like another except where it is better keeps what it
adds.

The same book on every validator gives the same groups, so the parameters
(:class:`CopyRules`) are consensus parameters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.records.decisions import (
    DECISIONS_VERSION,
    Decisions,
    contains,
    episode_decisions,
)
from shopbench.records.trajectory import Trajectory

_DIGEST_CHARS = 16


class CopyRules(BaseModel):
    """When two miners' decisions make them one miner."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(default=True, description="group miners whose decisions coincide")
    window_rounds: int = Field(
        default=8, ge=1, le=256, description="rounds of each miner's decisions remembered"
    )
    min_shared: int = Field(
        default=8, ge=1, description="tasks two miners must both have played to be compared"
    )
    min_same_share: float = Field(
        default=0.8, gt=0, le=1,
        description="share of those tasks with the same decisions that makes them one group",
    )  # fmt: skip
    min_timed: int = Field(
        default=16, ge=1,
        description="tasks with the same decisions and both answer times known that the "
        "timing evidence needs (else the earlier registration leads)",
    )  # fmt: skip
    min_later_share: float = Field(
        default=0.9, gt=0.5, le=1,
        description="share of those tasks on which one miner answered slower (its answer "
        "time over the episode) that makes it the follower, whoever registered first",
    )  # fmt: skip


class TaskDecisions(BaseModel):
    """One episode's decisions as the book keeps them: short digests, enough to compare."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    core: str = Field(description="digest of the picks")
    parts: list[str] = Field(
        default_factory=list,
        description="digests of the searches (by what they returned), the products opened "
        "and the refused calls",
    )
    explored: list[str] = Field(
        default_factory=list, description="digests of the searches whose products were opened"
    )
    empty: bool = Field(default=False, description="no search, no view, no pick")
    score: float | None = Field(default=None, description="the episode's score")
    latency_ms: float | None = Field(
        default=None,
        description="the miner's answer time over the episode (every turn's wait, summed): "
        "a relay's is at least the relayed miner's, and padding only adds to it",
    )

    @classmethod
    def of(cls, d: Decisions) -> TaskDecisions:
        """The digests of `d`."""
        return cls.model_construct(  # built from checked parts: no validation to pay for
            core=d.core()[:_DIGEST_CHARS],
            parts=sorted(_digest(p) for p in d.parts()),
            explored=sorted(_digest(p) for p in d.explored_parts()),
            empty=not (d.searches or d.opened or any(d.picks)),
        )

    def same_as(self, other: TaskDecisions) -> bool:
        """:func:`~shopbench.records.decisions.same_decisions` over the digests."""
        if self.core != other.core:
            return False
        mine, theirs = frozenset(self.parts), frozenset(other.parts)
        return contains(theirs, mine, frozenset(other.explored)) or contains(
            mine, theirs, frozenset(self.explored)
        )


class MinerDecisions(BaseModel):
    """One uid's decisions per round, tied to the hotkey that made them."""

    model_config = ConfigDict(extra="forbid")

    hotkey: str
    rounds: dict[int, dict[str, TaskDecisions]] = Field(
        default_factory=dict, description="round → task id → decisions"
    )

    def tasks(self) -> dict[str, TaskDecisions]:
        """Every task of the remembered rounds → its decisions (a later round's wins)."""
        out: dict[str, TaskDecisions] = {}
        for r in sorted(self.rounds):
            out.update(self.rounds[r])
        return out


class CopyGroup(BaseModel):
    """A miner found to follow another's decisions, and the evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    uid: int
    of_uid: int = Field(description="the miner it follows, who keeps the shared tasks' credit")
    shared: int = Field(description="tasks both played in the window")
    same: int = Field(description="of those, tasks with the same decisions")
    timed: int = Field(default=0, description="of those, tasks with both answer times known")
    later: int = Field(default=0, description="of those, tasks on which this miner was slower")
    by: Literal["timing", "registration"] = Field(
        default="registration",
        description="what decided who follows: the answer times, or (without clear timing "
        "evidence) the earlier registration",
    )


class CopyBook(BaseModel):
    """Each miner's recent decisions, and the groups they form."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(
        default=DECISIONS_VERSION,
        description="the normalisation of decisions the book holds (records.decisions)",
    )
    miners: dict[int, MinerDecisions] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _another_normalisation_starts_afresh(cls, data: Any) -> Any:
        # A book of another release compared decisions otherwise: comparing its digests
        # with this release's would match nothing, so its miners are forgotten (a book
        # written before versions were kept is version 1).
        if isinstance(data, dict) and data.get("version", 1) != DECISIONS_VERSION:
            return {"version": DECISIONS_VERSION}
        return data

    def observe(self, hotkeys: Mapping[int, str]) -> None:
        """Forget a uid no longer registered or now held by another hotkey."""
        for uid in list(self.miners):
            if hotkeys.get(uid) != self.miners[uid].hotkey:
                del self.miners[uid]

    def record(
        self, uid: int, hotkey: str, round_index: int, decisions: Mapping[str, TaskDecisions],
        window_rounds: int,
    ) -> None:  # fmt: skip
        """Remember `uid`'s `decisions` (task id → decisions, :func:`round_decisions`) of
        round `round_index`; keep its last `window_rounds` rounds."""
        entry = self.miners.get(uid)
        if entry is None or entry.hotkey != hotkey:
            entry = MinerDecisions(hotkey=hotkey)
        entry.rounds[round_index] = dict(decisions)
        for old in sorted(entry.rounds)[:-window_rounds]:
            del entry.rounds[old]
        self.miners[uid] = entry

    def groups(self, rules: CopyRules, registered: Mapping[int, int]) -> dict[int, CopyGroup]:
        """Each following uid → the uid it follows and the evidence (see the module
        docstring); `registered` is each uid's registration block (a uid without one counts
        as registered last). A miner that follows several follows the earliest registered."""
        if not rules.enabled:
            return {}
        order = sorted(self.miners, key=lambda u: (registered.get(u, 2**63), u))
        tasks = {u: self.miners[u].tasks() for u in order}
        found: dict[int, CopyGroup] = {}
        for i, first in enumerate(order):
            for second in order[i + 1 :]:
                c = _compare(tasks[first], tasks[second])
                if c.shared < rules.min_shared or c.same < rules.min_same_share * c.shared:
                    continue
                group = _follower(first, second, c, rules)
                held = found.get(group.uid)
                if held is None or order.index(group.of_uid) < order.index(held.of_uid):
                    found[group.uid] = group
        return found

    def copied_tasks(self, uid: int, of_uid: int, round_index: int) -> list[str]:
        """The tasks of `uid`'s round `round_index` on which its decisions are those
        `of_uid` made on the same task (the tasks it earns nothing for)."""
        mine = self.miners.get(uid)
        theirs = self.miners.get(of_uid)
        if mine is None or theirs is None:
            return []
        lead = theirs.tasks()
        return sorted(
            task for task, d in mine.rounds.get(round_index, {}).items()
            if task in lead and not (d.empty and lead[task].empty) and d.same_as(lead[task])
        )  # fmt: skip


def round_decisions(episodes: Iterable[Trajectory]) -> dict[str, TaskDecisions]:
    """Task id → the decisions of a miner's episode of it, its score and its answer time
    over the episode, for :meth:`CopyBook.record`."""
    out: dict[str, TaskDecisions] = {}
    for t in episodes:
        times = [turn.policy_ms for turn in t.timings.turns]
        d = TaskDecisions.of(episode_decisions(t))
        out[t.task_id] = d.model_copy(update={
            "score": t.score, "latency_ms": round(sum(times), 3) if times else None,
        })  # fmt: skip
    return out


def credited_score(
    decisions: Mapping[str, TaskDecisions], tasks: int, copied: Iterable[str]
) -> float:
    """A round score with the `copied` tasks earning nothing: the mean episode score over
    the round's `tasks`, each copied task's counted 0."""
    zero = set(copied)
    total = sum(d.score or 0.0 for task, d in decisions.items() if task not in zero)
    return round(total / tasks, 6) if tasks else 0.0


@dataclass
class _Comparison:
    shared: int = 0
    same: int = 0
    a_later: int = 0  # of the same, tasks on which the first miner answered slower
    b_later: int = 0


def _compare(a: Mapping[str, TaskDecisions], b: Mapping[str, TaskDecisions]) -> _Comparison:
    c = _Comparison()
    for task in a.keys() & b.keys():
        x, y = a[task], b[task]
        if x.empty and y.empty:
            continue
        c.shared += 1
        if not x.same_as(y):
            continue
        c.same += 1
        if x.latency_ms is not None and y.latency_ms is not None:
            c.a_later += x.latency_ms > y.latency_ms
            c.b_later += y.latency_ms > x.latency_ms
    return c


def _follower(first: int, second: int, c: _Comparison, rules: CopyRules) -> CopyGroup:
    """Which of two miners with the same decisions follows the other: the one that answered
    slower on most of those tasks (a relay cannot answer before the miner it relays), else
    the later registered."""
    timed = c.a_later + c.b_later
    shared, same = c.shared, c.same
    if timed >= rules.min_timed and c.a_later >= rules.min_later_share * timed:
        return CopyGroup(uid=first, of_uid=second, shared=shared, same=same, timed=timed,
                         later=c.a_later, by="timing")  # fmt: skip
    if timed >= rules.min_timed and c.b_later >= rules.min_later_share * timed:
        return CopyGroup(uid=second, of_uid=first, shared=shared, same=same, timed=timed,
                         later=c.b_later, by="timing")  # fmt: skip
    return CopyGroup(uid=second, of_uid=first, shared=shared, same=same, timed=timed,
                     later=c.b_later)  # fmt: skip


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
