"""The judge interface: what every process judge promises, and the verdict it returns.

A judge reads one trajectory — the task query, the environment's tool log (facts the
validator executed itself) and the agent's messages (claims, untrusted) — and returns a
:class:`Verdict`: a process score in [0, 1], which gates passed, the evidence behind each
criterion, and the judge's id and version. Judges are consensus parameters: every validator
running the same judge version and rubric version on the same trajectory must produce the
same verdict.

:class:`Verdict` is a :class:`shopbench.records.verdict.JudgeVerdict` (the type
``Trajectory.judge`` holds) with the judge's own fields declared; :meth:`Verdict.to_record`
and :meth:`Verdict.from_record` convert between the two without losing anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import JudgeVerdict

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


class Verdict(JudgeVerdict):
    """A judge's verdict on one trajectory.

    ``score`` is the process score in [0, 1]; ``gates`` maps every gate (in rubric order) to
    whether it passed; ``stopped_at`` names the first failing gate, which decided the score.
    ``notes`` say what was wrong with the input itself (no messages, calls that never ran,
    text cut for length) — the verdict is then about what was there. ``signals`` are the
    counts behind the criteria, for curation filters and reports.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    judge_version: str = Field(description="version of the judge's code")
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
    )
    unpenalised_score: float | None = Field(
        default=None,
        description="the score before the cross-episode penalties; None when none applied",
    )

    def to_record(self) -> JudgeVerdict:
        """The verdict as the plain record ``Trajectory.judge`` holds (extra fields kept)."""
        return JudgeVerdict.model_validate(self.model_dump(mode="json"))

    @classmethod
    def from_record(cls, record: JudgeVerdict | Mapping[str, Any]) -> Verdict:
        """Read back a verdict stored in a trajectory; fields added beside it (such as the
        score formula's id) are left out. ValidationError if it is not a verdict."""
        data = record.model_dump(mode="json") if isinstance(record, BaseModel) else dict(record)
        return cls.model_validate({k: v for k, v in data.items() if k in cls.model_fields})

    def criterion(self, name: str) -> CriterionResult | None:
        """The result of the criterion called `name`, or None if the rubric has none."""
        return next((c for c in self.criteria if c.name == name), None)


@runtime_checkable
class Judge(Protocol):
    """A process judge. Deterministic judges must give equal verdicts for equal inputs.

    `judge` accepts a :class:`~shopbench.records.trajectory.Trajectory` or a raw record (a mapping,
    e.g. a JSON line of an archive) and never raises for anything inside it: missing fields,
    empty messages, oversized text or calls that never ran are judged on what is there, with
    the reason in :attr:`Verdict.notes`.
    """

    id: str
    version: str

    def judge(self, trajectory: Trajectory | Mapping[str, Any]) -> Verdict:
        """The verdict on one trajectory."""
        ...
