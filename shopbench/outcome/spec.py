"""The reward spec: what a task asks of its recommendations, in ShoppingBench's format.

These are the inputs of ShoppingBench's rules (:mod:`shopbench.outcome.grader`): a task's
intent, one :class:`Slot` per product to buy with the constraints a recommendation must
satisfy, and a voucher task's :class:`Voucher`. :class:`GradedTask` is everything the
grader reads of a task; :class:`shopbench.tasks.model.Task` is one.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.catalog.schema import Service
from shopbench.records.task import Intent

PriceMode = Literal["less than", "greater than", "between"]


class PriceBound(BaseModel):
    """A price constraint: `less than` uses hi, `greater than` uses lo, `between` both."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: PriceMode
    lo: float | None = None
    hi: float | None = None

    @model_validator(mode="after")
    def _bounds_make_sense(self) -> PriceBound:
        if self.mode == "less than" and self.hi is None:
            raise ValueError("'less than' needs an upper bound")
        if self.mode == "greater than" and self.lo is None:
            raise ValueError("'greater than' needs a lower bound")
        if self.mode == "between":
            if self.lo is None or self.hi is None:
                raise ValueError("'between' needs both bounds")
            if self.lo > self.hi:
                raise ValueError(f"impossible price bounds: {self.lo} > {self.hi}")
        for v in (self.lo, self.hi):
            if v is not None and v < 0:
                raise ValueError(f"negative price bound {v}")
        return self


class Slot(BaseModel):
    """One product the user wants, with the constraints a recommendation must satisfy.

    `sku_options` lists option combinations (ShoppingBench writes one); `attributes` lists
    single-key dicts ``{key: [values]}``, every listed value required (as ShoppingBench).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    product_id: str | None = Field(default=None, description="the target's catalog id")
    title: list[str] = Field(min_length=1, description="target title(s) to match")
    sku_options: list[dict[str, str]] | None = None
    attributes: list[dict[str, list[str]]] | None = None
    price: list[PriceBound] | None = None
    service: list[Service] | None = None

    def n_constraints(self) -> int:
        """Constraints counted as ShoppingBench counts them: each title, each SKU key/value
        pair, each attribute value, each price bound and each service."""
        n = len(self.title)
        n += sum(len(o) for o in self.sku_options or [])
        n += sum(len(vs) for a in self.attributes or [] for vs in a.values())
        n += len(self.price or [])
        n += len(self.service or [])
        return n


class Voucher(BaseModel):
    """ShoppingBench's voucher: applies when the total reaches `threshold`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    voucher_type: Literal["platform", "shop"]
    threshold: float = Field(ge=0)
    discount_type: Literal["fixed", "percentage"]
    face_value: float | None = Field(default=None, ge=0)
    discount: float | None = Field(default=None, gt=0, le=1)
    cap: float | None = Field(default=None, ge=0)
    price_after_voucher: float | None = None
    budget: float = Field(ge=0)

    @model_validator(mode="after")
    def _discount_present(self) -> Voucher:
        if self.discount_type == "fixed" and self.face_value is None:
            raise ValueError("a fixed voucher needs face_value")
        if self.discount_type == "percentage" and self.discount is None:
            raise ValueError("a percentage voucher needs discount (a fraction in (0, 1])")
        return self


class GradingRules(BaseModel):
    """The outcome rules that differ by intent, declared by each intent
    (:mod:`shopbench.tasks.intents`) and read by the grader through :class:`GradedTask`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    single_pick: bool = Field(
        default=False, description="the task asks for one product: only the first pick counts"
    )
    answer: bool = Field(
        default=False,
        description="the one slot is graded on the hidden key attribute (knowledge's rules)",
    )
    one_shop: bool = Field(default=False, description="every product must come from one shop")
    question_cost: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="what each question answered by the shopper takes off the episode score "
        "(a fraction of it; clarify's rules)",
    )
    max_questions: int = Field(
        default=0, ge=0, description="questions the shopper answers at most per episode"
    )


class GradedTask(Protocol):
    """What the outcome grader reads of a task."""

    @property
    def id(self) -> str: ...
    @property
    def intent(self) -> Intent: ...
    @property
    def reward(self) -> list[Slot]: ...
    @property
    def voucher(self) -> Voucher | None: ...
    @property
    def knowledge_attribute(self) -> str | None: ...
    @property
    def rules(self) -> GradingRules: ...
