"""Statistics of a task set, per intent, in the terms ShoppingBench's test set is described.

Constraints are counted as :meth:`Slot.n_constraints` counts them (each title, SKU pair,
attribute value, price bound and service). Shares are fractions of the intent's tasks.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from shopbench.tasks.model import Task


class IntentStats(BaseModel):
    """The figures of one intent."""

    model_config = ConfigDict(frozen=True)

    count: int
    mean_constraints_per_slot: float
    mean_constraints_per_task: float
    slots: dict[str, float] = Field(description="share of tasks by slot count")
    constraint_kinds: dict[str, float] = Field(
        description="share of slots asking for each kind (sku, attribute, price, service)"
    )
    price_modes: dict[str, float] = Field(description="share of price bounds by mode")
    voucher_types: dict[str, float] | None = Field(
        default=None, description="voucher tasks: share of platform and shop vouchers"
    )
    discount_types: dict[str, float] | None = Field(
        default=None, description="voucher tasks: share of percentage and fixed discounts"
    )
    mean_discount_percent: float | None = None
    query_chars_mean: float
    query_words_mean: float
    query_words_median: float
    splits: dict[str, int]
    clusters: int = Field(description="distinct cluster ids")
    mean_satisfying: float | None = Field(
        default=None, description="mean satisfying-set size per slot, where known"
    )
    hidden_kinds: dict[str, float] | None = Field(
        default=None,
        description="clarify tasks: share of tasks holding back each kind (price, service, "
        "attribute)",
    )
    mean_hidden: float | None = Field(
        default=None, description="clarify tasks: mean topics held back per task"
    )


class TaskStats(BaseModel):
    """The figures of a task set: per intent, in the order intents first appear."""

    model_config = ConfigDict(frozen=True)

    total: int
    intents: dict[str, IntentStats]


def _shares(counts: Counter[str], total: int) -> dict[str, float]:
    if not total:
        return {}
    return {k: round(v / total, 4) for k, v in sorted(counts.items())}


def intent_stats(tasks: Sequence[Task]) -> IntentStats:
    """The figures of tasks of one intent (any non-empty sequence)."""
    slots = [s for t in tasks for s in t.reward]
    per_slot = [s.n_constraints() for s in slots]
    kinds: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    for s in slots:
        kinds.update(
            k for k, present in (
                ("sku", bool(s.sku_options)), ("attribute", bool(s.attributes)),
                ("price", bool(s.price)), ("service", bool(s.service)),
            ) if present
        )  # fmt: skip
        modes.update(b.mode for b in s.price or [])
    vouchers = [t.voucher for t in tasks if t.voucher is not None]
    words = [len(t.query.split()) for t in tasks]
    sat = [len(ids) for t in tasks if t.satisfying for ids in t.satisfying]
    pct = [v.discount * 100 for v in vouchers if v.discount is not None]
    cards = [t.hidden for t in tasks if t.hidden is not None]
    hidden: Counter[str] = Counter()
    for c in cards:
        hidden.update(k for k, held in (
            ("price", c.price), ("service", c.service), ("attribute", bool(c.pairs)),
        ) if held)  # fmt: skip
    return IntentStats(
        count=len(tasks),
        mean_constraints_per_slot=round(statistics.fmean(per_slot), 3),
        mean_constraints_per_task=round(sum(per_slot) / len(tasks), 3),
        slots=_shares(Counter(str(len(t.reward)) for t in tasks), len(tasks)),
        constraint_kinds=_shares(kinds, len(slots)),
        price_modes=_shares(modes, sum(modes.values())),
        voucher_types=_shares(Counter(v.voucher_type for v in vouchers), len(vouchers))
        if vouchers
        else None,
        discount_types=_shares(Counter(v.discount_type for v in vouchers), len(vouchers))
        if vouchers
        else None,
        mean_discount_percent=round(statistics.fmean(pct), 2) if pct else None,
        query_chars_mean=round(statistics.fmean(len(t.query) for t in tasks), 1),
        query_words_mean=round(statistics.fmean(words), 1),
        query_words_median=float(statistics.median(words)),
        splits=dict(Counter(t.split for t in tasks)),
        clusters=len({t.cluster for t in tasks if t.cluster}),
        mean_satisfying=round(statistics.fmean(sat), 2) if sat else None,
        hidden_kinds=_shares(hidden, len(cards)) if cards else None,
        mean_hidden=round(statistics.fmean(len(c.topics()) for c in cards), 3) if cards else None,
    )


def task_stats(tasks: Iterable[Task]) -> TaskStats:
    """The figures of a task set, per intent."""
    by_intent: dict[str, list[Task]] = {}
    for t in tasks:
        by_intent.setdefault(t.intent, []).append(t)
    return TaskStats(
        total=sum(len(v) for v in by_intent.values()),
        intents={k: intent_stats(v) for k, v in by_intent.items()},
    )
