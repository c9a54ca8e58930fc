"""From the model's answers to a verdict, and from several members' verdicts to one.

A member's answers are scored with the rubric's own rule — gates in file order, the first
failing gate's fail score, else the pass score plus the bonuses earned, capped — so an LLM
score means what a rubric score means and the model cannot simply name a number.

An ensemble's score is the **median** of its members' scores: one member that is broken,
misconfigured or talked into something moves it less than a mean would. Its criteria and
rationale are those of the member closest to the median (the first in endpoint order on a
tie). Fewer answers than the quorum is a failure of the whole judge.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from shopbench.judging.errors import JudgeUnavailable
from shopbench.judging.llm.reply import Judgement
from shopbench.judging.rubric.judge import Rubric
from shopbench.records.verdict import CriterionResult, Verdict


def score_judgement(
    rubric: Rubric, judgement: Judgement, *, judge_id: str, judge_version: str,
    notes: Sequence[str] = (),
) -> Verdict:
    """The verdict a member's judgement earns under `rubric`'s scoring rule."""
    info = rubric.rubric
    criteria: list[CriterionResult] = []
    stopped: CriterionResult | None = None
    bonus = 0.0
    for spec in rubric.criteria:
        answer = judgement.answers[spec.name]
        passed = answer.verdict == "pass"
        earned = (spec.weight or 0.0) if spec.kind == "bonus" and passed else 0.0
        result = CriterionResult(
            name=spec.name, kind=spec.kind, passed=passed, fail_score=spec.fail_score,
            bonus=earned, evidence=answer.reason or "(no reason given)",
        )
        criteria.append(result)
        if spec.kind == "gate" and not passed and stopped is None:
            stopped = result
        bonus += earned
    if stopped is not None:
        score = float(stopped.fail_score or 0.0)
        rationale = f"stopped at {stopped.name} ({score:g}): {stopped.evidence}"
    else:
        score = min(info.max_score, info.pass_score + bonus)
        rationale = f"all gates passed ({info.pass_score:g}" + (
            f" + bonuses {bonus:g})" if bonus else ")"
        )
    if judgement.summary:
        rationale += f" | {judgement.summary}"
    all_notes = list(notes)
    if judgement.tolerant:
        all_notes.append("the reply was not strict JSON; read by the tolerant extractor")
    return Verdict(
        score=round(score, 6),
        gates={c.name: c.passed for c in criteria if c.kind == "gate"},
        rationale=rationale,
        judge_id=judge_id,
        judge_version=judge_version,
        rubric_version=info.version,
        stopped_at=stopped.name if stopped else None,
        criteria=criteria,
        notes=all_notes,
    )


@dataclass(frozen=True, slots=True)
class Member:
    """One endpoint's part in a judgement: its verdict, or why it has none."""

    endpoint: str
    verdict: Verdict | None = None
    failure: JudgeUnavailable | None = None


def median_verdict(members: Sequence[Member], quorum: int) -> Verdict:
    """The ensemble verdict (see the module docstring). Raises :class:`JudgeUnavailable`
    with the most frequent failure kind when fewer than `quorum` members answered."""
    answered = [(i, m.verdict) for i, m in enumerate(members) if m.verdict is not None]
    failed = [m for m in members if m.verdict is None]
    failure_notes = [
        f"judge member {m.endpoint} failed ({m.failure.kind if m.failure else 'unknown'}): "
        f"{m.failure}"
        for m in failed
    ]
    if len(answered) < quorum:
        kinds = Counter(m.failure.kind for m in failed if m.failure is not None)
        kind = kinds.most_common(1)[0][0] if kinds else "bad_reply"
        raise JudgeUnavailable(
            kind,
            f"{len(answered)} of {len(members)} judge endpoints answered (quorum {quorum}): "
            + "; ".join(f"{m.endpoint}: {m.failure}" for m in failed),
        )
    scores = [v.score for _, v in answered]
    median = round(statistics.median(scores), 6)
    index, chosen = min(answered, key=lambda iv: (abs(iv[1].score - median), iv[0]))
    signals = dict(chosen.signals)
    signals.update({"members": float(len(members)), "members_answered": float(len(answered))})
    for i, v in answered:
        signals[f"member{i}_score"] = v.score
    rationale = chosen.rationale
    if len(members) > 1:
        listed = ", ".join(f"{v.score:g}" for _, v in answered)
        rationale = f"median of {len(answered)} members ({listed}) = {median:g}; " \
            f"member {index}: {rationale}"
    return chosen.model_copy(update={
        "score": median, "rationale": rationale, "signals": signals,
        "notes": [*chosen.notes, *failure_notes],
    })
