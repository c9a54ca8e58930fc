"""Annotations: a person's signed label and note on an episode, or on one turn of it.

An annotation is stored apart from the signed record — the shards, manifests and heads are
never touched — at ``<root>/_annotations/<annotator hotkey>.jsonl``, one JSON line per
annotation, appended and fsynced (:func:`append_annotation`); a line once written is never
rewritten, and a retraction is one more annotation (label ``retract``, ``retracts`` naming
the one it withdraws), never an edit. Each annotation carries the sha256 of the signing
payload of the exact record it was made on (:func:`record_digest`), so it is bound to those
bytes, and its annotator's signature over :meth:`Annotation.signing_bytes`.

:func:`read_annotations` reads every file and verifies every line with a
:class:`~shopbench.archive.signing.Verifier`; a line that is not JSON, not an annotation,
oversized, signed by another key than its file names or not signed at all is reported in
:attr:`AnnotationRead.problems` with its file and line number, never raised, as the
archive's reader reports the shards it drops. :meth:`AnnotationRead.live` is what readers
show: the verified annotations no later one of the same annotator retracts, bound to the
record in hand (:func:`bound`).

An annotation is its signed content: its id hashes every field but the signature, so a line
repeated, or the same content signed again, is one annotation, read once and shown once (the
repeats counted, not verified again). A reader shows at most
:attr:`AnnotationSettings.max_per_annotator` of one annotator on one episode, the earliest by
signed time, and says how many more it withholds (:meth:`AnnotationShelf.shown`). A
long-running reader holds an :class:`AnnotationBook`: each file read once, then only what is
appended, indexed by episode.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import logging
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shopbench.archive.durable import fsync_dir
from shopbench.archive.errors import AnnotationRefused
from shopbench.archive.signing import Signer, Verifier
from shopbench.chat import MAX_TURNS
from shopbench.errors import first_problem

if TYPE_CHECKING:
    from shopbench.records.trajectory import Trajectory

ANNOTATIONS_DIR = "_annotations"
"""The folder under an archive root that holds the annotations (a ``_`` folder: never a
shard, never listed by the archive's readers, never pulled or published)."""
ANNOTATION_DOMAIN = b"shopbench/annotation/v1\n"
"""Prefixed to every annotation's signed bytes, so an annotation's signature can never pass
for a record's or a manifest's."""
ANNOTATION_VERSION = 1
LABELS: tuple[str, ...] = (
    "good", "bad", "interesting", "reward-hack", "judge-wrong", "grader-wrong",
    "tool-misuse", "hallucination", "needs-review",
)  # fmt: skip
"""The suggested labels; any other short slug (:data:`LABEL_PATTERN`) is accepted too."""
RETRACT = "retract"
"""The label of a retraction: an annotation withdrawing an earlier one of its annotator."""
LABEL_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
MAX_LABEL_CHARS = 32
MAX_NOTE_CHARS = 1000
MAX_LINE_BYTES = 8192
"""A line longer than this is reported as oversized and not parsed."""
MAX_PER_ANNOTATOR = 20
"""By default, the most annotations of one annotator shown on one episode
(:class:`AnnotationSettings`)."""
MAX_PROBLEMS_KEPT = 1000
"""Problems kept per file; past them a reader only counts (a flood of bad lines costs no
memory)."""
EPISODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
HOTKEY_PATTERN = r"^[A-Za-z0-9]{1,64}$"
"""An annotator's hotkey (an ss58 address is base58); it names the annotator's file."""
ID_LENGTH = 24
_ID_PATTERN = rf"^[0-9a-f]{{{ID_LENGTH}}}$"
_SHA256 = r"^[0-9a-f]{64}$"
_BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))
log = logging.getLogger(__name__)


def _control_free(text: str, what: str, allowed: str = "") -> str:
    for ch in text:
        if ch in allowed:
            continue
        if unicodedata.category(ch) == "Cc" or ord(ch) in _BIDI:
            raise ValueError(f"{what} holds a control character U+{ord(ch):04X}")
    return text


class Annotation(BaseModel):
    """One person's label (and note) on an episode or one of its turns, signed by them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    annotation_version: int = Field(default=ANNOTATION_VERSION, ge=1, le=ANNOTATION_VERSION)
    episode_id: str = Field(pattern=EPISODE_PATTERN, description="the annotated episode")
    turn: int | None = Field(
        default=None, ge=1, le=MAX_TURNS,
        description="the assistant turn annotated (1 is the first), None for the episode",
    )  # fmt: skip
    label: str = Field(
        max_length=MAX_LABEL_CHARS,
        description=f"one of {', '.join(LABELS)}, another short slug, or {RETRACT}",
    )
    note: str = Field(default="", max_length=MAX_NOTE_CHARS, description="free text")
    annotator: str = Field(pattern=HOTKEY_PATTERN, description="the annotator's hotkey")
    created_at: datetime = Field(description="when it was made (UTC)")
    record_sha256: str = Field(
        pattern=_SHA256, description="sha256 of the annotated record's signing payload"
    )
    retracts: str | None = Field(
        default=None, pattern=_ID_PATTERN,
        description="for a retraction, the id of the annotation it withdraws",
    )  # fmt: skip
    signature: str = Field(default="", max_length=512, description="the annotator's, in hex")

    @field_validator("label")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not re.fullmatch(LABEL_PATTERN, value):
            raise ValueError(
                f"label {value[:40]!r} is not a short slug (lowercase letters, digits and "
                f"'-', starting with a letter, at most {MAX_LABEL_CHARS}); suggested: "
                f"{', '.join(LABELS)}"
            )
        return value

    @field_validator("note")
    @classmethod
    def _note(cls, value: str) -> str:
        return _control_free(value, "note", allowed="\n\t")

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("created_at needs a time zone")
        return value.astimezone(UTC)

    @model_validator(mode="after")
    def _retraction(self) -> Annotation:
        if (self.label == RETRACT) != (self.retracts is not None):
            raise ValueError(f"label {RETRACT} goes with retracts, and retracts with it")
        return self

    def signing_bytes(self) -> bytes:
        """What the annotator signs: :data:`ANNOTATION_DOMAIN`, then every field but the
        signature as JSON with sorted keys, no spaces, UTF-8."""
        data = self.model_dump(mode="json", exclude={"signature"})
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return ANNOTATION_DOMAIN + text.encode("utf-8")

    @property
    def id(self) -> str:
        """The annotation's id: the start of the sha256 of its signed bytes."""
        return hashlib.sha256(self.signing_bytes()).hexdigest()[:ID_LENGTH]

    def line(self) -> bytes:
        """The annotation as its one line of the annotator's file."""
        data = self.model_dump(mode="json")
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8") + b"\n"


def record_digest(t: Trajectory) -> str:
    """The sha256 (hex) of `t`'s signing payload: what an annotation is bound to."""
    return hashlib.sha256(t.signing_payload()).hexdigest()


def annotate(
    t: Trajectory, signer: Signer, *, label: str, note: str = "", turn: int | None = None,
    retracts: str | None = None, now: datetime | None = None,
) -> Annotation:  # fmt: skip
    """A signed annotation of record `t` (of its turn `turn`) by `signer`. AnnotationRefused
    says which field is wrong and why (a label that is no slug, a note too long or holding a
    control character, a turn the episode does not have)."""
    if turn is not None and not 1 <= turn <= t.turns:
        raise AnnotationRefused(f"turn {turn}: episode {t.episode_id} has turns 1 to {t.turns}")
    try:
        a = Annotation(
            episode_id=t.episode_id, turn=turn, label=label, note=note,
            annotator=signer.hotkey, created_at=now or datetime.now(UTC),
            record_sha256=record_digest(t), retracts=retracts,
        )  # fmt: skip
    except ValidationError as e:
        raise AnnotationRefused(_reason(e)) from None
    return a.model_copy(update={"signature": signer.sign(a.signing_bytes())})


def _reason(e: ValidationError) -> str:
    return first_problem(e, default="annotation")


def annotation_file(root: str | Path, annotator: str) -> Path:
    """The annotator's file under archive `root`."""
    if not re.fullmatch(HOTKEY_PATTERN, annotator):
        raise AnnotationRefused(f"annotator {annotator[:70]!r} is not a hotkey")
    return Path(root) / ANNOTATIONS_DIR / f"{annotator}.jsonl"


def append_annotation(root: str | Path, a: Annotation) -> Path:
    """Append `a` to its annotator's file under `root` durably (one write, fsync; the folder
    fsynced when the file is new), under an exclusive lock so two writers never interleave.
    Earlier lines are never rewritten: a torn last line a crash left is closed with a
    newline (and stays reported as unreadable). Returns the file."""
    path = annotation_file(root, a.annotator)
    data = a.line()
    if len(data) > MAX_LINE_BYTES:
        raise AnnotationRefused(f"the annotation is {len(data)} bytes, over {MAX_LINE_BYTES}")
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)
        fsync_dir(path.parent.parent)
    return path


class Problem(BaseModel):
    """A line of an annotation file that is not shown, and why."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


class AnnotationRead(BaseModel):
    """Every verified annotation under a root in file then line order (each once: a line
    repeating an annotation already read is counted in :attr:`repeats`, never kept again),
    and the problems (at most :data:`MAX_PROBLEMS_KEPT` a file, the rest counted in
    :attr:`more_problems`)."""

    annotations: list[Annotation] = []
    problems: list[Problem] = []
    more_problems: int = Field(default=0, description="problems past those kept")
    repeats: dict[str, int] = Field(
        default={}, description="file → lines repeating an annotation already read"
    )

    def retracted(self) -> set[str]:
        """Ids of the annotations a later retraction by the same annotator withdrew."""
        return retracted_ids([(a.id, a) for a in self.annotations])

    def live(self) -> list[Annotation]:
        """The annotations to show: verified, not retractions, not retracted."""
        return [a for _, a in live_entries([(a.id, a) for a in self.annotations])]

    def of(self, episode_id: str) -> list[Annotation]:
        """The live annotations of one episode."""
        return [a for a in self.live() if a.episode_id == episode_id]

    def by_episode(self) -> dict[str, list[Annotation]]:
        """The live annotations grouped by episode id."""
        out: dict[str, list[Annotation]] = {}
        for a in self.live():
            out.setdefault(a.episode_id, []).append(a)
        return out


Entry = tuple[str, Annotation]
"""An annotation with its id (computed once: :attr:`Annotation.id` hashes its bytes)."""


def retracted_ids(entries: Sequence[Entry]) -> set[str]:
    """Ids of the annotations among `entries` that a retraction by the same annotator
    (anywhere among them) withdraws."""
    by_id = dict(entries)
    out = set()
    for _, a in entries:
        target = by_id.get(a.retracts or "")
        if target is not None and target.annotator == a.annotator:
            out.add(a.retracts or "")
    return out


def live_entries(entries: Sequence[Entry]) -> list[Entry]:
    """The entries to show, in their order: not retractions, not retracted."""
    gone = retracted_ids(entries)
    return [(i, a) for i, a in entries if a.retracts is None and i not in gone]


@dataclass
class FileReading:
    """How far one annotator's file has been read, and what its lines held so far: a
    reader goes on from :attr:`offset` when the file grows (files are append-only), and
    reads it again from the start when the bytes before that offset are not the ones it
    read (the file replaced, truncated or rewritten)."""

    where: str
    """The file as problems name it."""
    annotator: str
    """The hotkey its name gives: every line must be signed by it."""
    offset: int = 0
    """Bytes read: every line read ends there."""
    line: int = 0
    tail: bytes = b""
    """The last bytes read, compared before going on to notice a rewrite."""
    identity: tuple[int, int, int, int] | None = None
    """(device, inode, size, mtime in ns) when last read."""
    entries: list[Entry] = field(default_factory=list)
    first_line: dict[str, int] = field(default_factory=dict)
    """Id → the line that annotation was read from (a later line with its id: a repeat)."""
    seen_lines: set[bytes] = field(default_factory=set)
    """sha256 of each line kept, so that the same bytes again are a repeat unparsed."""
    problems: list[Problem] = field(default_factory=list)
    more_problems: int = 0
    repeats: int = 0
    """Lines repeating an annotation already read, not kept again."""
    oversized: int = 0
    """Lines over :data:`MAX_LINE_BYTES` skipped unparsed."""
    verified: int = 0
    """Signatures checked."""
    bytes_read: int = 0

    def go_on(self, f: BinaryIO, verifier: Verifier, *, final: bool) -> None:
        """Read the complete lines of `f` past :attr:`offset`. A last line with no end of
        line yet is left for the next read unless `final` (then it is read as it is)."""
        f.seek(self.offset)
        oversized_before = self.oversized
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw or (not final and not raw.endswith(b"\n") and len(raw) <= MAX_LINE_BYTES):
                break
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                end = _skip_rest(f)
                if end is None and not final:
                    break  # an oversized line still being written: counted once it ends
                self._consumed(f, end or raw)
                self.oversized += 1
                self._problem(f"over {MAX_LINE_BYTES} bytes")
                continue
            self._consumed(f, raw)
            if raw.strip():
                self._take(raw, verifier)
        if self.oversized > oversized_before:
            log.warning("%s: %d lines over %d bytes skipped unread (the latest at line %d)",
                        self.where, self.oversized - oversized_before, MAX_LINE_BYTES,
                        self.line)  # fmt: skip

    def _consumed(self, f: BinaryIO, raw: bytes) -> None:
        now = f.tell()
        self.bytes_read += now - self.offset
        self.offset, self.line = now, self.line + 1
        self.tail = raw[-_TAIL_BYTES:]

    def _problem(self, reason: str) -> None:
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(Problem(file=self.where, line=self.line, reason=reason))
        else:
            self.more_problems += 1

    def _take(self, raw: bytes, verifier: Verifier) -> None:
        digest = hashlib.sha256(raw.strip()).digest()
        if digest in self.seen_lines:  # the very bytes of a kept line: not parsed again
            self.repeats += 1
            return
        try:
            a = Annotation.model_validate_json(raw)
        except ValidationError as e:
            kind = e.errors()[0]["type"]
            self._problem(
                "not JSON" if kind == "json_invalid" else f"not an annotation ({_reason(e)})"
            )
            return
        if a.annotator != self.annotator:
            self._problem(f"signed as {a.annotator}, in the file of {self.annotator}")
            return
        aid = a.id
        if aid in self.first_line:  # the same signed content: shown once, not checked again
            self.repeats += 1
            return
        self.verified += 1
        if not a.signature or not verifier.verify(a.signing_bytes(), a.signature, a.annotator):
            self._problem(f"signature does not verify by {a.annotator}")
            return
        self.first_line[aid] = self.line
        self.seen_lines.add(digest)
        self.entries.append((aid, a))

    def read(self) -> AnnotationRead:
        """What this file held, as an :class:`AnnotationRead`."""
        return AnnotationRead(
            annotations=[a for _, a in self.entries], problems=list(self.problems),
            more_problems=self.more_problems,
            repeats={self.where: self.repeats} if self.repeats else {},
        )  # fmt: skip


_TAIL_BYTES = 64


def _skip_rest(f: BinaryIO) -> bytes | None:
    """Read past the rest of an oversized line, unparsed; its last chunk, or None when the
    file ended first."""
    while True:
        chunk = f.readline(MAX_LINE_BYTES + 1)
        if not chunk:
            return None
        if chunk.endswith(b"\n"):
            return chunk


def read_annotation_file(
    path: Path, verifier: Verifier, *, shown_as: str | None = None
) -> AnnotationRead:
    """Every line of one annotator's file, verified (see the module doc)."""
    reading = FileReading(where=shown_as or path.name, annotator=path.name.removesuffix(".jsonl"))
    try:
        f = path.open("rb")
    except OSError as e:
        return AnnotationRead(
            problems=[Problem(file=reading.where, line=0, reason=f"unreadable ({e.strerror})")]
        )
    with f:
        fcntl.flock(f.fileno(), fcntl.LOCK_SH)  # never half of a line being appended
        reading.go_on(f, verifier, final=True)
    return reading.read()


def _files(root: str | Path, annotators: Sequence[str]) -> list[Path]:
    """The annotators' files under `root` in name order (only `annotators`' when given)."""
    folder = Path(root) / ANNOTATIONS_DIR
    if not folder.is_dir():
        return []
    paths = sorted(folder.glob("*.jsonl"))
    return [p for p in paths if not annotators or p.name.removesuffix(".jsonl") in annotators]


def read_annotations(
    root: str | Path, verifier: Verifier, *, annotators: Sequence[str] = ()
) -> AnnotationRead:
    """Every annotation under archive `root` (only `annotators`' files when given), each
    line verified; the problems reported, never raised. No folder: nothing."""
    read = AnnotationRead()
    for path in _files(root, annotators):
        one = read_annotation_file(path, verifier, shown_as=f"{ANNOTATIONS_DIR}/{path.name}")
        read.annotations.extend(one.annotations)
        read.problems.extend(one.problems)
        read.more_problems += one.more_problems
        read.repeats.update(one.repeats)
    return read


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


def write_annotations(path: Path, annotations: Sequence[Annotation]) -> Path:
    """`annotations` as JSON lines at `path` (each line re-verifiable as in the archive)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        for a in annotations:
            f.write(a.line())
    return path


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
        paths = _files(self.root, self.annotators)
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
