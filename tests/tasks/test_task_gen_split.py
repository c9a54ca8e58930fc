"""The split over 10,000 generated tasks of all intents: nothing held out leaks into live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.intent_registry import intent_specs
from shopbench.tasks.split import SplitRule
from shopbench.tasks.validate import clusters_across_splits

# The intents whose query states the whole task (a clarify task holds some of it back).
INTENTS = [s.name for s in intent_specs() if not s.shape.hidden]


@pytest.mark.slow
def test_ten_thousand_tasks_keep_held_out_groups_out_of_live_tasks(
    catalog_dir: Path, catalog: Any
) -> None:
    # 8,000 live and 2,000 held-out tasks, every stated intent; a narrow satisfying window and two
    # workers keep this quick on the small catalog.
    def build(split: str, n: int, seed: int) -> list[Any]:
        cfg = BuildConfig(catalog=catalog_dir, intents=INTENTS, n=n, seed=seed, split=split,
                          satisfy_window=50, workers=2, chunk=250)  # fmt: skip
        result = build_tasks(cfg)
        assert all(r.produced == n for r in result.reports), result.reports
        return result.tasks

    live = build("live", 2000, 1)
    held = build("heldout", 500, 2)
    assert len(live) + len(held) == 10_000

    group_of = {p.product_id: p.group_key for b in catalog.iter_products() for p in b}
    rule = SplitRule()
    live_groups: set[str] = set()
    for t in live:
        for slot, ids in zip(t.reward, t.satisfying or [], strict=True):
            assert not rule.is_heldout(group_of[slot.product_id]), t.id  # type: ignore[index]
            assert ids and not any(rule.is_heldout(group_of[i]) for i in ids), t.id
            live_groups.update(group_of[i] for i in ids)
    held_groups = {group_of[i] for t in held for i in t.targets}  # type: ignore[index]
    assert all(rule.is_heldout(g) for g in held_groups)
    assert live_groups.isdisjoint(held_groups)
    assert clusters_across_splits(live + held) == []
    # the clusters really group: some live tasks are near-duplicates of others
    assert len({t.cluster for t in live}) < len(live)
    assert {t.cluster for t in live}.isdisjoint({t.cluster for t in held})
