"""Writing annotations: the annotator's file, appended durably under a lock, and a set of
annotations written out as JSON lines (see :mod:`shopbench.archive.annotations`)."""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Sequence
from pathlib import Path

from shopbench.archive.annotations.model import (
    ANNOTATIONS_DIR,
    HOTKEY_PATTERN,
    MAX_LINE_BYTES,
    Annotation,
)
from shopbench.archive.durable import fsync_dir
from shopbench.archive.errors import AnnotationRefused


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


def write_annotations(path: Path, annotations: Sequence[Annotation]) -> Path:
    """`annotations` as JSON lines at `path` (each line re-verifiable as in the archive)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        for a in annotations:
            f.write(a.line())
    return path
