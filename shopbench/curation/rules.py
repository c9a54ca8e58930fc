"""The rules that decide on one episode alone: each returns why it drops it, or None.

The rules that compare episodes (the narrator's call-skeleton signal, the shortest success,
clones, near-duplicates, diversity caps) run over all episodes at once in
:mod:`shopbench.curation.ledger`; their per-episode inputs are computed here too.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from shopbench.archive.signing import Verifier, verify_record, verify_trajectory
from shopbench.curation.config import (
    ClaimsParams,
    JudgeParams,
    NarratorParams,
    OutcomeParams,
    StructureParams,
    ValidityParams,
)
from shopbench.curation.features import RECOMMEND, EpisodeFacts
from shopbench.records.trajectory import TerminationReason, Trajectory

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe(text: str, limit: int = 40) -> str:
    """Miner-written text as a report may show it: letters, digits and ``_.-`` only, cut."""
    return _UNSAFE.sub("?", text[:limit])


def validity_reason(
    t: Trajectory,
    facts: EpisodeFacts,
    p: ValidityParams,
    verifier: Verifier | None,
    shard_signer: str | None = None,
    record: dict[str, Any] | None = None,
) -> str | None:
    """Why the record cannot be used (the first reason found), or None. `shard_signer` is
    the verified manifest's signer of the record's shard (used when ``signatures =
    "shard"``); `record`, the plain dict `t` was validated from, spares dumping `t` to check
    its signature."""
    if p.verify_signatures and verifier is not None:
        if t.signature is None:
            return "unsigned record"
        if t.validator_hotkey and t.signature.signer != t.validator_hotkey:
            return (
                f"signed by {safe(t.signature.signer, 64)}, not its validator "
                f"{safe(t.validator_hotkey, 64)}"
            )
        if p.signatures == "shard" and shard_signer is not None:
            if t.signature.signer != shard_signer:
                return f"in a shard sealed by {safe(shard_signer, 64)}, not by its signer"
        elif not (
            verify_record(record, t, verifier) if record is not None
            else verify_trajectory(t, verifier)
        ):  # fmt: skip
            return "signature does not verify"
    if p.require_terminated and t.termination != TerminationReason.terminated:
        return f"not terminated ({t.termination.value})"
    bad = [f for f in t.failures if f.kind in p.failure_kinds]
    if bad:
        return f"turn {bad[0].turn}: {bad[0].kind}"
    if p.require_results:
        unanswered = [c for c in facts.calls if not c.answered]
        if unanswered:
            return f"{len(unanswered)} tool call(s) without a result ({safe(unanswered[0].name)})"
    if p.require_one_recommendation:
        accepted = [
            c for c in facts.calls if c.name == RECOMMEND and c.answered and c.error is None
        ]
        if len(accepted) != 1:
            return f"{len(accepted)} accepted recommendations, not 1"
    if p.require_shown_ids:
        if not t.recommended:
            return "nothing recommended"
        unseen = [r for r in t.recommended if r not in facts.shown]
        if unseen:
            return f"recommended {safe(unseen[0])}, which no observation showed"
    return None


def outcome_reason(t: Trajectory, p: OutcomeParams) -> str | None:
    """Why the outcome is too poor to keep, or None."""
    if t.outcome.success or t.outcome.mean_rule >= p.rule_score_min:
        return None
    return f"failed with rule score {t.outcome.mean_rule:.2f} < {p.rule_score_min:g}"


def process_scores(t: Trajectory) -> tuple[float | None, float | None]:
    """(the deterministic process score, the LLM judge's score) of the recorded verdict."""
    if t.judge is None:
        return None, None
    signals = t.judge.signals
    rubric = signals.get("rubric_score")
    llm = signals.get("llm_score") if not signals.get("llm_fallback") else None
    base = float(rubric) if isinstance(rubric, int | float) else t.judge.score
    return base, (float(llm) if isinstance(llm, int | float) else None)


def judge_reason(t: Trajectory, p: JudgeParams) -> str | None:
    """Why the process score is too low to keep, or None."""
    base, _ = process_scores(t)
    if base is None:
        return "no judge verdict" if p.require_verdict else None
    if base >= p.process_score_min:
        return None
    return f"process score {base:.2f} < {p.process_score_min:g}"


def judge_weight(t: Trajectory, p: JudgeParams) -> float:
    """The LLM judge's soft weight (its score, 0..1), or 1 where none judged."""
    _, llm = process_scores(t)
    if llm is None or not p.llm_soft_weight:
        return 1.0
    return min(1.0, max(0.0, llm))


def loop_reason(facts: EpisodeFacts, p: StructureParams) -> str | None:
    """Why the calls loop or repeat, or None."""
    keys = facts.call_keys
    if keys:
        key, count = Counter(keys).most_common(1)[0]
        if count > p.max_identical_calls:
            return f"the same call {count} times ({safe(key.split(':', 1)[0])})"
    for period in range(1, p.max_loop_period + 1):
        need = period * (p.loop_repeats - 1)
        run = 0
        for i in range(len(keys) - period):
            run = run + 1 if keys[i] == keys[i + period] else 0
            if run >= need:
                return f"a block of {period} call(s) repeated {p.loop_repeats} times"
    return None


def narrator_parts(facts: EpisodeFacts, p: NarratorParams) -> dict[str, float]:
    """The per-episode narrator signals, each 0..1, weighted (the skeleton's comes later)."""
    s = facts.signals
    searches = s.get("searches", 0.0)
    ungrounded = s.get("ungrounded_searches", 0.0) / searches if searches else 0.0
    mismatch = 1.0 - s.get("call_text_match", 1.0)
    claims = 1.0 if s.get("ids_fabricated", 0.0) or s.get("prices_unverified", 0.0) else 0.0
    return {
        "ungrounded": round(p.ungrounded_weight * ungrounded, 6),
        "mismatch": round(p.mismatch_weight * mismatch, 6),
        "claims": round(p.claims_weight * claims, 6),
    }


def claimed(facts: EpisodeFacts) -> bool:
    """Whether the episode claims its pick fits: a sentence saying so, or
    ``terminate(status="success")`` (the rubric's claims, read from the validator's log)."""
    return facts.signals.get("claims", 0.0) > 0


def refuted_reason(facts: EpisodeFacts, p: ClaimsParams) -> str | None:
    """Why the grader refutes the episode's claim that its pick fits, or None: a claimed
    constraint the pick misses although the agent had been shown its value, one in details
    it never opened (`count_unsupported`), or a product it opened that meets more of the
    visible constraints than its pick (`count_beaten`). The rubric judge's decision
    evidence: the task's constraints as the validator's grader recorded them, the
    observations bound to the validator's tool log."""
    if not claimed(facts):
        return None
    s = facts.signals
    parts = []
    if s.get("claims_false", 0.0):
        parts.append(f"{int(s['claims_false'])} false claim(s)")
    if p.count_unsupported and s.get("claims_unsupported", 0.0):
        parts.append(f"{int(s['claims_unsupported'])} unsupported claim(s)")
    if p.count_beaten and s.get("decisions_beaten", 0.0):
        parts.append(f"{int(s['decisions_beaten'])} pick(s) beaten by a product it opened")
    return ", ".join(parts) or None
