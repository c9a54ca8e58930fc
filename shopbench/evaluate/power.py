"""How small a difference in success rate a table's tasks can detect.

Episodes that share a product group are not independent: a model that fails one task of a
group tends to fail the group's other tasks (and a task's K samples of it). The effective
number of episodes is the count divided by the design effect ``1 + (m̄ − 1)·ρ``, with m̄ the
mean episodes per cluster and ρ the intra-cluster correlation of success, estimated by
one-way ANOVA over the clusters. The detectable difference is the normal-approximation
minimum detectable effect of a paired two-sided comparison at that size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from shopbench.evaluate.errors import IntervalError
from shopbench.evaluate.intervals import DEFAULT_LEVEL

DEFAULT_POWER = 0.8
"""Power of the detectable difference, unless asked otherwise."""
RATE_FLOOR = 0.05
"""The success rate is clamped to [RATE_FLOOR, 1 − RATE_FLOOR], so a run that always (or
never) succeeds still has a detectable difference above 0."""


def intra_cluster_correlation(successes: Sequence[float], sizes: Sequence[float]) -> float:
    """The one-way ANOVA estimate of the intra-cluster correlation of a 0/1 outcome, from
    each cluster's successes and episodes, clamped to [0, 1].

    ρ = (MSB − MSW) / (MSB + (m₀ − 1)·MSW), with MSB = Σ mⱼ(pⱼ − p̄)² / (k − 1),
    MSW = Σ mⱼpⱼ(1 − pⱼ) / (N − k) and m₀ = (N − Σ mⱼ² / N) / (k − 1). 0 when it is not
    estimable: fewer than two clusters, no cluster with two episodes, or no variation at all.
    """
    if len(successes) != len(sizes):
        raise IntervalError(f"{len(successes)} success counts but {len(sizes)} cluster sizes")
    clusters = [(s, m) for s, m in zip(successes, sizes, strict=True) if m > 0]
    k = len(clusters)
    total = sum(m for _, m in clusters)
    if k < 2 or total - k <= 0:
        return 0.0
    mean = sum(s for s, _ in clusters) / total
    between = sum(m * (s / m - mean) ** 2 for s, m in clusters) / (k - 1)
    within = sum(s - s * s / m for s, m in clusters) / (total - k)
    m0 = (total - sum(m * m for _, m in clusters) / total) / (k - 1)
    denominator = between + (m0 - 1.0) * within
    if denominator <= 0:
        return 0.0
    return min(1.0, max(0.0, (between - within) / denominator))


def design_effect(mean_size: float, icc: float) -> float:
    """``1 + (m̄ − 1)·ρ``: how many times the variance of a rate over clustered episodes
    exceeds that over as many independent ones."""
    return 1.0 + max(0.0, mean_size - 1.0) * icc


def detectable_difference(
    rate: float,
    episodes: int,
    *,
    mean_size: float = 1.0,
    icc: float = 0.0,
    level: float = DEFAULT_LEVEL,
    power: float = DEFAULT_POWER,
) -> float:
    """The smallest difference in success rate detectable two-sided at `level` with `power`
    by a paired comparison over `episodes` episodes in clusters of `mean_size` episodes:

    ``(z_{1−α/2} + z_power) · sqrt(2·p·(1 − p) / n_eff)``, α = 1 − level, p = `rate` clamped
    to [0.05, 0.95], n_eff = episodes / design_effect(mean_size, icc).
    """
    if episodes < 1:
        raise IntervalError("a detectable difference over no episodes is undefined")
    if not 0 < level < 1 or not 0 < power < 1:
        raise IntervalError(f"level and power must be in (0, 1), got {level} and {power}")
    p = min(1.0 - RATE_FLOOR, max(RATE_FLOOR, rate))
    z = NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0) + NormalDist().inv_cdf(power)
    effective = episodes / design_effect(mean_size, icc)
    return z * math.sqrt(2.0 * p * (1.0 - p) / effective)
