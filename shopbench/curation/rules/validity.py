"""``validity``: records that cannot be trusted or used are rejected, with the reason.

The gate of the pipeline: it decides first, drops whether on or off (a record that does not
rebuild, a shard that fails its manifest), and an episode it rejects is read by no later
rule.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shopbench.archive.signing import verify_record, verify_trajectory
from shopbench.curation.features import RECOMMEND
from shopbench.curation.registry import Episode, Rule, RuleParams, safe
from shopbench.records.trajectory import TerminationReason


class ValidityParams(RuleParams):
    """Records that cannot be trusted or used are rejected, with the reason."""

    verify_signatures: bool = Field(
        default=True, description="each record's signature must verify, by its validator"
    )
    signatures: Literal["record", "shard"] = Field(
        default="record",
        description="record: check each record's own signature; shard: a shard whose signed "
        "manifest and sha256 verify vouches for its rows (each must name the manifest's signer)",
    )
    require_terminated: bool = Field(default=True, description="the agent called terminate")
    require_one_recommendation: bool = Field(
        default=True, description="exactly one recommend_product call was accepted"
    )
    require_results: bool = Field(default=True, description="every tool call has a result")
    require_shown_ids: bool = Field(
        default=True, description="every recommended id was shown in the episode"
    )
    failure_kinds: list[str] = Field(
        default_factory=lambda: ["policy_error", "policy_timeout", "invalid_reply", "oversized"],
        description="turn failures that make a record unusable",
    )


def validity_reason(ep: Episode, p: ValidityParams) -> str | None:
    """Why the record cannot be used (the first reason found), or None (and None when the
    rule is off). The episode's `shard_signer` is used when ``signatures = "shard"``; its
    `record`, the plain dict it was validated from, spares dumping it to check its
    signature."""
    if not p.enabled:
        return None
    t, facts, verifier = ep.t, ep.facts, ep.verifier
    if p.verify_signatures and verifier is not None:
        if t.signature is None:
            return "unsigned record"
        if t.validator_hotkey and t.signature.signer != t.validator_hotkey:
            return (
                f"signed by {safe(t.signature.signer, 64)}, not its validator "
                f"{safe(t.validator_hotkey, 64)}"
            )
        if p.signatures == "shard" and ep.shard_signer is not None:
            if t.signature.signer != ep.shard_signer:
                return f"in a shard sealed by {safe(ep.shard_signer, 64)}, not by its signer"
        elif not (
            verify_record(ep.record, t, verifier) if ep.record is not None
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


VALIDITY = Rule(
    name="validity", params=ValidityParams, decide=validity_reason, gate=True,
    keep_in_reasons=(r"not 1\b",),
)  # fmt: skip
