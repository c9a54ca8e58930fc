"""Why an episode ended as it did: one closed set of kinds, with the failing part named.

:func:`diagnose` reads only what a record already carries and its signature covers — the
graded outcome, how the episode ended, what was recommended and the judge's gates — so a
record's diagnosis is as signed as the fields it is computed from and every reader (the
archive's columns and filters, the browser, curation's report, a miner's report, ``verify``)
gets the same answer from one function. The kinds, first match wins:

========================  ==================================================================
``exploit``               the judge flagged the episode (a gate of :data:`EXPLOIT_GATES`
                          failed: text addressed to the judge), whatever the outcome
``success``               the outcome grader counted it a success
``unknown_product``       it recommended only ids that resolve to no product it was shown
``policy_error``          no recommendation, and the policy failed (error, timeout, a reply
                          that is not a message, the episode's deadline)
``turn_limit``            no recommendation before the turn budget ran out
``no_progress``           no recommendation; ended after turns without a call that ran
``no_recommendation``     it terminated without recommending anything
``incomplete``            a multi-product task with a slot left empty (``slot`` names it)
``wrong_product``         a graded product's title does not match the slot's (``slot``)
``constraint_unmet``      a constraint of a slot is unmet: ``constraint`` names it, as
                          ``price``, ``service``, ``sku:<name>``, ``attribute:<name>``
                          or ``key_attribute:<name>``
``several_shops``         a shop task's products come from more than one shop
``voucher_misapplied``    over the budget, and the voucher does not apply (``constraint``:
                          ``voucher:shops`` or ``voucher:threshold``)
``over_budget``           over the budget even with the voucher applied
``other``                 graded a failure for a reason none of the above names
========================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from shopbench.chat import clip
from shopbench.records.outcome import ConstraintHit, Outcome
from shopbench.records.verdict import Verdict

DIAGNOSIS_VERSION = 1
"""Version of the rules above; a change of them is a new version."""

DiagnosisKind = Literal[
    "exploit",
    "success",
    "unknown_product",
    "policy_error",
    "turn_limit",
    "no_progress",
    "no_recommendation",
    "incomplete",
    "wrong_product",
    "constraint_unmet",
    "several_shops",
    "voucher_misapplied",
    "over_budget",
    "other",
]
DIAGNOSIS_KINDS: tuple[str, ...] = get_args(DiagnosisKind)
"""Every kind, in the order :func:`diagnose` tries them."""

EXPLOIT_GATES: tuple[str, ...] = ("no_judge_directed_text",)
"""The rubric gates whose failure marks an episode as an exploit attempt."""

POLICY_FAILURES = frozenset({"policy_error", "policy_timeout", "invalid_reply", "deadline"})
"""The terminations (:class:`~shopbench.records.trajectory.TerminationReason`) that are the
policy's failure."""

ONE_SHOP_INTENTS: frozenset[str] = frozenset({"shop"})
"""The intents whose outcome needs every product from one shop. Each intent declares this
(``GradingRules.one_shop`` in :mod:`shopbench.tasks.intents`) and the grader reads it there;
the floor cannot import the registry, so a test holds this set equal to it."""

MAX_DETAIL = 300


class Diagnosis(BaseModel):
    """Why one episode ended as it did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: DiagnosisKind
    constraint: str | None = Field(
        default=None, description="the failing constraint, gate or termination, when one is"
    )
    slot: int | None = Field(default=None, ge=0, description="the 0-based slot it failed in")
    detail: str = Field(default="", description="one line: what was expected and what came")

    @property
    def failed(self) -> bool:
        """Whether this is a failure (every kind but ``success``)."""
        return self.kind != "success"

    @property
    def label(self) -> str:
        """``kind`` with its constraint, e.g. ``constraint_unmet:price``."""
        return self.kind if self.constraint is None else f"{self.kind}:{self.constraint}"


def _cut(text: str) -> str:
    return clip(text, MAX_DETAIL)


def _constraint_name(hit: ConstraintHit) -> str:
    if hit.kind in ("title", "price", "service") or hit.name in ("", hit.kind):
        return hit.kind  # their names say the bound or the services, not which constraint
    return f"{hit.kind}:{hit.name}"


def diagnose(
    outcome: Outcome,
    termination: str,
    *,
    recommended: Sequence[str | None] = (),
    judge: Verdict | None = None,
) -> Diagnosis:
    """The diagnosis of an episode graded `outcome` that ended by `termination` (a
    :class:`~shopbench.records.trajectory.TerminationReason` value), having recommended the
    tokens `recommended`, judged `judge` (None: not judged yet). See the module's table."""
    if judge is not None:
        for gate in EXPLOIT_GATES:
            if judge.gates.get(gate) is False:
                hit = judge.criterion(gate)
                return Diagnosis(
                    kind="exploit", constraint=gate, detail=_cut(hit.evidence if hit else "")
                )
    if outcome.success:
        return Diagnosis(kind="success")
    graded = [g for g in outcome.slots if g.product_id is not None]
    if not graded:
        if any(recommended):
            return Diagnosis(
                kind="unknown_product",
                detail=_cut(f"{len([r for r in recommended if r])} recommended, none resolved"),
            )
        if termination in POLICY_FAILURES:
            return Diagnosis(kind="policy_error", constraint=termination)
        if termination in ("turn_limit", "no_progress"):
            return Diagnosis(kind=termination)  # type: ignore[arg-type]
        return Diagnosis(kind="no_recommendation", constraint=termination)
    missing = next((g for g in outcome.slots if g.product_id is None), None)
    if missing is not None:
        return Diagnosis(
            kind="incomplete", slot=missing.slot,
            detail=f"no product for slot {missing.slot + 1} of {len(outcome.slots)}",
        )  # fmt: skip
    for g in outcome.slots:
        if g.rule_score >= 1:
            continue
        misses = [h for h in g.constraints if not h.hit]
        title = next((h for h in misses if h.kind == "title"), None)
        first = title or (misses[0] if misses else None)
        if first is None:
            return Diagnosis(kind="other", slot=g.slot, detail=_cut(outcome.reason or ""))
        detail = _cut(f"expected {first.expected!r}, got {first.actual!r}")
        if first.kind == "title":
            return Diagnosis(kind="wrong_product", constraint="title", slot=g.slot, detail=detail)
        return Diagnosis(
            kind="constraint_unmet", constraint=_constraint_name(first), slot=g.slot,
            detail=detail,
        )  # fmt: skip
    if outcome.intent in ONE_SHOP_INTENTS and outcome.shops != 1:
        return Diagnosis(kind="several_shops", detail=f"products from {outcome.shops} shops")
    budget = outcome.budget
    if budget is not None and not budget.holds:
        if not budget.applies:
            why = "shops" if budget.voucher_type == "shop" and budget.shops != 1 else "threshold"
            return Diagnosis(
                kind="voucher_misapplied", constraint=f"voucher:{why}", detail=_cut(budget.reason)
            )
        return Diagnosis(kind="over_budget", constraint="budget", detail=_cut(budget.reason))
    return Diagnosis(kind="other", detail=_cut(outcome.reason or ""))
