"""Reading annotations: every line of an annotator's file bounded, parsed and verified,
the problems reported with their file and line, never raised (see
:mod:`shopbench.archive.annotations`)."""

from __future__ import annotations

import fcntl
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.annotations.model import (
    ANNOTATIONS_DIR,
    MAX_LINE_BYTES,
    MAX_PROBLEMS_KEPT,
    Annotation,
    Entry,
    annotation_problem,
)
from shopbench.archive.signing import Verifier
from shopbench.errors import first_error

log = logging.getLogger(__name__)


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
            kind = first_error(e).kind
            self._problem(
                "not JSON"
                if kind == "json_invalid"
                else f"not an annotation ({annotation_problem(e)})"
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


def annotator_files(root: str | Path, annotators: Sequence[str]) -> list[Path]:
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
    for path in annotator_files(root, annotators):
        one = read_annotation_file(path, verifier, shown_as=f"{ANNOTATIONS_DIR}/{path.name}")
        read.annotations.extend(one.annotations)
        read.problems.extend(one.problems)
        read.more_problems += one.more_problems
        read.repeats.update(one.repeats)
    return read
