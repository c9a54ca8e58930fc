"""The graded outcome an archived episode carries: per slot, each constraint and its verdict.

The outcome grader (:mod:`shopbench.outcome.grader`, with the voucher arithmetic of
:mod:`shopbench.outcome.budget`) produces these; everything downstream reads them from the
record without importing a grader.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.records.dialogue import Dialogue
from shopbench.records.task import Intent

ConstraintKind = Literal["title", "price", "service", "sku", "attribute", "key_attribute"]


class BudgetCheck(BaseModel):
    """The budget arithmetic of one voucher task, and why it holds or not."""

    model_config = ConfigDict(frozen=True)

    total: float = Field(description="sum of the recommended products' prices")
    budget: float
    threshold: float
    voucher_type: Literal["platform", "shop"]
    discount_type: Literal["fixed", "percentage"]
    shops: int = Field(description="distinct shops among the recommended products")
    complete: bool = Field(description="every slot has a product (else nothing holds)")
    applies: bool = Field(description="the voucher's conditions are met")
    discount: float | None = Field(default=None, description="amount taken off when it applies")
    capped: bool = Field(default=False, description="a percentage discount limited by its cap")
    discounted_total: float | None = None
    holds: bool
    reason: str


class ConstraintHit(BaseModel):
    """One constraint of a slot, what it asked for, what the product had, and the verdict."""

    model_config = ConfigDict(frozen=True)

    kind: ConstraintKind
    name: str = Field(description='e.g. "title", "price", "service", an attribute key')
    expected: str
    actual: str
    hit: bool
    score: float | None = Field(default=None, description="title similarity, for titles")


class SlotGrade(BaseModel):
    """How the product graded against one slot scored."""

    model_config = ConfigDict(frozen=True)

    slot: int = Field(description="0-based slot index")
    product_id: str | None = Field(description="the graded product; None when missing")
    shop_id: str | None = None
    price: float | None = None
    exact_target: bool = False
    best_sku: str | None = Field(
        default=None, description="index of the SKU option counted for sku/attribute pairs"
    )
    constraints: list[ConstraintHit] = Field(default_factory=list)
    n_constraints: int = 0
    n_hit: int = 0
    rule_score: float = 0.0


class Outcome(BaseModel):
    """The graded outcome of one episode."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    intent: Intent
    success: bool
    rule_scores: list[float] = Field(description="per slot")
    mean_rule: float = Field(description="mean of rule_scores over the task's slots")
    slots: list[SlotGrade]
    shops: int = Field(description="distinct shops among the graded products")
    budget: BudgetCheck | None = Field(default=None, description="voucher tasks only")
    reason: str | None = Field(default=None, description="why it failed; None on success")
    matcher: str = Field(description="the title matcher used")
    # Left out of the record when None, so a record signed before it existed verifies.
    dialogue: Dialogue | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="clarify tasks: the questions the shopper answered, and their cost",
    )

    @property
    def question_factor(self) -> float:
        """What the episode score is multiplied by for the questions asked (1 without any)."""
        return 1.0 if self.dialogue is None else self.dialogue.factor
