"""What a pull reads from its source (a bucket, a folder, another instance's mirror):
which shards to take, how much to read, and the bounded, typed reads themselves."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.errors import RemoteError, SinkError
from shopbench.archive.manifest import ShardManifest
from shopbench.archive.paths import first_link, partition_of_path, shown
from shopbench.archive.store import EmbargoState

T = TypeVar("T")


class PullLimits(BaseModel):
    """How much a pull reads from a source and keeps of what fails."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    manifest_bytes: int = Field(default=64 << 10, ge=1024, description="largest manifest read")
    quarantine_bytes: int = Field(
        default=256 << 20, ge=0,
        description="most bytes of refused shards kept under _quarantine/ (past it, reasons only)",
    )  # fmt: skip


class PullFilters(BaseModel):
    """Which of a validator's shards to fetch (every condition must hold)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    since_block: int | None = Field(
        default=None, ge=0, description="only shards with an episode at or after this block"
    )
    intents: tuple[str, ...] = Field(default=(), description="only these intents (all if none)")
    dates: tuple[date, ...] = Field(default=(), description="only these UTC dates (all if none)")

    def wants(self, manifest: ShardManifest) -> bool:
        """Whether `manifest`'s shard passes every filter."""
        if self.since_block is not None and (
            manifest.block_max is None or manifest.block_max < self.since_block
        ):
            return False
        return self.wants_path(manifest.path)

    def wants_path(self, path: str) -> bool:
        """Whether a shard at `path` can pass the filters its partition decides."""
        parts = partition_of_path(path)
        if self.intents and parts.get("intent") not in self.intents:
            return False
        return not self.dates or parts.get("date") in {d.isoformat() for d in self.dates}


def remote_call(what: str, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, with whatever the source's driver raises (botocore, aiohttp, OSError) as one
    :class:`RemoteError` naming `what`; a pull stopped so resumes from its partial files."""
    try:
        return call(*args)
    except SinkError:
        raise
    except Exception as e:
        raise RemoteError(f"cannot {what}: {type(e).__name__}: {e}") from e


def read_bounded(fs: Any, path: str, limit: int) -> bytes:
    """At most `limit` bytes of `path`; SinkError when it holds more."""
    with fs.open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SinkError(f"{shown(path)}: more than {limit} bytes")
    return bytes(data)


def read_embargo(fs: Any, path: str) -> EmbargoState:
    """The embargo state at `path` of a source, the default when there is none."""
    if not fs.exists(path):
        return EmbargoState()
    try:
        return EmbargoState.model_validate_json(read_bounded(fs, path, 4096))
    except ValidationError as e:
        raise SinkError(f"{path}: unreadable embargo state ({e})") from None


def is_local(fs: Any) -> bool:
    """Whether `fs` is the machine's own filesystem (a source given as a folder)."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return "file" in protocols or "local" in protocols


def local_find(base: str, rel: str) -> tuple[list[str], list[str]]:
    """The files under ``base/rel`` of a local source and the symbolic links met there
    (files or folders, `rel`'s own parts included), never descending through a link."""
    link = first_link(Path(base), rel)
    if link is not None:
        return [], [str(link)]
    files: list[str] = []
    links: list[str] = []
    for folder, dirs, names in os.walk(f"{base}/{rel}"):  # followlinks=False: never descends
        for name in (*dirs, *names):
            path = f"{folder}/{name}"
            if os.path.islink(path):
                links.append(path)
            elif name in names:
                files.append(path)
    return files, links
