"""The process judge's verdict as a trajectory record carries it.

The judges (:mod:`shopbench.judging`) produce it — their :class:`~shopbench.judging.judge.
Verdict` is this model with the judge's own fields declared — and the record only stores
it, so the shape lives with the record and the record never imports a judge.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class JudgeVerdict(BaseModel):
    """The process judge's verdict on a trajectory; filled after the episode by a judge.

    Judges may add fields of their own (kept and round-tripped as they are).
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    score: float
    gates: dict[str, bool] = Field(default_factory=dict, description="gate name → passed")
    rationale: str = ""
    judge_id: str = Field(default="", description="judge model, revision and rubric version")


