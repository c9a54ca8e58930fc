"""The episode score: outcome and process combined into the number weights are built from.

The formula (a consensus parameter, :data:`DEFAULT_FORMULA`, id ``sn15-partial/1``), with
``q`` the judge's process score after any template penalty and ``r`` the outcome's mean rule
score::

    success:  min(1, floor + slope * q / q_full)          # SN15: 0.3 + 0.7 q / 0.8
    failure:  partial * r * min(1, floor + slope * q / q_full)

The first line is SN15's score. The second is a small partial credit, so a near miss (most
constraints met) ranks above a wild miss and a careful near miss above a careless one;
``partial`` is below ``floor``, so any success outranks every failure. With the defaults a
success scores 0.3 to 1.0 and a failure at most 0.1.

On a clarify task each question the shopper answered costs a fraction of the score: the
line above is multiplied by the outcome's ``question_factor`` (``1 - cost * questions``,
:class:`~shopbench.records.dialogue.Dialogue`), 1 on every other task.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.records.outcome import Outcome
from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict


class ScoreFormula(BaseModel):
    """The parameters of the episode score."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default="sn15-partial/1", description="recorded with every score")
    floor: float = Field(default=0.3, ge=0, le=1, description="a success's score at q = 0")
    slope: float = Field(default=0.7, ge=0, le=1, description="what the process adds")
    q_full: float = Field(default=0.8, gt=0, le=1, description="process score worth full marks")
    partial: float = Field(
        default=0.1, ge=0, le=1, description="weight of the rule score on a failure"
    )

    @model_validator(mode="after")
    def _success_dominates(self) -> ScoreFormula:
        if self.partial >= self.floor:
            raise ValueError(
                f"partial ({self.partial}) must be below floor ({self.floor}) so that every "
                "success outranks every failure"
            )
        return self

    def process_factor(self, q: float) -> float:
        """min(1, floor + slope * q / q_full) for a process score q in [0, 1]."""
        q = min(1.0, max(0.0, q))
        return min(1.0, self.floor + self.slope * q / self.q_full)

    def score(self, success: bool, q: float, rule: float = 0.0) -> float:
        """The episode score for an outcome (`success`, mean rule score `rule`) and process q."""
        factor = self.process_factor(q)
        if success:
            return round(factor, 6)
        return round(self.partial * min(1.0, max(0.0, rule)) * factor, 6)


DEFAULT_FORMULA = ScoreFormula()


def episode_score(
    outcome: Outcome, verdict: Verdict, formula: ScoreFormula = DEFAULT_FORMULA
) -> float:
    """The score of an episode from its graded outcome and its (penalised) verdict, less
    the cost of the questions it asked the shopper."""
    score = formula.score(outcome.success, verdict.score, outcome.mean_rule)
    factor = outcome.question_factor
    return score if factor == 1.0 else round(score * factor, 6)


def with_judgement(
    trajectory: Trajectory, verdict: Verdict, formula: ScoreFormula = DEFAULT_FORMULA
) -> Trajectory:
    """A copy of `trajectory` carrying `verdict` as its judge record (with the formula's id
    added as ``score_formula``) and its episode score."""
    record = verdict.model_dump(mode="json")
    record["score_formula"] = formula.id
    return trajectory.model_copy(
        update={
            "judge": Verdict.model_validate(record),
            "score": episode_score(trajectory.outcome, verdict, formula),
        }
    )
