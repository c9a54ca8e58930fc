"""The facts the rubric decides on: what each turn said and did, what was shown, and how the
recommendation and its claims stand against the task's constraints.

Plain data filled by :func:`shopbench.judging.rubric.evidence.extract`; the rubric's checks read
it. Dataclasses rather than models: the judge builds thousands of these per second, and
they never cross a boundary (the :class:`~shopbench.judging.judge.Verdict` does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from shopbench.env.results import ProductDetails
from shopbench.judging.rubric.grounding import Grounding, GroundingRules
from shopbench.records.dialogue import Dialogue


@dataclass(frozen=True, slots=True)
class EvidenceRules:
    """The knobs of evidence extraction (from the rubric file)."""

    grounding: GroundingRules = GroundingRules()
    title_ngram: int = 4
    price_tolerance: float = 0.01
    filter_claims: frozenset[str] = frozenset()
    judge_patterns: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = ()
    """(needles, pattern): the pattern runs only on text containing one of its needles."""
    claim_patterns: tuple[re.Pattern[str], ...] = ()
    """Phrases that assert the recommendation meets every requirement."""
    negations: frozenset[str] = frozenset()
    """Words that, earlier in the same sentence, turn a claim phrase into a denial."""


@dataclass(slots=True)
class Shown:
    """A product the environment showed in this episode."""

    title: str
    price: float | None
    viewed_turn: int | None = None  # the turn whose call showed its details first
    values: tuple[str, ...] = ()  # folded attribute and SKU values, from its details
    order: int = 0  # its place among the products shown, first showing first
    listed: int | None = None  # its place among the products search results listed
    opened: int | None = None  # its place among the products whose details were opened
    sold: int | None = None  # the sales count its listing showed
    service: tuple[str, ...] | None = None  # the services its listing or details showed
    details: ProductDetails | None = None  # its details, once opened


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
    decisions: Decisions | None = None  # the recommendation against the task's constraints
    dialogue: Dialogue | None = None  # a clarify episode's shopper log (the validator's own)

    def calls(self, name: str | None = None) -> list[CallFacts]:
        """The executed calls, of tool `name` or all, in episode order."""
        return [
            c
            for t in self.turns
            for c in t.calls
            if c.executed and (name is None or c.name == name)
        ]


RULES: tuple[str, ...] = ("cheapest_opened", "first_listed", "most_sold", "first_opened")
"""The trivial rules a miner's picks are compared with."""

ClaimKind = Literal["all", "value", "status"]
ClaimVerdict = Literal["true", "false", "unsupported"]

@dataclass(slots=True)
class Candidate:
    """One product the agent opened, graded against one slot."""

    token: str
    title_ok: bool
    hits: int  # visible constraints met
    met: int  # constraints an agent can check met: the visible ones and a key attribute
    price: float | None
    order: int
    listed: int | None
    opened: int | None
    sold: int | None


@dataclass(slots=True)
class Miss:
    """A visible constraint the pick misses, and whether the agent had been shown it."""

    slot: int
    kind: str
    name: str
    expected: str
    actual: str
    seen_turn: int | None  # the turn after which the agent could see the miss; None: never

    def seen_before(self, turn: int) -> bool:
        """Whether the miss was visible to the agent when it wrote turn `turn`."""
        return self.seen_turn is not None and self.seen_turn < turn

    def text(self) -> str:
        """The miss in words."""
        return f"{self.name} {self.expected!r} (it has {self.actual!r})"


@dataclass(slots=True)
class SlotDecision:
    """One graded slot: the pick, its alternatives, and what the trivial rules would pick.

    ``candidates`` are the opened products with the item's title (and the pick): the
    alternatives the per-episode check compares on visible constraints. ``pool`` is the
    products opened before recommending from the searches that listed the pick (and the
    pick): where the round's decision check asks whether the pick followed the task's
    constraints (the visible ones and a knowledge task's key attribute, which the details
    show once the agent knows it: ``best``) or a trivial rule (``rules``).
    """

    slot: int
    pick: str
    visible: int  # visible constraints of the slot
    pick_hits: int
    candidates: list[Candidate]
    better: list[Candidate]
    pool: list[Candidate]
    best: set[str]  # pool products meeting the most constraints
    rules: dict[str, str]  # rule → the pool product it picks
    misses: list[Miss]


@dataclass(slots=True)
class Claim:
    """A claim that the recommendation meets the requirements, and how it stands."""

    turn: int
    kind: ClaimKind
    said: str
    verdict: ClaimVerdict
    why: str


@dataclass(slots=True)
class Decisions:
    """The recommendation of one episode against the task's constraints."""

    slots: list[SlotDecision] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    empty: list[int] = field(default_factory=list)
    """The task's slots (0-based) the recommendation left without a product."""

    def points(self) -> list[SlotDecision]:
        """The slots where the agent chose among two or more opened products that differ in
        the constraints they meet: the decision points trivial rules are measured on."""
        return [s for s in self.slots if len(s.best) < len(s.pool)]

    def signals(self) -> dict[str, float]:
        """The counts behind the decision and claim criteria; per rule, over the decision
        points where the rule's pick is not among the best candidates, how many picks the
        rule explains and how many the constraints explain (summed per miner and round)."""
        points = self.points()
        out: dict[str, float] = {
            "decision_points": len(points),
            "decisions_beaten": sum(bool(s.better) for s in self.slots),
            "claims": len(self.claims),
            "claims_false": sum(c.verdict == "false" for c in self.claims),
            "claims_unsupported": sum(c.verdict == "unsupported" for c in self.claims),
        }
        for rule in RULES:
            split = [s for s in points if s.rules[rule] not in s.best]
            out[f"rule_{rule}_disagree"] = len(split)
            out[f"rule_{rule}_follows_rule"] = sum(s.pick == s.rules[rule] for s in split)
            out[f"rule_{rule}_follows_constraints"] = sum(s.pick in s.best for s in split)
        return out
