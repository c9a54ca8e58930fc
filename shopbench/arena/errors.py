"""The arena's exception family: :class:`ArenaError`."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class ArenaError(ShopbenchError):
    """The arena cannot run: a miner did not start, a bad --add-miner, an unusable catalog."""
