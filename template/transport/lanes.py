"""Connection pooling in lanes: several small httpx pools instead of one large one.

httpcore's pool scans every connection for every waiting request each time a request starts
or ends, so a single pool holding 64 busy connections spends more CPU on bookkeeping than
on the requests themselves. Here each lane is its own ``httpx.AsyncClient`` with at most
``lane_size`` requests in flight. A request for a URL goes to the first lane, counting from
a home lane chosen by the URL, that has room; so a miner's connections stay in the same few
lanes and are reused turn after turn, and no pool ever grows large.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx


class Lanes:
    """`count` pools made by `factory`, each given at most `lane_size` requests at once."""

    def __init__(self, count: int, lane_size: int, factory: Callable[[], httpx.AsyncClient]):
        if count < 1 or lane_size < 1:
            raise ValueError("count and lane_size must be >= 1")
        self.lane_size = lane_size
        self._clients = [factory() for _ in range(count)]
        self._busy = [0] * count

    @asynccontextmanager
    async def lane(self, key: str) -> AsyncIterator[httpx.AsyncClient]:
        """A pool for a request to `key` (its URL), held for the block."""
        count = len(self._clients)
        home = zlib.crc32(key.encode()) % count
        order = [(home + i) % count for i in range(count)]
        index = next((i for i in order if self._busy[i] < self.lane_size), None)
        if index is None:  # only when the caller admits more than count × lane_size
            index = min(order, key=lambda i: self._busy[i])
        self._busy[index] += 1
        try:
            yield self._clients[index]
        finally:
            self._busy[index] -= 1

    async def aclose(self) -> None:
        """Close every lane's connections."""
        for client in self._clients:
            await client.aclose()
