"""Immutable Parquet shards and their manifests on a local disk.

:func:`write_shard` seals one partition's trajectories into
``<root>/validator=<hotkey>/date=<YYYY-MM-DD>/intent=<intent>/part-<id>.parquet`` (zstd)
and then its signed manifest at ``<root>/_manifests/<that path>.json``; each file is written
under a temporary name, fsynced and renamed into place, and its directory fsynced, so a
crash leaves either no file or the whole file — and never a manifest whose shard is
missing. :func:`verify_shard` is the one check of a shard against its manifest (size,
sha256, rows, and a footer that does not promise a decompression bomb); everyone who trusts a
shard calls it.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import shopbench
from shopbench.archive.bounds import footer_problem
from shopbench.archive.durable import fsync_dir
from shopbench.archive.errors import SinkError
from shopbench.archive.layout import (
    LAYOUT_VERSION,
    SCHEMA,
    Partition,
    from_table,
    partition_of,
    to_table,
)
from shopbench.archive.manifest import (
    MANIFESTS_DIR,
    ShardManifest,
    manifest_path,
    read_manifest,
    sha256_file,
    sign_manifest,
)
from shopbench.archive.signing import Signer
from shopbench.records.trajectory import SCHEMA_VERSION, Trajectory

SHARD_SUFFIX = ".parquet"
TEMP_SUFFIX = ".tmp"
"""Files being written carry this suffix until they are renamed into place."""

COMPRESSION = "zstd"
COMPRESSION_LEVEL = 6
ROW_GROUP_ROWS = 8192
_SHARD_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def new_shard_id() -> str:
    """A fresh shard id that sorts by creation time: milliseconds, then 8 random hex."""
    return f"{time.time_ns() // 1_000_000:013d}-{secrets.token_hex(4)}"


def write_durably(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically and durably: a temporary name in the same folder,
    fsync, rename, fsync the folder. An existing `path` is an error (files are immutable).
    OSError passes through to the caller."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    try:
        with tmp.open("xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def _encode(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(
        table, buf, compression=COMPRESSION, compression_level=COMPRESSION_LEVEL,
        row_group_size=ROW_GROUP_ROWS,
    )  # fmt: skip
    return buf.getvalue()


def _widen(span: tuple[Any, Any], values: Iterable[Any]) -> tuple[Any, Any]:
    known = [v for v in values if v is not None]
    if not known:
        return span
    low, high = min(known), max(known)
    return (low if span[0] is None else min(span[0], low),
            high if span[1] is None else max(span[1], high))  # fmt: skip


class ShardBuilder:
    """One partition's shard, gathered a batch at a time: each batch becomes Arrow columns
    at once, so its models can go (the store rolls a segment's records in small batches, and
    tens of thousands of live models would make the garbage collector the roll's cost)."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.rows = 0
        self._tables: list[pa.Table] = []
        self._blocks: tuple[int | None, int | None] = (None, None)
        self._epochs: tuple[int | None, int | None] = (None, None)
        self._starts: tuple[float | None, float | None] = (None, None)

    def add(self, trajectories: Sequence[Trajectory]) -> None:
        """Append `trajectories` (all of this builder's partition; SinkError otherwise)."""
        strays = sorted(
            {p.path() for t in trajectories if (p := partition_of(t)) != self.partition}
        )
        if strays:
            names = ", ".join([self.partition.path(), *strays])
            raise SinkError(f"a shard holds one partition; these rows span {names}")
        if not trajectories:
            return
        self._tables.append(to_table(trajectories))
        self.rows += len(trajectories)
        self._blocks = _widen(self._blocks, (t.block for t in trajectories))
        self._epochs = _widen(self._epochs, (t.epoch for t in trajectories))
        self._starts = _widen(self._starts, (t.timings.started_at for t in trajectories))

    def write(
        self, root: str | Path, *, signer: Signer, shard_id: str | None = None
    ) -> ShardManifest:
        """Seal what was added into a new shard under `root`, then its manifest signed by
        `signer`; the manifest once both are durable (see :func:`write_shard`)."""
        if not self.rows:
            raise SinkError("a shard needs at least one trajectory")
        if shard_id is not None and not _SHARD_ID.fullmatch(shard_id):
            raise SinkError(f"shard id {shard_id!r}: use letters, digits, '-' and '_' only")
        base = Path(root)
        part = self.partition
        rel = f"{part.path()}/part-{shard_id or new_shard_id()}{SHARD_SUFFIX}"
        data = _encode(pa.concat_tables(self._tables))
        unsigned: dict[str, object] = {
            "path": rel,
            "rows": self.rows,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "validator": part.validator,
            "date": part.date,
            "intent": part.intent,
            "block_min": self._blocks[0],
            "block_max": self._blocks[1],
            "epoch_min": self._epochs[0],
            "epoch_max": self._epochs[1],
            "started_min": self._starts[0],
            "started_max": self._starts[1],
            "schema_version": SCHEMA_VERSION,
            "layout_version": LAYOUT_VERSION,
            "generator": f"shopbench {shopbench.__version__}",
            "created_at": time.time(),
        }
        manifest = sign_manifest(unsigned, signer)
        try:
            write_durably(base / rel, data)
            write_durably(base / manifest.manifest_path(), manifest.to_bytes())
        except OSError as e:
            raise SinkError(f"{base / rel}: cannot write the shard ({e.strerror or e})") from None
        return manifest


def write_shard(
    trajectories: Sequence[Trajectory],
    root: str | Path,
    *,
    signer: Signer,
    shard_id: str | None = None,
) -> ShardManifest:
    """Seal `trajectories` (one partition: same validator, date and intent — see
    :func:`~shopbench.archive.layout.partition_of`) into a new shard under `root`, then
    write its manifest signed by `signer`; returns the manifest once both are durable.

    SinkError for an empty batch, rows of several partitions, or a disk that refuses the
    write (nothing is left under a final name then, only possibly the shard without its
    manifest, which readers ignore and the store quarantines).
    """
    if not trajectories:
        raise SinkError("a shard needs at least one trajectory")
    builder = ShardBuilder(partition_of(trajectories[0]))
    builder.add(trajectories)
    return builder.write(root, signer=signer, shard_id=shard_id)


def read_shard(path: str | Path) -> list[Trajectory]:
    """The trajectories of the shard file at `path`, in order; SinkError when it is not a
    readable archive shard."""
    p = Path(path)
    try:
        problem = footer_problem(p, p.stat().st_size)
    except OSError as e:
        raise SinkError(f"{p}: not a readable shard ({e.strerror or e})") from None
    if problem is not None:
        raise SinkError(f"{p}: {problem}")
    try:
        table = pq.read_table(p, schema=SCHEMA, partitioning=None)
    except (OSError, pa.ArrowException) as e:
        raise SinkError(f"{p}: not a readable shard ({e})") from None
    try:
        return from_table(table)
    except SinkError as e:
        raise SinkError(f"{p}: {e}") from None


def verify_shard(root: str | Path, manifest: ShardManifest) -> str | None:
    """None when the shard `manifest` describes is present under `root` with the size,
    sha256 and row count the manifest states; otherwise the reason it is not."""
    return verify_shard_file(Path(root) / manifest.path, manifest)


def verify_shard_file(path: str | Path, manifest: ShardManifest) -> str | None:
    """None when the file at `path` is the shard `manifest` describes (size, sha256, rows)
    and would not inflate out of proportion when read
    (:func:`~shopbench.archive.bounds.footer_problem`); otherwise the reason it is not (a download is checked this way before it takes the
    shard's place)."""
    path = Path(path)
    try:
        digest, size = sha256_file(path)
    except FileNotFoundError:
        return f"{manifest.path}: missing"
    except OSError as e:
        return f"{manifest.path}: unreadable ({e.strerror or e})"
    if size != manifest.bytes:
        return f"{manifest.path}: {size} bytes, the manifest says {manifest.bytes}"
    if digest != manifest.sha256:
        return f"{manifest.path}: sha256 {digest} differs from the manifest's {manifest.sha256}"
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except (OSError, pa.ArrowException) as e:
        return f"{manifest.path}: not a Parquet file ({e})"
    if rows != manifest.rows:
        return f"{manifest.path}: {rows} rows, the manifest says {manifest.rows}"
    problem = footer_problem(path, size)
    return None if problem is None else f"{manifest.path}: {problem}"


def iter_manifests(root: str | Path) -> Iterator[tuple[Path, ShardManifest | SinkError]]:
    """Every manifest file under ``root/_manifests``, sorted by path, with the parsed
    manifest or the SinkError that says why it does not parse (callers decide)."""
    base = Path(root) / MANIFESTS_DIR
    for p in sorted(base.rglob(f"*{SHARD_SUFFIX}.json")):
        try:
            yield p, read_manifest(p)
        except SinkError as e:
            yield p, e


def shard_files(root: str | Path) -> list[str]:
    """The relative paths of every sealed shard file under `root` (temporary files, the
    manifests and anything under a folder starting with ``_`` or ``.`` left out)."""
    base = Path(root)
    out: list[str] = []
    for p in base.rglob(f"*{SHARD_SUFFIX}"):
        rel = p.relative_to(base)
        if any(part.startswith(("_", ".")) for part in rel.parts):
            continue
        out.append(rel.as_posix())
    return sorted(out)


def manifest_file(root: str | Path, shard_path: str) -> Path:
    """Where the manifest of the shard at relative `shard_path` lives under `root`."""
    return Path(root) / manifest_path(shard_path)
