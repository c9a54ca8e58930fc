"""What readers make of the annotations kept beside the archive: annotations bound to the
records in hand, the shelf of what one episode shows under the cap per annotator, and
the book a long-running service keeps up to date as the files grow.

The signed log itself (its model, the bytes signed, the append and the bounded read) is
:mod:`shopbench.archive.annotations`.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from shopbench.archive.annotations.model import (
    ANNOTATIONS_DIR,
    MAX_LINE_BYTES,
    MAX_PER_ANNOTATOR,
    Annotation,
    Entry,
    record_digest,
)
from shopbench.archive.annotations.read import (
    AnnotationRead,
    FileReading,
    annotator_files,
    live_entries,
)
from shopbench.archive.signing import Verifier

if TYPE_CHECKING:
    from shopbench.records.trajectory import Trajectory


log = logging.getLogger(__name__)


def withheld_ids(entries: Iterable[Entry], limit: int) -> set[str]:
    """Ids of the annotations past the cap: of each annotator's annotations of each
    episode, all but the earliest `limit` by signed time (then id)."""
    ordered = sorted(entries, key=lambda e: (e[1].created_at, e[0]))
    count: Counter[tuple[str, str]] = Counter()
    out = set()
    for aid, a in ordered:
        count[a.episode_id, a.annotator] += 1
        if count[a.episode_id, a.annotator] > limit:
            out.add(aid)
    return out


def bound(annotations: Iterable[Annotation], t: Trajectory) -> tuple[list[Annotation], list[str]]:
    """The annotations of `t` made on exactly its record (their ``record_sha256`` is its
    :func:`record_digest`, their turn one it has), and why each other one is not."""
    digest = record_digest(t)
    kept, why = [], []
    for a in annotations:
        if a.episode_id != t.episode_id:
            continue
        if a.record_sha256 != digest:
            why.append(f"annotation {a.id} of {a.episode_id} was made on another record")
        elif a.turn is not None and a.turn > t.turns:
            why.append(f"annotation {a.id} names turn {a.turn}; the episode has {t.turns}")
        else:
            kept.append(a)
    return kept, why


def bound_all(
    grouped: Mapping[str, list[Annotation]], records: Iterable[Trajectory]
) -> dict[str, list[Annotation]]:
    """:func:`bound` over many records: episode id → the annotations bound to it."""
    out: dict[str, list[Annotation]] = {}
    for t in records:
        kept, _ = bound(grouped.get(t.episode_id, ()), t)
        if kept:
            out[t.episode_id] = kept
    return out


def records_by_id(root: str | Path, episode_ids: Iterable[str]) -> dict[str, Trajectory]:
    """The sealed records of `episode_ids` under archive `root` (every shard a manifest
    lists, embargoed ones included: the operator's own read), by episode id."""
    import duckdb

    from shopbench.archive.layout import from_table
    from shopbench.archive.query import scan, sealed_shards

    wanted = sorted(set(episode_ids))
    scanned = scan(sealed_shards(root)) if wanted else None
    if scanned is None:
        return {}
    source, params = scanned
    con = duckdb.connect()
    try:
        table = con.sql(
            f'SELECT * {source} AND "episode_id" IN (SELECT unnest(?))', params=[*params, wanted]
        ).to_arrow_table()
    finally:
        con.close()
    return {t.episode_id: t for t in from_table(table)}


class AnnotationSettings(BaseModel):
    """How much of one annotator a reader shows on one episode."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_per_annotator: int = Field(
        default=MAX_PER_ANNOTATOR, ge=1, le=10_000,
        description="the most annotations of one annotator shown on one episode: their "
        "earliest by signed time (then id); the rest are withheld, and the count withheld "
        "is shown",
    )  # fmt: skip


class Shown(BaseModel):
    """What a reader shows of one record's annotations."""

    model_config = ConfigDict(frozen=True)

    annotations: list[Annotation] = Field(description="oldest first (signed time, then id)")
    withheld: dict[str, int] = Field(
        description="annotator → how many of their annotations of the episode are past "
        "the cap and not shown"
    )
    max_per_annotator: int


_SHELVES = itertools.count(1)


class AnnotationShelf:
    """The live annotations of an archive as one read left them, indexed by episode, then
    record (``record_sha256``), then annotator, each annotator's oldest first: what one
    episode shows is found without looking at another episode's annotations, and costs at
    most the cap per annotator however many an annotator wrote."""

    def __init__(self, entries: Sequence[Entry], settings: AnnotationSettings) -> None:
        self.settings = settings
        self.generation = next(_SHELVES)
        """Which shelf this is: a later one has a higher number (for caches of what was
        derived from one)."""
        self._index: dict[str, dict[str, dict[str, list[Entry]]]] = {}
        self._labelled: dict[str, set[str]] = {}
        for aid, a in sorted(live_entries(entries), key=lambda e: (e[1].created_at, e[0])):
            by_record = self._index.setdefault(a.episode_id, {})
            by_record.setdefault(a.record_sha256, {}).setdefault(a.annotator, []).append((aid, a))
            self._labelled.setdefault(a.label, set()).add(a.episode_id)

    def annotated(self) -> list[str]:
        """Ids of the episodes some live annotation names (on whatever record), sorted."""
        return sorted(self._index)

    def labels(self, episodes: Collection[str] | None = None) -> list[str]:
        """The labels of the live annotations (of `episodes` only, when given), sorted."""
        if episodes is None:
            return sorted(self._labelled)
        return sorted(x for x, ids in self._labelled.items() if not ids.isdisjoint(episodes))

    def labelled(self, labels: Iterable[str]) -> list[str]:
        """Ids of the episodes some live annotation labels with one of `labels` (on whatever
        record, shown or past the cap: :meth:`shown` decides what a record shows), sorted."""
        return sorted(set().union(*(self._labelled.get(x, set()) for x in labels)))

    def has(self, episode_id: str) -> bool:
        """Whether any live annotation names `episode_id` (on whatever record)."""
        return episode_id in self._index

    def live(self, episode_id: str) -> list[Annotation]:
        """Every live annotation of `episode_id`, on whatever record, uncapped."""
        return [a for mine in self._index.get(episode_id, {}).values()
                for entries in mine.values() for _, a in entries]  # fmt: skip

    def shown(self, t: Trajectory) -> Shown:
        """The annotations shown beside record `t`: bound to exactly it (:func:`bound`),
        each annotator's earliest :attr:`AnnotationSettings.max_per_annotator`, oldest
        first; and how many of each annotator's are withheld past that."""
        limit = self.settings.max_per_annotator
        mine = self._index.get(t.episode_id, {}).get(record_digest(t), {})
        kept: list[Entry] = []
        withheld: dict[str, int] = {}
        for annotator, entries in mine.items():
            n = 0
            for i, (aid, a) in enumerate(entries):
                if a.turn is not None and a.turn > t.turns:
                    continue  # names a turn the record lacks: never shown
                if n == limit:
                    withheld[annotator] = len(entries) - i
                    break
                kept.append((aid, a))
                n += 1
        kept.sort(key=lambda e: (e[1].created_at, e[0]))
        return Shown(annotations=[a for _, a in kept], withheld=withheld, max_per_annotator=limit)


class BookStats(BaseModel):
    """What an :class:`AnnotationBook` has done since it was made (each only grows)."""

    model_config = ConfigDict(frozen=True)

    files_read: int = Field(default=0, description="files read from their start")
    resumed: int = Field(default=0, description="files read on from where the last read ended")
    bytes_read: int = 0
    lines_read: int = 0
    signatures_checked: int = 0
    repeats: int = Field(default=0, description="lines repeating an annotation already read")
    oversized: int = Field(default=0, description=f"lines over {MAX_LINE_BYTES} bytes skipped")
    rebuilds: int = Field(default=0, description="times the episode index was built")


class AnnotationBook:
    """The annotations under one archive root as a long-running reader (the trace service)
    holds them (thread-safe): each file is read and its lines verified once; when a file
    grows only its new lines are read (files are append-only), and when its earlier bytes
    are not the ones read it is read again from the start. :attr:`stats` counts the work."""

    def __init__(
        self, root: str | Path, verifier: Verifier, *, annotators: Sequence[str] = (),
        settings: AnnotationSettings | None = None,
    ) -> None:  # fmt: skip
        import threading

        self.root = Path(root)
        self.verifier = verifier
        self.annotators = tuple(annotators)
        self.settings = settings or AnnotationSettings()
        self._lock = threading.Lock()
        self._readings: dict[str, FileReading] = {}
        self._shelf: AnnotationShelf | None = None
        self._stats = Counter[str]()

    @property
    def stats(self) -> BookStats:
        """The work done so far."""
        with self._lock:
            return BookStats(**self._stats)

    def current(self) -> AnnotationShelf:
        """The live annotations as the files hold them now (one look at each file's size
        and modification time; a file read only when they changed)."""
        with self._lock:
            changed = self._refresh()
            if changed or self._shelf is None:
                entries = [e for name in sorted(self._readings)
                           for e in self._readings[name].entries]  # fmt: skip
                self._shelf = AnnotationShelf(entries, self.settings)
                self._stats["rebuilds"] += 1
            return self._shelf

    def read(self) -> AnnotationRead:
        """Every verified annotation and the problems, as the files hold them now."""
        self.current()
        with self._lock:
            read = AnnotationRead()
            for name in sorted(self._readings):
                one = self._readings[name].read()
                read.annotations.extend(one.annotations)
                read.problems.extend(one.problems)
                read.more_problems += one.more_problems
                read.repeats.update(one.repeats)
            return read

    def live(self, episode_id: str) -> list[Annotation]:
        """The live annotations of one episode (not yet checked against its record)."""
        return self.current().live(episode_id)

    def _refresh(self) -> bool:
        paths = annotator_files(self.root, self.annotators)
        changed = False
        for gone in set(self._readings) - {p.name for p in paths}:
            del self._readings[gone]
            changed = True
        for path in paths:
            changed = self._refresh_file(path) or changed
        return changed

    def _refresh_file(self, path: Path) -> bool:
        """Read what is new in `path`; False when it is as last read."""
        reading = self._readings.get(path.name)
        try:
            st = path.stat()
            if reading is not None and reading.identity == _identity(st):
                return False
            f = path.open("rb")
        except OSError as e:
            log.warning("%s/%s: unreadable (%s)", ANNOTATIONS_DIR, path.name, e.strerror)
            return self._readings.pop(path.name, None) is not None
        with f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)  # never half of a line being appended
            now = os.fstat(f.fileno())
            if reading is None or not _goes_on(reading, f, now):
                reading = FileReading(where=f"{ANNOTATIONS_DIR}/{path.name}",
                                      annotator=path.name.removesuffix(".jsonl"))  # fmt: skip
                self._stats["files_read"] += 1
            else:
                self._stats["resumed"] += 1
            before = _counts(reading)
            reading.go_on(f, self.verifier, final=False)
            reading.identity = _identity(now)
        self._stats.update({k: v - before[k] for k, v in _counts(reading).items()})
        self._readings[path.name] = reading
        return True


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _goes_on(reading: FileReading, f: BinaryIO, now: os.stat_result) -> bool:
    """Whether `f` (its stat `now`) is the file `reading` read, grown by appends only: the
    same inode, no smaller than what was read, grown if its time changed, and the last bytes
    read still where they were."""
    if reading.identity is None:
        return False
    dev, ino, size, _ = reading.identity
    if (now.st_dev, now.st_ino) != (dev, ino) or now.st_size < reading.offset:
        return False
    if now.st_size == size:
        return False  # rewritten in place (its time changed, not its size)
    f.seek(reading.offset - len(reading.tail))
    return f.read(len(reading.tail)) == reading.tail


def _counts(reading: FileReading) -> dict[str, int]:
    return {"bytes_read": reading.bytes_read, "lines_read": reading.line,
            "signatures_checked": reading.verified, "repeats": reading.repeats,
            "oversized": reading.oversized}  # fmt: skip
