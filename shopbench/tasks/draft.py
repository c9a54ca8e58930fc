"""What an intent generator hands back: a draft task, or the reason it gave up on one.

A draft carries the reward spec, the query and the target products; the common pipeline in
:mod:`shopbench.tasks.generate` then checks findability, computes the satisfying sets,
applies the split and turns the draft into a :class:`Task`.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.schema import Product
from shopbench.catalog.search.index import SearchIndex, TitledHit
from shopbench.outcome.spec import Slot, Voucher
from shopbench.records.task import Intent
from shopbench.tasks.hidden import HiddenCard
from shopbench.tasks.phrase_search import SATISFY_WINDOW, phrase_search
from shopbench.tasks.pool import Pool

if TYPE_CHECKING:
    from shopbench.catalog.knowledge import KnowledgePage

_REMEMBERED_SEARCHES = 64


class Draft(BaseModel):
    """A generated task before validation."""

    model_config = ConfigDict(frozen=True)

    intent: Intent
    query: str
    slots: list[Slot]
    targets: list[Product]
    voucher: Voucher | None = None
    knowledge_attribute: str | None = None
    hidden: HiddenCard | None = None
    phrases: list[str] = Field(description="per slot, the words the query names the item with")
    meta: dict[str, str | int | float] = Field(default_factory=dict)


class Rejection(BaseModel):
    """Why one attempt produced no draft (counted per reason in the build report)."""

    model_config = ConfigDict(frozen=True)

    reason: str


class Sampler:
    """What intent generators draw from: the eligible rows and the products behind them."""

    def __init__(
        self,
        pool: Pool,
        index: SearchIndex,
        knowledge: Callable[[], list[KnowledgePage]] | None = None,
        *,
        window: int = SATISFY_WINDOW,
    ) -> None:
        self.pool = pool
        self.index = index
        self.window = window
        self._knowledge = knowledge
        self._searches: OrderedDict[tuple[str, str, tuple[str, ...]], list[TitledHit]] = (
            OrderedDict()
        )
        self.memo: dict[str, Any] = {}
        """Per-process values an intent generator computes once (e.g. its question bank)."""

    def slot_hits(self, slot: Slot, phrase: str) -> list[TitledHit]:
        """The top `window` hits for `phrase` under the slot's own filters, best first. The
        last few searches are remembered: the search that proves a description findable
        while drafting is the one the satisfying set is then drawn from."""
        key = (phrase, repr(slot.price), tuple(slot.service or ()))
        hits = self._searches.get(key)
        if hits is None:
            hits = phrase_search(self.index, slot, phrase, self.window)
            self._searches[key] = hits
            if len(self._searches) > _REMEMBERED_SEARCHES:
                self._searches.popitem(last=False)
        else:
            self._searches.move_to_end(key)
        return hits

    def product(self, row: int) -> Product | None:
        """The full product of a pool row (None if the index lacks it)."""
        return self.index.get([self.pool.product_id(row)])[0]

    def products(self, rows: list[int]) -> Iterator[Product]:
        """The full products of pool rows, in order, skipping any the index lacks; each is
        loaded only when the iteration reaches it (callers often stop early)."""
        for row in rows:
            p = self.product(row)
            if p is not None:
                yield p

    def random_product(self, rng: random.Random) -> Product | None:
        """A uniformly drawn eligible product; None when the pool is empty."""
        row = self.pool.sample_row(rng)
        return None if row is None else self.product(row)

    def knowledge(self) -> list[KnowledgePage]:
        """The catalog's knowledge corpus (empty when it has none)."""
        return self._knowledge() if self._knowledge else []


DraftResult = Draft | Rejection
