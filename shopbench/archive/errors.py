"""The archive layer's exception family.

:class:`ArchiveError` is the root. :class:`SinkError` and its subclasses say the archive cannot
store, read, query or fetch trajectories (a refused record, a segment or object store that
fails, an unsafe name or a symbolic link, a stale head, a malformed filter);
:class:`AnnotationRefused` an annotation that is not made; :class:`NotComparable` two
episodes a diff will not compare; :class:`NotFound` is the HTTP API's 404, an id the archive
does not publish.
"""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class ArchiveError(ShopbenchError):
    """The archive cannot do what was asked; the root of the archive layer's errors."""


class SinkError(ArchiveError):
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


class QueryError(SinkError):
    """The archive cannot be queried (unreadable manifest or shard, DuckDB missing)."""


class FilterError(SinkError):
    """A query filter that is malformed: its name, the value and what is allowed.

    ``filter`` is the field's name (None when the problem spans several), ``reason`` what is
    wrong with it (without the CLI's flag name) and ``allowed`` the values it accepts when
    they are a closed set, for callers that answer in a structured form (the HTTP API's
    422)."""

    def __init__(
        self,
        message: str,
        *,
        filter: str | None = None,
        allowed: list[str] | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.filter = filter
        self.allowed = allowed
        self.reason = reason


class UnsafePath(SinkError):
    """A name from a source that is not one of the archive's own paths; never followed."""


class LinkRefused(UnsafePath):
    """A symbolic link where a pull writes (inside its destination) or reads (inside a local
    source folder): refused, never followed. The message names the link."""


class StaleHead(SinkError):
    """A validator's signed head older than the reader accepts (``traces pull
    --max-head-age``), or no head to date the source by; nothing is pulled."""


class UnknownValidator(SinkError):
    """A pull names a validator the source holds nothing of (no manifest, no signed head);
    the message lists the validators it does hold."""


class AnnotationRefused(ArchiveError):
    """An annotation that is not made or stored: the field that is wrong and why (a label
    that is no slug, a note over its size or holding a control character, a turn the
    episode lacks, an episode the archive does not hold)."""


class NotComparable(ArchiveError):
    """Two episodes a diff will not compare: of different tasks, or one episode twice (the
    HTTP API's 422 naming ``b``)."""


class NotFound(ArchiveError):
    """An id the archive does not publish (unknown or embargoed: the answer is the same)."""
