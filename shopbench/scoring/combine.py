"""How a validator combines the rubric and the LLM judge (a consensus rule).

The rubric judges every episode; it is deterministic and its gates rest on facts the
validator recorded. The LLM judge reads a random sample of each round's episodes and can
see what the rubric cannot count — reasoning that cites the right numbers but draws the
wrong conclusion, a comparison made only of words. The rule (:class:`CombineRule`, id
``llm-lower/1``)::

    combined = rubric - weight * max(0, rubric - llm)          # weight 0.5

The LLM can **lower** a score, by half the gap, and never raise it: a model can be talked
into a higher score by the text it reads, and a higher score than the fact-checked gates
allow is exactly what an injection would buy, so that door stays shut; halving the gap
bounds what one noisy judgement can cost an honest miner. An LLM that is unavailable
leaves the rubric's score as it is, with the fallback recorded
(:mod:`shopbench.judging.llm.fallback`).

A combined verdict records how it was made in its typed parts: the rubric's part, the LLM's
(:class:`~shopbench.records.verdict.LLMPart`: everything :func:`combine` takes from the LLM
verdict) and the rule's id and weight; :func:`llm_verdict` and :meth:`CombineRule.of` give
them back, so a verifier re-derives the combination from a record without reading its prose.

Which episodes the LLM reads: :func:`select_for_llm` picks ``ceil(rate * n)`` of the
round's ``n`` tasks by a keyed hash of the task id under the validator's round secret, and
every miner's episode of a picked task is judged. Miners cannot tell which tasks will be
read, and every miner is read on the same tasks (the round stays a paired comparison).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from shopbench.records.verdict import LLMPart, RulePart, Verdict, VerdictParts, rubric_part

log = logging.getLogger("shopbench.scoring.combine")


class CombineRule(BaseModel):
    """How far an LLM verdict may move the rubric's score (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default="llm-lower/1", description="recorded with every combined verdict")
    weight: float = Field(
        default=0.5, ge=0, le=1, description="share of the gap below the rubric's score taken"
    )

    def score(self, rubric: float, llm: float) -> float:
        """The combined score: `rubric` lowered by `weight` of how far `llm` is below it."""
        return round(rubric - self.weight * max(0.0, rubric - llm), 6)

    def part(self) -> RulePart:
        """The rule as a combined verdict records it."""
        return RulePart(id=self.id, weight=self.weight)

    @classmethod
    def of(cls, part: RulePart) -> CombineRule:
        """The rule a combined verdict's recorded `part` names."""
        return cls(id=part.id, weight=part.weight)


DEFAULT_RULE = CombineRule()


class Judgement(BaseModel):
    """One episode's verdicts: the rubric's (with any LLM fallback recorded in it), and the
    LLM judge's where it read the episode."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rubric: Verdict
    llm: Verdict | None = Field(default=None, description="None: the LLM did not read it")

    def combined(self, rule: CombineRule = DEFAULT_RULE) -> Verdict:
        """The rubric's verdict, combined by `rule` with the LLM's where there is one."""
        return self.rubric if self.llm is None else combine(self.rubric, self.llm, rule)


class LLMSampling(BaseModel):
    """Which share of a round's tasks the LLM judge reads, and how long it may take."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rate: float = Field(default=0.25, ge=0, le=1, description="share of the round's tasks read")
    round_deadline_s: float = Field(
        default=600.0, gt=0, description="seconds the round's LLM judgements may take in all; "
        "those still running then fall back to the rubric",
    )


def select_for_llm(task_ids: Sequence[str], rate: float, key: bytes) -> frozenset[str]:
    """The tasks whose episodes the LLM judge reads: the ``ceil(rate * n)`` distinct task
    ids with the smallest HMAC-SHA256 under `key` (the validator's round secret)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    distinct = sorted(set(task_ids))
    k = math.ceil(rate * len(distinct))
    ranked = sorted(distinct, key=lambda t: hmac.new(key, t.encode(), hashlib.sha256).digest())
    return frozenset(ranked[:k])


def llm_part(llm: Verdict) -> LLMPart:
    """What :func:`combine` takes from the LLM's verdict, as a combined verdict records it."""
    return LLMPart(
        judge_id=llm.judge_id, judge_version=llm.judge_version, score=llm.score,
        rationale=llm.rationale, criteria=list(llm.criteria), notes=list(llm.notes),
    )  # fmt: skip


def llm_verdict(part: LLMPart) -> Verdict:
    """The LLM's verdict as far as :func:`combine` reads it, from a combined verdict's
    recorded `part` (``combine(r, llm_verdict(llm_part(v)), rule) == combine(r, v, rule)``)."""
    return Verdict(
        score=part.score, judge_id=part.judge_id, judge_version=part.judge_version,
        rationale=part.rationale, criteria=list(part.criteria), notes=list(part.notes),
    )  # fmt: skip


def combine(rubric: Verdict, llm: Verdict, rule: CombineRule = DEFAULT_RULE) -> Verdict:
    """The rubric's verdict with its score combined with `llm`'s by `rule`.

    The gates, criteria and stop are the rubric's (the deterministic base); the parts
    record the rubric's part, the LLM's and the rule. For readers, the LLM's criteria follow
    as ``llm:<name>`` entries, its score and the rule in the signals, its rationale after
    the rubric's, and the judge id names both.
    """
    llm_criteria = [c.model_copy(update={"name": f"llm:{c.name}"}) for c in llm.criteria]
    score = rule.score(rubric.score, llm.score)
    return rubric.model_copy(update={
        "score": score,
        "judge_id": f"{rubric.judge_id}+{llm.judge_id}+{rule.id}",
        "judge_version": f"{rubric.judge_version}+{llm.judge_version}",
        "rationale": f"{rubric.rationale} | llm {llm.score:g} -> {score:g} ({rule.id}): "
        f"{llm.rationale}",
        "criteria": [*rubric.criteria, *llm_criteria],
        "notes": [*rubric.notes, *(f"llm: {n}" for n in llm.notes)],
        "signals": {
            **rubric.signals, "rubric_score": rubric.score, "llm_score": llm.score,
            "llm_sampled": 1.0, "llm_fallback": 0.0, "combine_weight": rule.weight,
        },
        "parts": VerdictParts(rubric=rubric_part(rubric), llm=llm_part(llm), rule=rule.part()),
    })
