"""The facts the rubric decides on: what each turn said and did, and what was shown.

Plain data filled by :func:`shopbench.judging.rubric.evidence.extract`; the rubric's checks read
it. Dataclasses rather than models: the judge builds thousands of these per second, and
they never cross a boundary (the :class:`~shopbench.judging.judge.Verdict` does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from shopbench.judging.rubric.grounding import Grounding, GroundingRules


@dataclass(frozen=True, slots=True)
class EvidenceRules:
    """The knobs of evidence extraction (from the rubric file)."""

    grounding: GroundingRules = GroundingRules()
    title_ngram: int = 4
    price_tolerance: float = 0.01
    filter_claims: frozenset[str] = frozenset()
    judge_patterns: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = ()
    """(needles, pattern): the pattern runs only on text containing one of its needles."""


@dataclass(slots=True)
class Shown:
    """A product the environment showed in this episode."""

    title: str
    price: float | None
    viewed_turn: int | None = None  # the turn whose call showed its details first
    values: tuple[str, ...] = ()  # folded attribute and SKU values, from its details


@dataclass(slots=True)
class CallFacts:
    """One tool call of a turn: what ran, what it showed, how it relates to the words."""

    turn: int
    name: str
    arguments: dict[str, Any]
    executed: bool
    error: str | None = None
    shown: list[str] = field(default_factory=list)  # product tokens it showed
    empty: bool = False  # a search that ran and showed nothing
    on_target: bool = False  # a search whose best hit covers half of its own words
    grounding: Grounding | None = None  # find_product only
    matches_text: bool | None = None  # the turn's text names what the call is about


@dataclass(slots=True)
class TurnFacts:
    """One assistant turn: its text, its calls, and what the text proves or claims."""

    index: int
    text: str
    calls: list[CallFacts] = field(default_factory=list)
    ids_grounded: set[str] = field(default_factory=set)
    ids_fabricated: set[str] = field(default_factory=set)
    prices_cited: int = 0
    prices_unverified: list[float] = field(default_factory=list)
    attributes_cited: int = 0
    mentioned: set[str] = field(default_factory=set)  # shown product tokens the text names
    # Title runs the text names that several shown products share: one of them is meant.
    ambiguous: list[frozenset[str]] = field(default_factory=list)
    judge_directed: list[str] = field(default_factory=list)

    @property
    def has_text(self) -> bool:
        """Whether the turn has any words of its own."""
        return bool(self.text.strip())


@dataclass(slots=True)
class Evidence:
    """Everything the rubric decides on, for one trajectory."""

    query: str
    task_id: str
    agent: str
    miner: str
    turns: list[TurnFacts]
    shown: dict[str, Shown]
    recommended: list[str]  # tokens of the accepted recommendation
    recommend_turn: int | None  # the turn of the first recommend_product attempt
    notes: list[str]

    def calls(self, name: str | None = None) -> list[CallFacts]:
        """The executed calls, of tool `name` or all, in episode order."""
        return [
            c
            for t in self.turns
            for c in t.calls
            if c.executed and (name is None or c.name == name)
        ]
