"""The archive sink: where a validator's signed trajectories go, and what it promises.

An :class:`ArchiveSink` acknowledges a batch by returning from :meth:`~ArchiveSink.put`;
what it acknowledged must survive the validator being killed the next instant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shopbench.errors import ShopbenchError
from shopbench.records.trajectory import Trajectory


class SinkError(ShopbenchError):
    """The archive sink cannot store or read trajectories (disk full, bad file)."""


class RecordRefused(SinkError):
    """A record the archive will not store (invalid, held out, a duplicate in its batch).

    The whole batch it came in is refused: nothing of it is written.
    """

    def __init__(self, episode_id: str, reason: str) -> None:
        super().__init__(f"episode {episode_id!r} refused: {reason}")
        self.episode_id = episode_id
        self.reason = reason


class SegmentError(SinkError):
    """The write-ahead segment cannot be written, synced or read back."""


class RemoteError(SinkError):
    """Object storage cannot be opened, written or read (bad URL, missing driver, refused,
    unreachable); an upload that fails this way stays pending and is retried."""


@runtime_checkable
class ArchiveSink(Protocol):
    """A durable destination for trajectories."""

    async def put(self, trajectories: Sequence[Trajectory]) -> int:
        """Store `trajectories`; once this returns they survive a crash. Returns the count."""
        ...

    async def close(self) -> None:
        """Release the sink."""
        ...
