"""``outcome``: a failure whose mean rule score is below the bar is dropped."""

from __future__ import annotations

from pydantic import Field

from shopbench.curation.registry import Episode, Rule, RuleParams


class OutcomeParams(RuleParams):
    """Kept: a success, or a mean rule score at least the bar."""

    rule_score_min: float = Field(default=0.5, ge=0, le=1, description="the rule-score bar")


def outcome_reason(ep: Episode, p: OutcomeParams) -> str | None:
    """Why the outcome is too poor to keep, or None."""
    t = ep.t
    if t.outcome.success or t.outcome.mean_rule >= p.rule_score_min:
        return None
    return f"failed with rule score {t.outcome.mean_rule:.2f} < {p.rule_score_min:g}"


OUTCOME = Rule(name="outcome", params=OutcomeParams, decide=outcome_reason)
