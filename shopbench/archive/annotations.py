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
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shopbench.archive.durable import fsync_dir
from shopbench.archive.errors import AnnotationRefused
from shopbench.archive.signing import Signer, Verifier
from shopbench.chat import MAX_TURNS

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
EPISODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
HOTKEY_PATTERN = r"^[A-Za-z0-9]{1,64}$"
"""An annotator's hotkey (an ss58 address is base58); it names the annotator's file."""
ID_LENGTH = 24
_ID_PATTERN = rf"^[0-9a-f]{{{ID_LENGTH}}}$"
_SHA256 = r"^[0-9a-f]{64}$"
_BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


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
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "annotation"
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


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
    """Every verified annotation under a root in file then line order, and the problems."""

    annotations: list[Annotation] = []
    problems: list[Problem] = []

    def retracted(self) -> set[str]:
        """Ids of the annotations a later retraction by the same annotator withdrew."""
        by_id = {a.id: a for a in self.annotations}
        out = set()
        for a in self.annotations:
            target = by_id.get(a.retracts or "")
            if target is not None and target.annotator == a.annotator:
                out.add(target.id)
        return out

    def live(self) -> list[Annotation]:
        """The annotations to show: verified, not retractions, not retracted."""
        gone = self.retracted()
        return [a for a in self.annotations if a.retracts is None and a.id not in gone]

    def of(self, episode_id: str) -> list[Annotation]:
        """The live annotations of one episode."""
        return [a for a in self.live() if a.episode_id == episode_id]

    def by_episode(self) -> dict[str, list[Annotation]]:
        """The live annotations grouped by episode id."""
        out: dict[str, list[Annotation]] = {}
        for a in self.live():
            out.setdefault(a.episode_id, []).append(a)
        return out


def read_annotation_file(
    path: Path, verifier: Verifier, *, shown_as: str | None = None
) -> AnnotationRead:
    """Every line of one annotator's file, verified (see the module doc)."""
    where = shown_as or path.name
    annotator = path.name.removesuffix(".jsonl")
    read = AnnotationRead()
    try:
        f = path.open("rb")
    except OSError as e:
        read.problems.append(Problem(file=where, line=0, reason=f"unreadable ({e.strerror})"))
        return read
    with f:
        fcntl.flock(f.fileno(), fcntl.LOCK_SH)  # never half of a line being appended
        number = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # skip the rest of the line
                    raw = f.readline(MAX_LINE_BYTES + 1)
                read.problems.append(
                    Problem(file=where, line=number, reason=f"over {MAX_LINE_BYTES} bytes")
                )
                continue
            if not raw.strip():
                continue
            problem, a = _line(raw, annotator, verifier)
            if a is not None:
                read.annotations.append(a)
            else:
                read.problems.append(Problem(file=where, line=number, reason=problem))
    return read


def _line(raw: bytes, annotator: str, verifier: Verifier) -> tuple[str, Annotation | None]:
    try:
        a = Annotation.model_validate_json(raw)
    except ValidationError as e:
        kind = e.errors()[0]["type"]
        return ("not JSON" if kind == "json_invalid" else f"not an annotation ({_reason(e)})"), None
    if a.annotator != annotator:
        return f"signed as {a.annotator}, in the file of {annotator}", None
    if not a.signature or not verifier.verify(a.signing_bytes(), a.signature, a.annotator):
        return f"signature does not verify by {a.annotator}", None
    return "", a


def read_annotations(
    root: str | Path, verifier: Verifier, *, annotators: Sequence[str] = ()
) -> AnnotationRead:
    """Every annotation under archive `root` (only `annotators`' files when given), each
    line verified; the problems reported, never raised. No folder: nothing."""
    folder = Path(root) / ANNOTATIONS_DIR
    read = AnnotationRead()
    if not folder.is_dir():
        return read
    for path in sorted(folder.glob("*.jsonl")):
        if annotators and path.name.removesuffix(".jsonl") not in annotators:
            continue
        one = read_annotation_file(path, verifier, shown_as=f"{ANNOTATIONS_DIR}/{path.name}")
        read.annotations.extend(one.annotations)
        read.problems.extend(one.problems)
    return read


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


class AnnotationBook:
    """The annotations under one archive root as a long-running reader (the trace service)
    holds them: read and verified again only when a file's size or modification time
    changes (thread-safe)."""

    def __init__(
        self, root: str | Path, verifier: Verifier, *, annotators: Sequence[str] = ()
    ) -> None:
        import threading

        self.root = Path(root)
        self.verifier = verifier
        self.annotators = tuple(annotators)
        self._lock = threading.Lock()
        self._stamp: tuple[tuple[str, int, int], ...] | None = None
        self._read = AnnotationRead()
        self._grouped: dict[str, list[Annotation]] = {}

    def _stamps(self) -> tuple[tuple[str, int, int], ...]:
        folder = self.root / ANNOTATIONS_DIR
        out = []
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else ():
            try:
                st = path.stat()
            except OSError:
                continue
            out.append((path.name, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def read(self) -> AnnotationRead:
        """Every verified annotation and the problems, as the files hold them now."""
        stamp = self._stamps()
        with self._lock:
            if stamp != self._stamp:
                self._read = read_annotations(self.root, self.verifier,
                                              annotators=self.annotators)  # fmt: skip
                self._grouped = self._read.by_episode()
                self._stamp = stamp
            return self._read

    def live(self, episode_id: str) -> list[Annotation]:
        """The live annotations of one episode (not yet checked against its record)."""
        self.read()
        return list(self._grouped.get(episode_id, ()))
