"""The decision check across a miner's round: do its picks follow the task's constraints, or a
trivial rule?

One episode cannot tell a lucky guess from a choice: a miner that always recommends the
cheapest product it opened is right whenever the cheapest one happens to fit. Across a
round it can be told. At each *decision point* (a graded recommendation chosen among two
or more opened candidates with the item's title, on visible constraints —
:mod:`shopbench.judging.rubric.decisions`) the rubric records, per trivial rule (cheapest
opened, first listed, most sold, first opened), whether the rule's pick is among the
candidates meeting the most constraints, and if not, whether the miner followed the rule or
the constraints. Those counts travel in each verdict's signals; here they are summed over
the miner's episodes of the round, and for each rule, on the points where rule and
constraints disagree, the rule's *margin* is

    (picks the rule explains − picks the constraints explain) / disagreements

The rule with the largest margin (given at least ``min_disagreements`` points) decides: at
or below ``low`` the miner pays nothing; at or above ``high`` its process scores are
multiplied by ``min_factor``; in between the factor falls linearly. An honest agent's picks
follow the constraints (margin −1); a random chooser's follow neither (margin near 0).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.judging.rubric.decisions import RULES
from shopbench.records.verdict import Verdict

DECISIONS_VERSION = "1"


class DecisionConfig(BaseModel):
    """When a trivial rule explains a miner's picks well enough to cost it, and how much."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_disagreements: int = Field(
        default=4, ge=1, description="decision points where rule and constraints disagree "
        "needed before a rule can cost anything",
    )  # fmt: skip
    low: float = Field(default=0.2, ge=-1, le=1, description="margin that costs nothing")
    high: float = Field(default=0.5, ge=-1, le=1, description="margin that costs the most")
    min_factor: float = Field(default=0.5, ge=0, le=1, description="factor at or above high")

    @model_validator(mode="after")
    def _ordered(self) -> DecisionConfig:
        if self.high <= self.low:
            raise ValueError(f"high ({self.high}) must be above low ({self.low})")
        return self

    def factor(self, margin: float) -> float:
        """The multiplier for a miner whose strongest rule has `margin`."""
        if margin <= self.low:
            return 1.0
        if margin >= self.high:
            return self.min_factor
        span = (margin - self.low) / (self.high - self.low)
        return 1.0 - span * (1.0 - self.min_factor)


class RuleFit(BaseModel):
    """How one trivial rule explains a miner's picks in a round."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    disagreements: int = Field(description="decision points where the rule's pick is not "
                               "among the candidates meeting the most constraints")
    follows_rule: int = Field(description="of those, picks the rule explains")
    follows_constraints: int = Field(description="of those, picks the constraints explain")

    @property
    def margin(self) -> float:
        """(rule − constraints) / disagreements; 0 with no disagreement."""
        if not self.disagreements:
            return 0.0
        return (self.follows_rule - self.follows_constraints) / self.disagreements


class DecisionReport(BaseModel):
    """One miner's decision check in one round, and the factor it earns."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    miner: str
    episodes: int
    points: int = Field(description="decision points over the round")
    rules: list[RuleFit]
    rule: str | None = Field(description="the rule that best explains the picks; None: none "
                             "had enough disagreements")
    margin: float
    factor: float


def decision_report(
    miner: str, verdicts: Sequence[Verdict], config: DecisionConfig | None = None
) -> DecisionReport:
    """The decision report of one miner's round from its episodes' verdicts (the rubric's
    signals; a verdict without them contributes nothing)."""
    cfg = config or DecisionConfig()

    def total(key: str) -> int:
        return int(sum(v.signals.get(key, 0.0) for v in verdicts))

    fits = [
        RuleFit(
            rule=r, disagreements=total(f"rule_{r}_disagree"),
            follows_rule=total(f"rule_{r}_follows_rule"),
            follows_constraints=total(f"rule_{r}_follows_constraints"),
        )
        for r in RULES
    ]  # fmt: skip
    eligible = [f for f in fits if f.disagreements >= cfg.min_disagreements]
    best = max(eligible, key=lambda f: (f.margin, f.disagreements), default=None)
    margin = best.margin if best is not None else 0.0
    return DecisionReport(
        miner=miner, episodes=len(verdicts), points=total("decision_points"), rules=fits,
        rule=best.rule if best is not None else None, margin=round(margin, 6),
        factor=round(cfg.factor(margin), 6) if best is not None else 1.0,
    )


def penalise_decisions(verdict: Verdict, factor: float) -> Verdict:
    """`verdict` with the round's decision factor applied beside its template factor (the
    score before either is kept as ``unpenalised_score``)."""
    if not 0.0 <= factor <= 1.0:
        raise ValueError(f"a decision factor is in [0, 1], got {factor}")
    base = verdict.unpenalised_score if verdict.unpenalised_score is not None else verdict.score
    return verdict.model_copy(
        update={
            "score": round(base * verdict.template_factor * factor, 6),
            "decision_factor": factor,
            "unpenalised_score": base,
        }
    )
