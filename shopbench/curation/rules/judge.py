"""``judge``: a process score below the bar is dropped; an LLM judge's score weights the
episode."""

from __future__ import annotations

from pydantic import Field

from shopbench.curation.registry import Episode, Rule, RuleParams
from shopbench.records.trajectory import Trajectory


class JudgeParams(RuleParams):
    """Kept: a process score at least the bar; an LLM judge's score weights the episode."""

    process_score_min: float = Field(default=0.5, ge=0, le=1, description="the process bar")
    llm_soft_weight: bool = Field(
        default=True,
        description="where an LLM judge scored the episode, weight it by that score",
    )
    require_verdict: bool = Field(default=False, description="drop episodes with no verdict")


def process_scores(t: Trajectory) -> tuple[float | None, float | None]:
    """(the deterministic process score, the LLM judge's score) of the recorded verdict."""
    if t.judge is None:
        return None, None
    signals = t.judge.signals
    rubric = signals.get("rubric_score")
    llm = signals.get("llm_score") if not signals.get("llm_fallback") else None
    base = float(rubric) if isinstance(rubric, int | float) else t.judge.score
    return base, (float(llm) if isinstance(llm, int | float) else None)


def judge_reason(ep: Episode, p: JudgeParams) -> str | None:
    """Why the process score is too low to keep, or None."""
    base, _ = process_scores(ep.t)
    if base is None:
        return "no judge verdict" if p.require_verdict else None
    if base >= p.process_score_min:
        return None
    return f"process score {base:.2f} < {p.process_score_min:g}"


def judge_weight(ep: Episode, p: JudgeParams) -> float:
    """The LLM judge's soft weight (its score, 0..1), or 1 where none judged."""
    _, llm = process_scores(ep.t)
    if llm is None or not p.llm_soft_weight:
        return 1.0
    return min(1.0, max(0.0, llm))


JUDGE = Rule(name="judge", params=JudgeParams, decide=judge_reason, weight=judge_weight)
