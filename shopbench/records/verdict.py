"""The process judge's verdict: the one model the judges produce and a record carries.

A judge (:mod:`shopbench.judging`) returns a :class:`Verdict`; ``Trajectory.judge`` holds
that same model. Fields added beside a judge's own (the score formula's id, a judge's
extras) are kept as they are. A verdict, and each of its typed parts, writes exactly the
fields it was given or read, so a record read back writes the very bytes it was signed
over, whichever fields the judge that made it knew of.

A verdict's provenance is typed (:class:`VerdictParts`): the rubric's part, the LLM judge's
part and the combine rule where the LLM read the episode, the LLM's failure where the rubric
stood in for it. ``judge_id``, ``rationale``, ``notes`` and ``signals`` say the same in words
and numbers for people and filters; whoever re-derives a verdict reads the parts. Records of
the releases before typed parts have none (``parts`` is None).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    model_serializer,
    model_validator,
)

CriterionKind = Literal["gate", "bonus"]

LLMFailureKind = Literal[
    "down",  # refused, unreachable, or a 5xx status
    "timeout",  # no reply within the request timeout
    "rate_limited",  # 429 after every retry
    "rejected",  # a 4xx status other than 429 (a request the server will not serve)
    "bad_reply",  # a body that is not a chat completion, or content that is no judgement
    "truncated",  # the reply stopped at the token limit before its JSON was complete
    "too_long",  # the trajectory does not fit the prompt budget even fully cut
    "model_mismatch",  # /v1/models shows another model, revision or a short context
    "deadline",  # the judgement's or the round's time ran out
]
"""Why an LLM judge gave no verdict: the kinds :class:`~shopbench.judging.errors.JudgeUnavailable`
raises and a fallback records."""


class AsGiven(BaseModel):
    """A model that writes exactly the fields it was given or read (extras included), so a
    signed record's part read back writes the bytes it was signed over."""

    model_config = ConfigDict(frozen=True, extra="allow")

    @model_serializer(mode="wrap")
    def _as_given(self, handler: Any, info: SerializationInfo) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        given = self.model_fields_set | set(self.model_extra or {})
        return {k: v for k, v in data.items() if k in given}


class CriterionResult(BaseModel):
    """One criterion of a rubric applied to one trajectory, with the evidence for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: CriterionKind
    passed: bool
    fail_score: float | None = Field(
        default=None, description="gates: the process score when this is the first failing gate"
    )
    bonus: float = Field(default=0.0, description="bonuses: the credit earned (0 when failed)")
    evidence: str = Field(description="what in the trajectory decided it, in one line")


class RubricPart(AsGiven):
    """The rubric judge's part of a verdict: which rubric judged, and the score it gave."""

    judge_id: str = Field(description="the rubric judge's id, e.g. rubric-judge/2+rubric/2")
    judge_version: str = Field(description="version of the rubric judge's code")
    rubric_version: str = Field(description="version of the rubric data file")
    score: float = Field(description="the rubric's process score, before any combination")


class LLMPart(AsGiven):
    """The LLM judge's part of a combined verdict: everything the combination took from it."""

    judge_id: str = Field(description="the LLM judge's id: its version, model, prompt, rubric")
    judge_version: str = Field(description="version of the LLM judge's code")
    score: float = Field(description="the LLM judge's process score")
    rationale: str = Field(default="", description="the LLM judge's own rationale")
    criteria: list[CriterionResult] = Field(
        default_factory=list, description="its criteria, under their rubric names"
    )
    notes: list[str] = Field(default_factory=list, description="its notes on the input")


class RulePart(AsGiven):
    """The combine rule a combined verdict was made by."""

    id: str = Field(description="the rule's id, e.g. llm-lower/1")
    weight: float = Field(ge=0, le=1, description="share of the gap below the rubric's score")


class LLMFallback(AsGiven):
    """An LLM judgement that could not be had: the rubric's verdict stands in for it."""

    judge_id: str = Field(description="the LLM judge that failed")
    kind: LLMFailureKind = Field(description="what kind of failure it was")
    message: str = Field(description="what went wrong, in one line")


class VerdictParts(AsGiven):
    """How a verdict was made. Always a rubric part; then either nothing more (the rubric
    alone, the LLM did not read the episode), an LLM part and the rule that combined the two,
    or the LLM's failure (the rubric's verdict stood in for it)."""

    rubric: RubricPart
    llm: LLMPart | None = Field(default=None, description="the LLM's part, where combined")
    rule: RulePart | None = Field(default=None, description="the combine rule, where combined")
    fallback: LLMFallback | None = Field(
        default=None, description="the LLM judge's failure, where the rubric stood in"
    )

    @model_validator(mode="after")
    def _one_way(self) -> VerdictParts:
        if (self.llm is None) != (self.rule is None):
            raise ValueError("an LLM part and a combine rule come together or not at all")
        if self.llm is not None and self.fallback is not None:
            raise ValueError("a verdict is combined with an LLM's or falls back, not both")
        return self


class Verdict(AsGiven):
    """A judge's verdict on one trajectory.

    ``score`` is the process score in [0, 1]; ``gates`` maps every gate (in rubric order) to
    whether it passed; ``stopped_at`` names the first failing gate, which decided the score.
    ``notes`` say what was wrong with the input itself (no messages, calls that never ran,
    text cut for length) — the verdict is then about what was there. ``signals`` are the
    counts behind the criteria, for curation filters and reports. ``parts`` say how the
    verdict was made (see the module docstring); ``judge_id``, ``judge_version``,
    ``rationale``, ``notes`` and ``signals`` repeat it for readers.
    """

    score: float
    gates: dict[str, bool] = Field(default_factory=dict, description="gate name → passed")
    rationale: str = ""
    judge_id: str = Field(default="", description="judge model, revision and rubric version")
    judge_version: str = Field(default="", description="version of the judge's code")
    rubric_version: str = Field(default="", description="version of the rubric data file")
    stopped_at: str | None = Field(default=None, description="the first failing gate")
    criteria: list[CriterionResult] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="problems with the input")
    signals: dict[str, float] = Field(default_factory=dict)
    template_factor: float = Field(
        default=1.0, ge=0, le=1, description="cross-episode template penalty applied to score"
    )
    decision_factor: float = Field(
        default=1.0, ge=0, le=1,
        description="cross-episode decision penalty (picks a trivial rule explains) applied",
    )  # fmt: skip
    unpenalised_score: float | None = Field(
        default=None,
        description="the score before the cross-episode penalties; None when none applied",
    )
    parts: VerdictParts | None = Field(
        default=None,
        description="how the verdict was made (the rubric's part, the LLM's and the rule, or "
        "the LLM's failure); None on records of releases before typed parts",
    )

    def criterion(self, name: str) -> CriterionResult | None:
        """The result of the criterion called `name`, or None if the rubric has none."""
        return next((c for c in self.criteria if c.name == name), None)


def rubric_part(verdict: Verdict) -> RubricPart:
    """The rubric's part of a rubric judge's `verdict`: the part it carries, or for a verdict
    made without parts, one of its own ids and score."""
    if verdict.parts is not None:
        return verdict.parts.rubric
    return RubricPart(
        judge_id=verdict.judge_id, judge_version=verdict.judge_version,
        rubric_version=verdict.rubric_version, score=verdict.score,
    )  # fmt: skip
