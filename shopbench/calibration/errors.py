"""The calibration layer's exception family: :class:`CalibrationError`, its root."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class CalibrationError(ShopbenchError):
    """A calibration cannot run: no tasks, no policies, an unknown policy, a bad option, a
    targets file that does not load, a report that cannot be written."""
