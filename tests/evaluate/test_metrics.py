"""ASR, mean rule, pass@k and pass^k: exact values, edge cases and rejections."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from shopbench.catalog.schema import Product
from shopbench.evaluate.errors import MetricError
from shopbench.evaluate.metrics import (
    asr,
    attempt_counts,
    by_intent,
    mean_pass_at_k,
    mean_pass_hat_k,
    mean_rule,
    pass_at_k,
    pass_hat_k,
    summarize,
)
from shopbench.outcome.grader import grade
from shopbench.outcome.spec import Slot
from shopbench.records.outcome import Outcome
from shopbench.tasks.model import Task


def test_pinned_values() -> None:
    assert round(pass_at_k(10, 3, 5), 6) == 0.916667
    assert round(pass_hat_k(10, 3, 2), 6) == 0.066667
    assert pass_at_k(10, 3, 5) == float(Fraction(11, 12))  # 1 - 21/252
    assert pass_hat_k(10, 3, 2) == float(Fraction(1, 15))  # 3/45
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3) and pass_hat_k(10, 3, 1) == 0.3


def test_edges() -> None:
    assert pass_at_k(10, 0, 5) == 0.0 and pass_hat_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 10) == 1.0 and pass_hat_k(10, 10, 10) == 1.0
    assert pass_at_k(10, 6, 5) == 1.0  # fewer than k failures: some success is certain
    assert pass_hat_k(10, 3, 4) == 0.0  # fewer than k successes
    assert pass_at_k(100, 1, 50) == 0.5  # 1 - C(99,50)/C(100,50) = 1 - 50/100


@pytest.mark.parametrize("n", [1, 2, 7, 33, 64, 100])
def test_agrees_with_exact_binomials_up_to_n_100(n: int) -> None:
    for c in range(0, n + 1, max(1, n // 9)):
        for k in range(1, n + 1, max(1, n // 7)):
            want_at = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
            want_hat = Fraction(math.comb(c, k), math.comb(n, k))
            assert pass_at_k(n, c, k) == float(want_at)
            assert pass_hat_k(n, c, k) == float(want_hat)
            assert 0.0 <= pass_at_k(n, c, k) <= 1.0


@pytest.mark.parametrize(
    ("n", "c", "k", "reason"),
    [(3, 1, 5, "k=5 exceeds the n=3"), (10, 11, 1, "c=11"), (10, 3, 0, "at least 1")],
)
def test_rejects_undefined_arguments(n: int, c: int, k: int, reason: str) -> None:
    with pytest.raises(MetricError, match=reason):
        pass_at_k(n, c, k)
    with pytest.raises(MetricError, match=reason):
        pass_hat_k(n, c, k)


def test_means_over_tasks() -> None:
    counts = [(10, 3), (10, 0), (10, 10)]
    assert mean_pass_at_k(counts, 5) == pytest.approx((11 / 12 + 0 + 1) / 3)
    assert mean_pass_hat_k(counts, 2) == pytest.approx((1 / 15 + 0 + 1) / 3)
    with pytest.raises(MetricError, match="no tasks"):
        mean_pass_at_k([], 1)
    with pytest.raises(MetricError, match="k=4 exceeds the n=3"):
        mean_pass_at_k([(10, 3), (3, 1)], 4)


def _task(tid: str, intent: str = "product") -> Task:
    slots = [Slot(product_id="1", title=["Rubber Wheel"])]
    if intent == "shop":
        slots = slots * 2
    return Task(id=tid, intent=intent, query="q", reward=slots)  # type: ignore[arg-type]


def _outcome(task: Task, ok: bool) -> Outcome:
    title = "Rubber Wheel" if ok else "Garden Hose Reel"
    p = Product(product_id="9", shop_id="1", category="A", title=title, price=1)
    return grade(task, [p] * len(task.reward))


def test_asr_mean_rule_and_breakdowns_from_graded_outcomes() -> None:
    a, b, s = _task("a"), _task("b"), _task("s", "shop")
    outcomes = [_outcome(a, True), _outcome(a, False), _outcome(a, True), _outcome(b, False)]
    outcomes += [_outcome(s, True), _outcome(s, True)]
    assert [o.success for o in outcomes] == [True, False, True, False, True, True]
    assert asr(outcomes) == pytest.approx(4 / 6)
    assert mean_rule(outcomes) == pytest.approx(4 / 6)  # a title-only slot scores 0 or 1
    assert attempt_counts(outcomes) == {"a": (3, 2), "b": (1, 0), "s": (2, 2)}

    summary = summarize(outcomes, ks=(1,))
    assert (summary.episodes, summary.tasks) == (6, 3)
    assert summary.pass_at_k[1] == pytest.approx((2 / 3 + 0 + 1) / 3)
    parts = by_intent(outcomes, ks=(1,))
    assert list(parts) == ["product", "shop"]
    assert parts["product"].asr == pytest.approx(2 / 4) and parts["product"].tasks == 2
    assert parts["shop"].asr == 1.0 and parts["shop"].pass_hat_k[1] == 1.0
    with pytest.raises(MetricError, match="k=2 exceeds the n=1"):
        summarize(outcomes, ks=(2,))
    assert asr([]) == 0.0 and summarize([]).tasks == 0
