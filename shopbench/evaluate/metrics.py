"""Evaluation metrics: ASR, mean rule score, pass@k and pass^k, overall and per intent.

- ASR (absolute success rate): the share of graded episodes that succeeded.
- mean rule: the mean over episodes of each episode's mean rule score.
- pass@k: the chance that at least one of k attempts drawn without replacement from a
  task's n attempts succeeds, estimated without bias as 1 - C(n-c, k) / C(n, k) (c = the
  task's successes), averaged over tasks.
- pass^k: the chance that all k drawn attempts succeed, C(c, k) / C(n, k), averaged over tasks.

The binomial ratios are computed as exact products of ratios of small integers (no huge
binomials, no cancellation), so the results are exact to float rounding for any n.
A k larger than a task's n is an error: the estimator is undefined there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from shopbench.evaluate.errors import MetricError
from shopbench.records.task import Intent


class Graded(Protocol):
    """What the metrics read from a graded episode (an Outcome has these)."""

    @property
    def task_id(self) -> str: ...
    @property
    def intent(self) -> Intent: ...
    @property
    def success(self) -> bool: ...
    @property
    def mean_rule(self) -> float: ...


def _check(n: int, c: int, k: int) -> None:
    if k < 1:
        raise MetricError(f"k must be at least 1, got {k}")
    if n < 0 or not 0 <= c <= n:
        raise MetricError(f"successes c={c} must be within 0..n={n}")
    if k > n:
        raise MetricError(f"k={k} exceeds the n={n} attempts of a task; pass@k is undefined")


def _ratio(a: int, n: int, k: int) -> Fraction:
    """C(a, k) / C(n, k) as the product of (a - i) / (n - i) for i < k; 0 when a < k."""
    if a < k:
        return Fraction(0)
    r = Fraction(1)
    for i in range(k):
        r *= Fraction(a - i, n - i)
    return r


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with c successes in n attempts: 1 - C(n-c,k)/C(n,k)."""
    _check(n, c, k)
    return float(1 - _ratio(n - c, n, k))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one task with c successes in n attempts: C(c,k)/C(n,k)."""
    _check(n, c, k)
    return float(_ratio(c, n, k))


def attempt_counts(outcomes: Iterable[Graded]) -> dict[str, tuple[int, int]]:
    """Per task id: (attempts n, successes c), tasks in first-seen order."""
    counts: dict[str, list[int]] = {}
    for o in outcomes:
        nc = counts.setdefault(o.task_id, [0, 0])
        nc[0] += 1
        nc[1] += int(o.success)
    return {t: (n, c) for t, (n, c) in counts.items()}


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """pass@k averaged over tasks given as (n, c) pairs; raises MetricError if none."""
    values = [Fraction(1) - _checked_ratio(n - c, n, c, k) for n, c in counts]
    return _mean(values, "pass@k")


def mean_pass_hat_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """pass^k averaged over tasks given as (n, c) pairs; raises MetricError if none."""
    values = [_checked_ratio(c, n, c, k) for n, c in counts]
    return _mean(values, "pass^k")


def _checked_ratio(a: int, n: int, c: int, k: int) -> Fraction:
    _check(n, c, k)
    return _ratio(a, n, k)


def _mean(values: Sequence[Fraction], what: str) -> float:
    if not values:
        raise MetricError(f"{what} of no tasks is undefined")
    return float(sum(values, Fraction(0)) / len(values))


def asr(outcomes: Iterable[Graded]) -> float:
    """Absolute success rate over episodes; 0.0 for none."""
    flags = [o.success for o in outcomes]
    return sum(flags) / len(flags) if flags else 0.0


def mean_rule(outcomes: Iterable[Graded]) -> float:
    """Mean over episodes of the per-episode mean rule score; 0.0 for none."""
    scores = [o.mean_rule for o in outcomes]
    return sum(scores) / len(scores) if scores else 0.0


class Summary(BaseModel):
    """The metrics of a set of graded episodes."""

    model_config = ConfigDict(frozen=True)

    episodes: int
    tasks: int
    asr: float
    mean_rule: float
    pass_at_k: dict[int, float] = Field(default_factory=dict)
    pass_hat_k: dict[int, float] = Field(default_factory=dict)


def summarize(outcomes: Iterable[Graded], ks: Sequence[int] = (1,)) -> Summary:
    """ASR, mean rule and, for each k in `ks`, pass@k and pass^k over tasks.

    A k larger than some task's attempt count raises MetricError naming it.
    """
    items = list(outcomes)
    counts = list(attempt_counts(items).values())
    at: dict[int, float] = {}
    hat: dict[int, float] = {}
    if counts:
        for k in ks:
            at[k] = mean_pass_at_k(counts, k)
            hat[k] = mean_pass_hat_k(counts, k)
    return Summary(
        episodes=len(items),
        tasks=len(counts),
        asr=asr(items),
        mean_rule=mean_rule(items),
        pass_at_k=at,
        pass_hat_k=hat,
    )


def by_intent(outcomes: Iterable[Graded], ks: Sequence[int] = (1,)) -> dict[Intent, Summary]:
    """:func:`summarize` per intent, intents in first-seen order."""
    groups: dict[Intent, list[Graded]] = defaultdict(list)
    for o in outcomes:
        groups[o.intent].append(o)
    return {intent: summarize(items, ks) for intent, items in groups.items()}
