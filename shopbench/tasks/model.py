"""Tasks as data: the wire half a miner sees and the validator-side half with the answers.

The reward spec (:mod:`shopbench.outcome.spec`) mirrors ShoppingBench's task files: a task
has one slot per product to buy; each slot carries the constraints a recommended product
must satisfy.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.outcome.spec import GradingRules, Slot, Voucher
from shopbench.records.task import Intent, Split, TaskCard
from shopbench.tasks.hidden import HiddenCard
from shopbench.tasks.intent_registry import intent_spec


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
    hidden: HiddenCard | None = Field(
        default=None,
        description="clarify tasks: the constraints the query holds back (never sent)",
    )
    meta: dict[str, str | int | float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shape_fits_intent(self) -> Task:
        spec = intent_spec(self.intent)
        shape, n = spec.shape, len(self.reward)
        if shape.voucher and self.voucher is None:
            raise ValueError(f"a {self.intent} task needs its voucher")
        if not shape.min_slots <= n <= shape.max_slots:
            raise ValueError(f"a {self.intent} task has {shape.slots_text()}, got {n}")
        if not shape.voucher and self.voucher is not None:
            raise ValueError(f"a {self.intent} task carries no voucher")
        if spec.grading.answer and not self.knowledge_attribute:
            raise ValueError(f"a {self.intent} task needs its knowledge_attribute")
        if shape.hidden and self.hidden is None:
            raise ValueError(f"a {self.intent} task needs its hidden card")
        if not shape.hidden and self.hidden is not None:
            raise ValueError(f"a {self.intent} task carries no hidden card")
        if self.hidden is not None and (why := self.hidden.fits(self.reward[0])):
            raise ValueError(why)
        if self.satisfying is not None and len(self.satisfying) != n:
            raise ValueError("satisfying must list one id set per slot")
        if self.phrases is not None and len(self.phrases) != n:
            raise ValueError("phrases must give one phrase per slot")
        return self

    @property
    def rules(self) -> GradingRules:
        """The outcome rules of the task's intent (what the grader applies)."""
        return intent_spec(self.intent).grading

    @property
    def targets(self) -> list[str | None]:
        """The target catalog id of each slot."""
        return [s.product_id for s in self.reward]

    def card(self) -> TaskCard:
        """The wire half: safe to send to a miner or to publish with a trajectory."""
        return TaskCard(
            id=self.id, intent=self.intent, query=self.query, split=self.split, cluster=self.cluster
        )
