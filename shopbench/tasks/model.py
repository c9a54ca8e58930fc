"""Tasks as data: the wire half a miner sees and the validator-side half with the answers.

The reward spec mirrors ShoppingBench's task files: a task has one slot per product to buy;
each slot carries the constraints a recommended product must satisfy.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.catalog.schema import Service

Intent = Literal["product", "shop", "voucher", "knowledge"]
INTENTS: tuple[Intent, ...] = ("product", "shop", "voucher", "knowledge")
Split = Literal["live", "heldout", "external"]
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


class TaskCard(BaseModel):
    """The wire half of a task: what may leave the validator. No answers in it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    intent: Intent
    query: str
    split: Split
    cluster: str | None = None


class Task(BaseModel):
    """The validator-side task: the wire half plus the reward spec and the known answers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=200)
    intent: Intent
    query: str = Field(min_length=1, max_length=20_000)
    split: Split = "external"
    cluster: str | None = None
    reward: list[Slot] = Field(min_length=1, max_length=8)
    voucher: Voucher | None = None
    knowledge_attribute: str | None = Field(
        default=None, description="knowledge tasks: the hidden key attribute value"
    )
    target_record: dict[str, Any] | None = Field(
        default=None, description="knowledge tasks from ShoppingBench: the full target record"
    )
    satisfying: list[list[str]] | None = Field(
        default=None, description="per slot, every catalog id known to satisfy it"
    )
    phrases: list[str] | None = Field(
        default=None,
        description="per slot, the words the query names the item with (generated tasks)",
    )
    meta: dict[str, str | int | float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shape_fits_intent(self) -> Task:
        n = len(self.reward)
        if self.intent in ("product", "knowledge") and n != 1:
            raise ValueError(f"a {self.intent} task has exactly one slot, got {n}")
        if self.intent == "shop" and not 2 <= n <= 4:
            raise ValueError(f"a shop task has 2-4 slots, got {n}")
        if self.intent == "voucher":
            if self.voucher is None:
                raise ValueError("a voucher task needs its voucher")
            if not 1 <= n <= 4:
                raise ValueError(f"a voucher task has 1-4 slots, got {n}")
        elif self.voucher is not None:
            raise ValueError(f"a {self.intent} task carries no voucher")
        if self.intent == "knowledge" and not self.knowledge_attribute:
            raise ValueError("a knowledge task needs its knowledge_attribute")
        if self.satisfying is not None and len(self.satisfying) != n:
            raise ValueError("satisfying must list one id set per slot")
        if self.phrases is not None and len(self.phrases) != n:
            raise ValueError("phrases must give one phrase per slot")
        return self

    @property
    def targets(self) -> list[str | None]:
        """The target catalog id of each slot."""
        return [s.product_id for s in self.reward]

    def card(self) -> TaskCard:
        """The wire half: safe to send to a miner or to publish with a trajectory."""
        return TaskCard(
            id=self.id, intent=self.intent, query=self.query, split=self.split, cluster=self.cluster
        )
