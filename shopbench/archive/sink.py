"""The archive sink: where a validator's signed trajectories go, and what it promises.

An :class:`ArchiveSink` acknowledges a batch by returning from :meth:`~ArchiveSink.put`;
what it acknowledged must survive the validator being killed the next instant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shopbench.records.trajectory import Trajectory


@runtime_checkable
class ArchiveSink(Protocol):
    """A durable destination for trajectories."""

    async def put(self, trajectories: Sequence[Trajectory]) -> int:
        """Store `trajectories`; once this returns they survive a crash. Returns the count."""
        ...

    async def close(self) -> None:
        """Release the sink."""
        ...
