"""The rubric's verdict standing in for an LLM judgement that could not be had.

When the LLM judge is down, slow, rate-limited, answers garbage or serves the wrong model,
the episode keeps the rubric's verdict unchanged in score, and the trajectory records the
fallback: a note with its kind and reason, and the signal ``llm_fallback = 1``.
"""

from __future__ import annotations

from shopbench.judging.errors import JudgeUnavailable
from shopbench.records.verdict import Verdict

FALLBACK_SIGNAL = "llm_fallback"


def fallback_verdict(rubric: Verdict, failure: JudgeUnavailable, llm_judge_id: str) -> Verdict:
    """`rubric` (same score) with the LLM judge's failure recorded in notes and signals."""
    note = (
        f"llm judge {llm_judge_id} unavailable ({failure.kind}): {failure}; the rubric "
        "verdict stands"
    )
    return rubric.model_copy(update={
        "notes": [*rubric.notes, note],
        "signals": {**rubric.signals, FALLBACK_SIGNAL: 1.0, "llm_sampled": 1.0},
        "rationale": f"{rubric.rationale} | llm judge unavailable ({failure.kind}); rubric "
        "verdict used",
    })


def is_fallback(verdict: Verdict) -> bool:
    """Whether `verdict` is a rubric verdict standing in for a failed LLM judgement."""
    return verdict.signals.get(FALLBACK_SIGNAL, 0.0) >= 1.0
