"""Stake-based priority under load: a bounded number of steps run, the rest wait by priority.

When every slot is busy a request waits in a bounded queue; a freed slot goes to the
highest-priority waiter (earliest first among equals). When the queue is full, a newcomer
with a higher priority than the lowest waiter takes that waiter's place (the evicted one is
answered 503); otherwise the newcomer is refused at once. So under load the validators with
the most stake are served first and nobody waits unboundedly.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


class Overloaded(Exception):
    """No slot now and no room (or too low a priority) to wait for one (sent as 503)."""


@dataclass(order=True)
class _Waiter:
    # Sort key: higher priority first, then arrival order.
    key: tuple[float, int]
    future: asyncio.Future[None] = field(compare=False)


class PriorityAdmission:
    """At most `max_active` holders at once; at most `max_waiting` queued by priority."""

    def __init__(self, max_active: int, max_waiting: int) -> None:
        if max_active < 1 or max_waiting < 0:
            raise ValueError("max_active must be >= 1 and max_waiting >= 0")
        self.max_active = max_active
        self.max_waiting = max_waiting
        self._active = 0
        self._waiting: list[_Waiter] = []
        self._arrivals = itertools.count()

    @property
    def active(self) -> int:
        """Slots held now."""
        return self._active

    @property
    def waiting(self) -> int:
        """Requests queued now."""
        return len(self._waiting)

    @asynccontextmanager
    async def slot(self, priority: float) -> AsyncIterator[None]:
        """Hold one slot for the block; raises :class:`Overloaded` when refused or evicted."""
        await self._acquire(priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: float) -> None:
        if self._active < self.max_active and not self._waiting:
            self._active += 1
            return
        if len(self._waiting) >= self.max_waiting:
            lowest = max(self._waiting, default=None)
            if lowest is None or -lowest.key[0] >= priority:
                raise Overloaded("all slots busy and the queue holds higher-priority callers")
            self._waiting.remove(lowest)
            lowest.future.set_exception(Overloaded("evicted by a higher-priority caller"))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = _Waiter((-priority, next(self._arrivals)), future)
        self._waiting.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            elif (
                waiter.future.done()
                and not waiter.future.cancelled()
                and waiter.future.exception() is None
            ):
                # The slot was handed over just as the caller went away: pass it on.
                self._release()
            raise

    def _release(self) -> None:
        self._active -= 1
        while self._waiting and self._active < self.max_active:
            best = min(self._waiting)
            self._waiting.remove(best)
            if not best.future.done():
                self._active += 1
                best.future.set_result(None)
