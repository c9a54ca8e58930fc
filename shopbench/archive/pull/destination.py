"""``OUT``, where a pull writes: every path examined for links first, downloads resumed
from their partial files and cut at the signed size, and the quarantine of what was
refused."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path, PurePosixPath
from typing import IO, Any

from shopbench.archive.durable import fsync_dir
from shopbench.archive.errors import LinkRefused, SinkError
from shopbench.archive.manifest import manifest_path
from shopbench.archive.paths import first_link, inside, shown
from shopbench.archive.store import QUARANTINE_DIR

PARTIAL_SUFFIX = ".partial"
"""An interrupted download's bytes so far, at ``OUT/<shard path>.partial``."""

CHUNK_BYTES = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class Destination:
    """``OUT``: every path a pull reads or writes there, each part examined with ``lstat``
    first and files opened ``O_NOFOLLOW``, so a symbolic link planted in it is refused,
    never followed. Paths are given relative to ``OUT`` (checked archive paths, or built
    from them)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def refuse(self, link: Path | str) -> LinkRefused:
        """The error naming a link met at `link`."""
        return LinkRefused(
            f"{shown(str(link), 4096)}: a symbolic link inside the pull's destination "
            f"{shown(str(self.root), 4096)}; refused, never followed (remove it, or pull into "
            "another folder)"
        )

    def path(self, rel: str) -> Path:
        """``OUT/rel`` once no part of it below ``OUT`` is a symbolic link and it stays
        under ``OUT``; LinkRefused names the link."""
        link = first_link(self.root, rel)
        if link is not None:
            raise self.refuse(link)
        return inside(self.root, rel)

    def size(self, rel: str) -> int | None:
        """The size of the plain file at `rel`, None when there is none."""
        try:
            return os.lstat(self.path(rel)).st_size
        except FileNotFoundError:
            return None

    def folder(self, rel: str) -> Path:
        """The folder ``OUT/rel``, each missing part made as a real folder; LinkRefused when
        a part is a link (or becomes one on the way), SinkError when it is a file."""
        self.root.mkdir(parents=True, exist_ok=True)
        here = self.root
        for part in PurePosixPath(rel).parts:
            here = here / part
            with contextlib.suppress(FileExistsError):
                os.mkdir(here)
            mode = os.lstat(here).st_mode
            if stat.S_ISLNK(mode):
                raise self.refuse(here)
            if not stat.S_ISDIR(mode):
                raise SinkError(f"{shown(str(here))}: not a folder, where the pull keeps files")
        return here

    def _open(self, rel: str, flags: int) -> int:
        """A descriptor of ``OUT/rel`` opened with `flags` and ``O_NOFOLLOW``, its folder made
        first; a link there (met before, or raced in) is LinkRefused."""
        self.folder(str(PurePosixPath(rel).parent))
        path = self.path(rel)
        try:
            return os.open(path, flags | _NOFOLLOW, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP or (
                e.errno == errno.EEXIST and stat.S_ISLNK(os.lstat(path).st_mode)
            ):
                raise self.refuse(path) from None
            raise

    def appender(self, rel: str) -> IO[bytes]:
        """``OUT/rel`` opened to append (created when missing), never through a link."""
        return os.fdopen(self._open(rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")

    def write(self, rel: str, data: bytes) -> Path:
        """Replace the file at `rel` with `data`, atomically and durably: a temporary file
        beside it made new (``O_CREAT | O_EXCL | O_NOFOLLOW``), synced and renamed over it.
        A link at the file, at the temporary name or on the way is LinkRefused."""
        final = self.path(rel)
        where = PurePosixPath(rel)
        tmp = str(where.with_name(f".{where.name}.tmp"))
        self.unlink(tmp)  # what an interrupted write left (a link there is refused)
        with os.fdopen(self._open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(self.path(tmp), final)
        fsync_dir(final.parent)
        return final

    def move(self, src: str, dst: str) -> None:
        """Rename the file at `src` to `dst` (both under ``OUT``, neither a link)."""
        source = self.path(src)
        self.folder(str(PurePosixPath(dst).parent))
        os.replace(source, self.path(dst))

    def unlink(self, rel: str) -> None:
        """Remove the file at `rel` if there is one (a link there is refused, not removed)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(rel))


def download(
    fs: Any, remote: str, dest: Destination, partial: str, size: int, chunk_bytes: int
) -> tuple[bool, bool]:
    """Fetch `remote` into ``OUT/partial``, continuing what is there, never past `size` bytes
    (the signed size). Returns (an earlier partial was continued, the source had more bytes).
    A server without range requests is read as a stream from the start."""
    offset = dest.size(partial) or 0
    if offset > size:  # not a prefix of this shard: start again
        dest.unlink(partial)
        offset = 0
    try:
        return _copy(fs, remote, dest, partial, size, offset, chunk_bytes)
    except ValueError:  # fsspec's HTTP file without range requests: stream it whole
        dest.unlink(partial)
        return _copy(fs, remote, dest, partial, size, 0, 0)


def _copy(
    fs: Any, remote: str, dest: Destination, partial: str, size: int, offset: int,
    block_size: int,
) -> tuple[bool, bool]:  # fmt: skip
    chunk = block_size or CHUNK_BYTES
    with fs.open(remote, "rb", block_size=block_size) as src:
        if offset:
            src.seek(offset)
        with dest.appender(partial) as dst:
            left = size - offset
            while left > 0 and (data := src.read(min(chunk, left))):
                dst.write(data)
                left -= len(data)
            dst.flush()
            os.fsync(dst.fileno())
        more = left == 0 and bool(src.read(1))
    return offset > 0, more


class Quarantine:
    """``OUT/_quarantine/``: what a pull refused, each beside a reason file, bytes capped."""

    def __init__(self, dest: Destination, limit: int) -> None:
        self.dest = dest
        self.limit = limit
        root = dest.path(QUARANTINE_DIR)
        self.used = sum(
            p.lstat().st_size for p in root.rglob("*") if stat.S_ISREG(p.lstat().st_mode)
        ) if root.is_dir() else 0  # fmt: skip

    def put(self, rel: str, reason: str, manifest: bytes | None, partial: str | None) -> str:
        """Keep what was fetched now of the shard at `rel` (a checked shard path): the partial
        download at ``OUT/partial`` and the manifest's bytes, within the cap; the reason as
        recorded. The shard already held is never touched."""
        kept: list[str] = []
        size = self.dest.size(partial) if partial is not None else None
        if partial is not None and size is not None:
            target = f"{QUARANTINE_DIR}/{rel}"
            if self.used + size <= self.limit:
                self.dest.move(partial, target)
                self.used += size
                kept.append(target)
            else:
                self.dest.unlink(partial)
                reason += " (its bytes are not kept: the quarantine is full)"
        if manifest is not None:
            target = f"{QUARANTINE_DIR}/{manifest_path(rel)}"
            self.dest.write(target, manifest)
            self.used += len(manifest)
            kept.append(target)
        if not kept:
            kept.append(f"{QUARANTINE_DIR}/{rel}")
        note = f"{rel}: {reason}\n".encode()
        for target in kept:
            self.dest.write(f"{target}.reason.txt", note)
        return reason
