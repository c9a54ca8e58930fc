"""Verdicts written before typed parts: their parts read back from their prose.

Until verdicts carried :class:`~shopbench.records.verdict.VerdictParts`, a verdict said how
it was made only in words and signals. A combined verdict's ``judge_id`` is the rubric
judge's id, the LLM judge's and the combine rule's joined by ``+`` (each of the first two has
``+`` of its own), its ``judge_version`` the two judges' versions joined so; the LLM's
rationale follows ``(<rule id>): `` in the rationale, its notes are prefixed ``llm: ``, its
criteria ``llm:``; the LLM's score and the rule's weight are the signals ``llm_score`` and
``combine_weight``. A fallback is a sentence in ``notes`` beside the signal
``llm_fallback = 1``.

This module is the one reader of that shape. :mod:`shopbench.verify.regrade` calls
:func:`legacy_parts` for a record without parts only, around the rubric verdict it has
re-derived (whose ids the prose starts with), and :func:`without_parts` writes the verdict
it re-derives for such a record as that release wrote it.
"""

from __future__ import annotations

import re
from typing import get_args

from shopbench.judging.llm.fallback import FALLBACK_SIGNAL
from shopbench.records.verdict import (
    LLMFailureKind,
    LLMFallback,
    LLMPart,
    RulePart,
    Verdict,
    VerdictParts,
    rubric_part,
)
from shopbench.scoring.combine import DEFAULT_RULE

_FALLBACK_NOTE = re.compile(
    r"^llm judge (?P<id>.+) unavailable \((?P<kind>[a-z_]+)\): (?P<message>.*); "
    r"the rubric verdict stands$",
    re.S,
)
_KINDS = frozenset(get_args(LLMFailureKind))
_NOTE_MISSING = LLMFallback(judge_id="?", kind="down", message="(no note recorded)")
"""The failure of an old fallback record that no longer carries its fallback note: it names
no judge, so the note rebuilt from it differs from every recorded one and verify reports the
record's ``judge.notes`` as a mismatch (the record is not trusted, and nothing is invented)."""


def legacy_parts(recorded: Verdict, rubric: Verdict) -> VerdictParts:
    """The parts a verdict written without them (`recorded`) was made from, read from its
    prose around `rubric`, the rubric's verdict re-derived for the same episode."""
    base = rubric_part(rubric)
    if recorded.signals.get(FALLBACK_SIGNAL, 0.0) >= 1.0:
        return VerdictParts(rubric=base, fallback=_fallback(recorded))
    if "llm_score" in recorded.signals:
        llm, rule = _combined(recorded, rubric)
        return VerdictParts(rubric=base, llm=llm, rule=rule)
    return VerdictParts(rubric=base)


def without_parts(verdict: Verdict) -> Verdict:
    """`verdict` as a release before typed parts wrote it: every field but ``parts``."""
    return Verdict.model_validate(verdict.model_dump(exclude={"parts"}))


def _fallback(recorded: Verdict) -> LLMFallback:
    """The failure the last fallback note of `recorded` names; :data:`_NOTE_MISSING` when
    none does."""
    for note in reversed(recorded.notes):
        m = _FALLBACK_NOTE.match(note)
        if m is not None and m["kind"] in _KINDS:
            return LLMFallback.model_validate(
                {"judge_id": m["id"], "kind": m["kind"], "message": m["message"]}
            )
    return _NOTE_MISSING


def _combined(recorded: Verdict, rubric: Verdict) -> tuple[LLMPart, RulePart]:
    """The LLM's part and the rule of a combined `recorded` verdict, read back around the
    re-derived `rubric` verdict (``combine``'s layout of that release, undone)."""
    rule_id = recorded.judge_id.rsplit("+", 1)[-1]
    weight = recorded.signals.get("combine_weight", DEFAULT_RULE.weight)
    if not 0.0 <= weight <= 1.0:  # no rule has it: the signals' mismatch will say so
        weight = DEFAULT_RULE.weight
    judge_id = recorded.judge_id.removesuffix(f"+{rule_id}")
    judge_id = judge_id.removeprefix(f"{rubric.judge_id}+")
    version = recorded.judge_version.removeprefix(f"{rubric.judge_version}+")
    _, _, rationale = recorded.rationale.partition(f"({rule_id}): ")
    llm = LLMPart(
        judge_id=judge_id, judge_version=version,
        score=recorded.signals.get("llm_score", 0.0), rationale=rationale,
        criteria=[c.model_copy(update={"name": c.name.removeprefix("llm:")})
                  for c in recorded.criteria if c.name.startswith("llm:")],
        notes=[n.removeprefix("llm: ") for n in recorded.notes[len(rubric.notes):]
               if n.startswith("llm: ")],
    )  # fmt: skip
    return llm, RulePart(id=rule_id, weight=weight)
