"""The rubric's verdict standing in for an LLM judgement that could not be had.

When the LLM judge is down, slow, rate-limited, answers garbage or serves the wrong model,
the episode keeps the rubric's verdict unchanged in score, and the trajectory records the
fallback: typed in the verdict's parts (``parts.fallback``: the LLM judge, the failure's
kind and message), and for readers a note with its kind and reason and the signal
``llm_fallback = 1``.
"""

from __future__ import annotations

from shopbench.judging.errors import JudgeUnavailable
from shopbench.records.verdict import LLMFallback, Verdict, VerdictParts, rubric_part

FALLBACK_SIGNAL = "llm_fallback"


def fallback_verdict(rubric: Verdict, failure: JudgeUnavailable, llm_judge_id: str) -> Verdict:
    """`rubric` (same score) standing in for the judgement `failure` denied the LLM judge
    `llm_judge_id` (see :func:`with_fallback`)."""
    return with_fallback(
        rubric, LLMFallback(judge_id=llm_judge_id, kind=failure.kind, message=str(failure))
    )


def with_fallback(rubric: Verdict, fallback: LLMFallback) -> Verdict:
    """`rubric` (same score) with `fallback` recorded in its parts, and in its notes,
    signals and rationale for readers: the one way a fallback is written, whether a judge
    made it now or a verifier re-derives it from a record's parts."""
    note = (
        f"llm judge {fallback.judge_id} unavailable ({fallback.kind}): {fallback.message}; "
        "the rubric verdict stands"
    )
    return rubric.model_copy(update={
        "notes": [*rubric.notes, note],
        "signals": {**rubric.signals, FALLBACK_SIGNAL: 1.0, "llm_sampled": 1.0},
        "rationale": f"{rubric.rationale} | llm judge unavailable ({fallback.kind}); rubric "
        "verdict used",
        "parts": VerdictParts(rubric=rubric_part(rubric), fallback=fallback),
    })


def is_fallback(verdict: Verdict) -> bool:
    """Whether `verdict` is a rubric verdict standing in for a failed LLM judgement: its
    parts say so (a verdict without parts, from a release before them: its signal)."""
    if verdict.parts is not None:
        return verdict.parts.fallback is not None
    return verdict.signals.get(FALLBACK_SIGNAL, 0.0) >= 1.0
