"""The process judge's verdict: the one model the judges produce and a record carries.

A judge (:mod:`shopbench.judging`) returns a :class:`Verdict`; ``Trajectory.judge`` holds
that same model. Fields added beside a judge's own (the score formula's id, a judge's
extras) are kept as they are. A verdict writes exactly the fields it was given or read, so a
record read back writes the very bytes it was signed over, whichever fields the judge that
made it knew of.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, model_serializer

CriterionKind = Literal["gate", "bonus"]


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


class Verdict(BaseModel):
    """A judge's verdict on one trajectory.

    ``score`` is the process score in [0, 1]; ``gates`` maps every gate (in rubric order) to
    whether it passed; ``stopped_at`` names the first failing gate, which decided the score.
    ``notes`` say what was wrong with the input itself (no messages, calls that never ran,
    text cut for length) — the verdict is then about what was there. ``signals`` are the
    counts behind the criteria, for curation filters and reports.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

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

    @model_serializer(mode="wrap")
    def _as_given(self, handler: Any, info: SerializationInfo) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        given = self.model_fields_set | set(self.model_extra or {})
        return {k: v for k, v in data.items() if k in given}

    def criterion(self, name: str) -> CriterionResult | None:
        """The result of the criterion called `name`, or None if the rubric has none."""
        return next((c for c in self.criteria if c.name == name), None)
