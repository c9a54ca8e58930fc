"""One decision stream, one share: miners whose decisions copy an earlier miner's earn nothing.

A miner that replays another's decisions — word for word, reworded, or padded with a
search that shows the same products, a look at one more product or a refused call — adds no
decision to the archive and, unchecked, takes
a full share of emission from the miner it copies. :class:`CopyBook` remembers each
miner's decisions (:mod:`shopbench.records.decisions`, the normalisation curation's
``duplicates`` rule reads) on every task of the last ``window_rounds`` rounds it played. Two
miners that played at least ``min_shared`` of the same tasks and made the same decisions
(:func:`~shopbench.records.decisions.same_decisions`) on at least ``min_same_share`` of
them form a group; the group earns what one miner would: the miner registered first (the
lowest registration block, then the lowest uid) keeps its score, and each other member's
round score is zero. Tasks on which both miners did nothing (no search, no view, no pick)
are not evidence either way.

The same book on every validator gives the same groups, so the parameters
(:class:`CopyRules`) are consensus parameters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

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
    """A miner found to copy another, and the evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    uid: int
    of_uid: int = Field(description="the group's first-registered miner, who keeps the share")
    shared: int = Field(description="tasks both played in the window")
    same: int = Field(description="of those, tasks with the same decisions")


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
        """Each copying uid → its group (see the module docstring); `registered` is each
        uid's registration block (a uid without one counts as registered last)."""
        if not rules.enabled:
            return {}
        order = sorted(self.miners, key=lambda u: (registered.get(u, 2**63), u))
        tasks = {u: self.miners[u].tasks() for u in order}
        leaders: list[int] = []
        found: dict[int, CopyGroup] = {}
        for uid in order:
            for lead in leaders:
                shared, same = _compare(tasks[lead], tasks[uid])
                if shared >= rules.min_shared and same >= rules.min_same_share * shared:
                    found[uid] = CopyGroup(uid=uid, of_uid=lead, shared=shared, same=same)
                    break
            else:
                leaders.append(uid)
        return found


def round_decisions(episodes: Iterable[Trajectory]) -> dict[str, TaskDecisions]:
    """Task id → the decisions of a miner's episode of it, for :meth:`CopyBook.record`."""
    return {t.task_id: TaskDecisions.of(episode_decisions(t)) for t in episodes}


def _compare(a: Mapping[str, TaskDecisions], b: Mapping[str, TaskDecisions]) -> tuple[int, int]:
    shared = same = 0
    for task in a.keys() & b.keys():
        x, y = a[task], b[task]
        if x.empty and y.empty:
            continue
        shared += 1
        same += x.same_as(y)
    return shared, same


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
