"""The evaluation layer's exception family: :class:`EvalError`, its root, and the metric,
interval, training-set and model-evaluation errors under it."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class EvalError(ShopbenchError):
    """An evaluation cannot run: no tasks, bad sample or concurrency counts, unwritable output;
    the root of the evaluation layer's errors."""


class MetricError(EvalError):
    """A metric was asked for with arguments it is undefined for (k > n, c > n, k < 1)."""


class IntervalError(EvalError):
    """An interval was asked of no tasks, of unpaired runs, or at a level outside (0, 1)."""


class TrainingSetError(EvalError):
    """A training set file cannot be read, or holds no query."""


class ModelEvalError(EvalError):
    """A model evaluation cannot run: a model that is not what it is named, bad options."""
