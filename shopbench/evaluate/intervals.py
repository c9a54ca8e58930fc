"""Bootstrap intervals over tasks, one run and paired, deterministic by seed.

A metric here is a ratio of sums over tasks: each task gives a numerator and a denominator
(pass@k: the task's pass@k over 1; ASR: successes over episodes; the valid-tool-call rate:
well-formed calls over calls). The point estimate is the ratio over all tasks; a bootstrap
resample draws tasks with replacement (the unit the held-out split varies by: a task's K
samples are not independent of one another) and recomputes the ratio. The interval is the
percentile interval of the resampled ratios.

The paired interval of a difference resamples the same tasks for both runs, so the
task-to-task spread that both share cancels, as in a paired test.

Tasks that share a product group are not independent either. Given one cluster key per task,
a resample draws clusters with replacement and takes every task of each drawn cluster (the
cluster bootstrap); the estimator stays the ratio of sums over the tasks drawn. Without
cluster keys each task is its own cluster, and the draws are the plain bootstrap's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from shopbench.evaluate.errors import IntervalError

DEFAULT_RESAMPLES = 2000
"""Bootstrap resamples, unless configured otherwise."""
DEFAULT_LEVEL = 0.95
"""Confidence level of the intervals, unless configured otherwise."""


class Estimate(BaseModel):
    """A metric's value over the tasks and its bootstrap interval."""

    model_config = ConfigDict(frozen=True)

    value: float
    low: float
    high: float

    def text(self, digits: int = 3) -> str:
        """``value [low, high]``."""
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


class BootstrapConfig(BaseModel):
    """How intervals are drawn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resamples: int = Field(default=DEFAULT_RESAMPLES, ge=100, description="bootstrap resamples")
    level: float = Field(default=DEFAULT_LEVEL, gt=0, lt=1, description="confidence level")
    seed: int = Field(default=0, description="seed of the resampling")


def _arrays(num: Sequence[float], den: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    if len(num) != len(den):
        raise IntervalError(f"{len(num)} numerators but {len(den)} denominators")
    if not num:
        raise IntervalError("an interval over no tasks is undefined")
    return np.asarray(num, dtype=float), np.asarray(den, dtype=float)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Row-wise sum(num) / sum(den); 0 where a resample's denominator is 0."""
    top, bottom = num.sum(axis=-1), den.sum(axis=-1)
    return np.divide(top, bottom, out=np.zeros_like(top, dtype=float), where=bottom > 0)


def _clustered(arrays: Sequence[np.ndarray], clusters: Sequence[str] | None) -> list[np.ndarray]:
    """Each array summed per cluster, clusters in first-seen order; unchanged without keys."""
    if clusters is None:
        return list(arrays)
    n = len(arrays[0])
    if len(clusters) != n:
        raise IntervalError(f"{n} tasks but {len(clusters)} cluster keys")
    order: dict[str, int] = {}
    index = np.asarray([order.setdefault(c, len(order)) for c in clusters], dtype=np.intp)
    return [np.bincount(index, weights=a, minlength=len(order)) for a in arrays]


def _draws(n: int, config: BootstrapConfig) -> np.ndarray:
    return np.random.default_rng(config.seed).integers(0, n, size=(config.resamples, n))


def _estimate(value: float, samples: np.ndarray, config: BootstrapConfig) -> Estimate:
    tail = (1.0 - config.level) / 2.0 * 100.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return Estimate(value=value, low=float(low), high=float(high))


def bootstrap(
    num: Sequence[float],
    den: Sequence[float],
    config: BootstrapConfig | None = None,
    *,
    clusters: Sequence[str] | None = None,
) -> Estimate:
    """The ratio sum(num)/sum(den) over tasks and its bootstrap interval: over tasks, or over
    `clusters` (one key per task position) when given."""
    config = config or BootstrapConfig()
    n_arr, d_arr = _arrays(num, den)
    value = float(_ratio(n_arr, d_arr))
    n_arr, d_arr = _clustered([n_arr, d_arr], clusters)
    idx = _draws(len(n_arr), config)
    return _estimate(value, _ratio(n_arr[idx], d_arr[idx]), config)


def paired_difference(
    a: tuple[Sequence[float], Sequence[float]],
    b: tuple[Sequence[float], Sequence[float]],
    config: BootstrapConfig | None = None,
    *,
    clusters: Sequence[str] | None = None,
) -> Estimate:
    """ratio(a) − ratio(b) over the same tasks (position i is one task in both) and its
    paired bootstrap interval: each resample draws the same tasks (with `clusters`, one key
    per task position: the same clusters) for both runs."""
    config = config or BootstrapConfig()
    an, ad = _arrays(*a)
    bn, bd = _arrays(*b)
    if len(an) != len(bn):
        raise IntervalError(f"a paired difference needs the same tasks: {len(an)} vs {len(bn)}")
    value = float(_ratio(an, ad) - _ratio(bn, bd))
    an, ad, bn, bd = _clustered([an, ad, bn, bd], clusters)
    idx = _draws(len(an), config)
    return _estimate(value, _ratio(an[idx], ad[idx]) - _ratio(bn[idx], bd[idx]), config)
