"""The held-out split, rotation buckets and cluster ids: consensus constants that must hold."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from shopbench.tasks.split import (
    HELDOUT_FRACTION,
    SPLIT_KEY,
    SPLIT_VERSION,
    Rotation,
    SplitRule,
    cluster_id,
    group_bucket,
    group_fraction,
)


def _groups(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"top > mid > leaf{rng.randrange(10**6)}|brand{rng.randrange(10**6)}" for _ in range(n)]


def test_the_split_is_a_pinned_keyed_hash() -> None:
    # These values are consensus: every validator must compute the same. If this test fails,
    # the split changed, and SPLIT_VERSION (and SPLIT_KEY) must be bumped with it.
    assert SPLIT_VERSION == 1 and SPLIT_KEY == b"shopbench-split-v1"
    assert HELDOUT_FRACTION == 0.15
    assert group_fraction("electronics > audio > earbuds|acme") == pytest.approx(
        0.0037940260178480896, abs=1e-15
    )
    assert SplitRule().is_heldout("electronics > audio > earbuds|acme")
    assert group_bucket("electronics > audio > earbuds|acme", 4) == 3


def test_about_the_held_out_fraction_of_groups_is_held_out() -> None:
    rule = SplitRule()
    groups = _groups(20_000)
    share = sum(rule.is_heldout(g) for g in groups) / len(groups)
    assert abs(share - HELDOUT_FRACTION) < 0.01
    assert all(0.0 <= group_fraction(g) < 1.0 for g in groups[:1000])


def test_forced_groups_are_held_out_and_others_unchanged() -> None:
    rule = SplitRule()
    live = next(g for g in _groups(100) if not rule.is_heldout(g))
    forced = rule.with_forced([live])
    assert forced.split_of(live) == "heldout" and rule.split_of(live) == "live"
    others = _groups(500, seed=1)
    assert [forced.split_of(g) for g in others] == [rule.split_of(g) for g in others]


def test_rotation_names_current_retired_and_waiting_buckets() -> None:
    r = Rotation(epoch=6, n_buckets=4)
    assert (r.current, r.cycle, r.retired, r.waiting) == (2, 1, [0, 1], [3])
    assert Rotation(epoch=0, n_buckets=4).retired == []
    assert Rotation(epoch=3, n_buckets=4).waiting == []


def test_each_live_group_is_current_exactly_once_per_cycle_and_held_out_never() -> None:
    groups = _groups(1500, seed=2)
    rule = SplitRule()
    current_count: Counter[str] = Counter()
    for epoch in range(8, 8 + 5):  # one full cycle of 5 buckets, starting mid-way
        r = Rotation(epoch=epoch, n_buckets=5)
        states = Counter(r.state(g) for g in groups)
        assert states["heldout"] == sum(rule.is_heldout(g) for g in groups)
        for g in groups:
            if r.is_current(g):
                current_count[g] += 1
                assert r.bucket(g) == r.current
            if rule.is_heldout(g):
                assert r.state(g) == "heldout" and r.bucket(g) is None
    live = [g for g in groups if not rule.is_heldout(g)]
    assert all(current_count[g] == 1 for g in live)
    assert not any(current_count[g] for g in groups if rule.is_heldout(g))
    sizes = Counter(group_bucket(g, 5) for g in live)
    assert min(sizes.values()) > 0.8 * len(live) / 5  # buckets are about even


def test_retired_buckets_are_those_current_earlier_in_the_cycle() -> None:
    g = _groups(500, seed=3)
    for epoch in range(4, 8):
        r = Rotation(epoch=epoch, n_buckets=4)
        earlier = {Rotation(epoch=e, n_buckets=4).current for e in range(4, epoch)}
        assert set(r.retired) == earlier
        for x in g:
            if r.state(x) == "retired":
                assert any(Rotation(epoch=e, n_buckets=4).is_current(x) for e in range(4, epoch))


def test_cluster_ids_ignore_order_and_tell_different_tasks_apart() -> None:
    a = cluster_id("shop", ["b1", "b2"], ["title", "price:between", "title"])
    assert a == cluster_id("shop", ["b2", "b1"], ["price:between", "title"])
    assert a != cluster_id("voucher", ["b1", "b2"], ["title", "price:between"])
    assert a != cluster_id("shop", ["b1", "b3"], ["title", "price:between"])
    assert a != cluster_id("shop", ["b1", "b2"], ["title", "price:less than"])
    assert a.startswith("c") and len(a) == 17
