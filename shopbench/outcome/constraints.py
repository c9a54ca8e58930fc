"""A graded slot's constraints read back from its grade, so other products can be graded
against the same slot.

An :class:`~shopbench.records.outcome.Outcome` records every constraint of each graded slot
(what it asked for, what the product had). :func:`slot_from_grade` rebuilds the
:class:`~shopbench.outcome.spec.Slot` from those records, so whoever holds only the
trajectory (the process judge) can grade the other products the agent opened with
:func:`~shopbench.outcome.grader.grade_slot`, the one grader, exactly as the recommended one
was graded.

*Visible* constraints are those an agent can check against what the tools show: a price
bound and a service (every listing shows price and services), an SKU option or attribute
value (the details show them). A title is graded against the target's hidden title, and a
knowledge task's key attribute is the hidden answer: neither is visible.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from shopbench.catalog.schema import SERVICES, Product, Service
from shopbench.outcome.grader import DEFAULT_MATCHER, grade_knowledge_slot, grade_slot
from shopbench.outcome.spec import PriceBound, Slot
from shopbench.records.outcome import ConstraintHit, ConstraintKind, SlotGrade

VISIBLE_KINDS: frozenset[ConstraintKind] = frozenset({"price", "service", "sku", "attribute"})
"""Constraints an agent can check in what the tools show it."""
LISTED_KINDS: frozenset[ConstraintKind] = frozenset({"price", "service"})
"""Constraints every listing shows (a search hit is enough to see them)."""

_NUMBER = r"(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)"
_AT_MOST = re.compile(rf"^<= {_NUMBER}$")
_AT_LEAST = re.compile(rf"^>= {_NUMBER}$")
_BETWEEN = re.compile(rf"^{_NUMBER}\.\.{_NUMBER}$")


def price_bound(expected: str) -> PriceBound | None:
    """The price bound a price constraint's ``expected`` text states (``<= 500``,
    ``>= 75``, ``75..95``), or None when it states none."""
    text = expected.strip()
    try:
        if m := _AT_MOST.match(text):
            return PriceBound(mode="less than", hi=float(m.group(1)))
        if m := _AT_LEAST.match(text):
            return PriceBound(mode="greater than", lo=float(m.group(1)))
        if m := _BETWEEN.match(text):
            return PriceBound(mode="between", lo=float(m.group(1)), hi=float(m.group(2)))
    except ValidationError:
        return None
    return None


def slot_from_grade(grade: SlotGrade, target_id: str | None = None) -> Slot | None:
    """The slot `grade` was graded against, rebuilt from its constraint records; None for a
    slot without a graded product or a knowledge slot (its key attribute is graded apart).

    `target_id` is the target's catalog id when known (the grade's own product, when it was
    the exact target), so an exact target grades 1 again.
    """
    hits = grade.constraints
    if not hits or any(h.kind == "key_attribute" for h in hits):
        return None
    titles = [h.expected for h in hits if h.kind == "title"]
    if not titles:
        return None
    prices = [b for h in hits if h.kind == "price" and (b := price_bound(h.expected))]
    services: list[Service] = [s for h in hits if h.kind == "service" for s in _service(h)]
    option = {h.name: h.expected for h in hits if h.kind == "sku"}
    attributes: dict[str, list[str]] = {}
    for h in hits:
        if h.kind == "attribute":
            attributes.setdefault(h.name, []).append(h.expected)
    if target_id is None and grade.exact_target:
        target_id = grade.product_id
    return Slot(
        product_id=target_id,
        title=titles,
        sku_options=[option] if option else None,
        attributes=[{k: v} for k, v in attributes.items()] or None,
        price=prices or None,
        service=services or None,
    )


def _service(hit: ConstraintHit) -> list[Service]:
    return [s for s in SERVICES if s == hit.expected]


def visible(hit: ConstraintHit) -> bool:
    """Whether the constraint is one an agent can check in what the tools show."""
    return hit.kind in VISIBLE_KINDS


class Regrader:
    """Grades other products against one graded slot, as the grader graded its own: a
    product, shop or voucher slot rebuilt by :func:`slot_from_grade`, or a knowledge slot
    (its title and key attribute). ``ok`` is False when the grade holds nothing to rebuild."""

    def __init__(self, grade: SlotGrade) -> None:
        self.grade = grade
        self.key: str | None = next(
            (h.expected for h in grade.constraints if h.kind == "key_attribute"), None
        )
        if self.key is not None:
            titles = [h.expected for h in grade.constraints if h.kind == "title"]
            target = grade.product_id if grade.exact_target else None
            self.slot = Slot(product_id=target, title=titles) if titles else None
        else:
            self.slot = slot_from_grade(grade)

    @property
    def ok(self) -> bool:
        """Whether there is a slot to grade against."""
        return self.slot is not None

    def constraints(self, product: Product) -> list[ConstraintHit]:
        """Each constraint of the slot, met or missed by `product`."""
        assert self.slot is not None, "check ok first"
        if self.key is not None:
            graded = grade_knowledge_slot(self.slot, self.key, product, DEFAULT_MATCHER)
        else:
            graded = grade_slot(self.slot, product, DEFAULT_MATCHER, index=self.grade.slot)
        return graded.constraints
