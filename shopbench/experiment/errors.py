"""The experiment's exception family: :class:`ExperimentError`."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class ExperimentError(ShopbenchError):
    """An experiment cannot run as configured: an unknown arm, model or view, too few
    episodes for an arm, held-out tasks that share product groups with the training data,
    or a stage whose files are not what the config asks for."""
