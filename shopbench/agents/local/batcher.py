"""Turns of concurrently running episodes gathered into one ``generate`` call.

Each episode's policy submits its turn and awaits the reply. The first pending turn waits up
to ``wait_s`` for others to join (less when ``max_batch`` are pending); the batch is then
generated in a worker thread, so the event loop goes on running the other episodes' tool
calls meanwhile, and their next turns queue up for the following batch. One batch runs at a
time. A turn whose episode stopped waiting (a turn timeout) is dropped from its batch, or its
reply discarded if it was already being generated.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from shopbench.agents.local.request import GenRequest, GenResult


class Generator(Protocol):
    """What the batcher drives: one call that generates a list of requests."""

    def generate(self, requests: list[GenRequest]) -> list[GenResult]: ...


class Batcher:
    """Collects pending turns on one event loop and generates them in batches."""

    def __init__(self, engine: Generator, *, max_batch: int, wait_s: float) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.batch_sizes: list[int] = []
        self._pending: list[tuple[GenRequest, asyncio.Future[GenResult]]] = []
        self._arrived = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    async def generate(self, request: GenRequest) -> GenResult:
        """The reply to `request`, generated in a batch with whatever else is pending."""
        future: asyncio.Future[GenResult] = asyncio.get_running_loop().create_future()
        self._pending.append((request, future))
        self._arrived.set()
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            deadline = loop.time() + self.wait_s
            while len(self._live()) < self.max_batch:
                left = deadline - loop.time()
                if left <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), left)
                except TimeoutError:
                    break
            live = self._live()
            batch, rest = live[: self.max_batch], live[self.max_batch :]
            self._pending = rest
            if not batch:
                continue
            self.batch_sizes.append(len(batch))
            try:
                results = await asyncio.to_thread(self.engine.generate, [r for r, _ in batch])
            except Exception as e:  # the model's failure is each waiting turn's failure
                for _, future in batch:
                    if not future.done():
                        future.set_exception(e)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    def _live(self) -> list[tuple[GenRequest, asyncio.Future[GenResult]]]:
        self._pending = [(r, f) for r, f in self._pending if not f.done()]
        return self._pending
