"""Pulling one validator's published shards, verified, into a local folder.

:func:`pull` lists the manifests a source (a bucket or a folder laid out as
:mod:`shopbench.archive.remote` publishes) holds for one validator, checks each manifest's
signature against that validator's hotkey and each shard's bytes against the sha256 the
signature covers, and keeps only what passes. What fails goes under ``OUT/_quarantine/``
with a reason file, and is reported: nothing that fails is ever kept silently. A download
goes to ``<shard>.partial`` first and resumes from there when interrupted; a shard already
held and verified is skipped. The output is an archive root that DuckDB
(``read_parquet('OUT/validator=*/**/*.parquet', hive_partitioning=true)``) and Hugging Face
``datasets`` (``load_dataset("parquet", data_dir=OUT)``) read directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.durable import replace_durably
from shopbench.archive.manifest import (
    MANIFESTS_DIR,
    ShardManifest,
    manifest_path,
    parse_manifest,
    verify_manifest,
)
from shopbench.archive.remote import RemoteTarget
from shopbench.archive.shards import SHARD_SUFFIX, verify_shard
from shopbench.archive.signing import Verifier
from shopbench.archive.sink import RemoteError, SinkError
from shopbench.archive.store import EMBARGO_FILE, QUARANTINE_DIR, EmbargoState

PARTIAL_SUFFIX = ".partial"
"""An interrupted download's bytes so far, at ``OUT/<shard path>.partial``."""

_CHUNK_BYTES = 1 << 20
T = TypeVar("T")


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
        if self.intents and manifest.intent not in self.intents:
            return False
        return not self.dates or manifest.date in {d.isoformat() for d in self.dates}


class PullReport(BaseModel):
    """What one pull did; ``quarantined`` maps a shard path to why it was refused."""

    fetched: list[str] = Field(default_factory=list, description="shards downloaded now")
    resumed: list[str] = Field(default_factory=list, description="of those, continued partials")
    held: list[str] = Field(default_factory=list, description="already here and verified")
    filtered: int = Field(default=0, description="shards the filters left out")
    embargoed: int = Field(default=0, description="shards of a live bucket, left at the source")
    rows: int = Field(default=0, description="episodes in the fetched and held shards")
    quarantined: dict[str, str] = Field(default_factory=dict)


def _check_manifest(
    manifest: ShardManifest, rel: str, validator: str, verifier: Verifier
) -> str | None:
    """Why `manifest`, published for the shard at `rel`, may not be trusted as `validator`'s,
    or None. The path checks come first: a signed manifest must not be replayed elsewhere,
    nor name a file outside the partition tree."""
    parts = PurePosixPath(manifest.path).parts
    expected = f"validator={manifest.validator}/date={manifest.date}/intent={manifest.intent}"
    if (
        manifest.path != rel
        or ".." in parts
        or len(parts) != 4
        or "/".join(parts[:3]) != expected
        or not manifest.path.endswith(SHARD_SUFFIX)
    ):
        return f"manifest names shard {manifest.path!r} but is published for {rel!r}"
    if manifest.validator != validator:
        return f"shard {rel!r} is not in validator {validator}'s partition"
    if not verify_manifest(manifest, verifier, validator):
        return f"manifest signature is not {validator}'s"
    return None


def _quarantine(out: Path, rel: str, reason: str, manifest_bytes: bytes | None) -> None:
    """Move whatever was fetched of `rel` under ``_quarantine/`` (the store's layout: the
    shard at its path, the manifest under ``_manifests/``, each beside a ``.reason.txt``)."""
    shard = out / QUARANTINE_DIR / rel
    shard.parent.mkdir(parents=True, exist_ok=True)
    kept = [shard]
    for src in (out / rel, out / f"{rel}{PARTIAL_SUFFIX}"):
        if src.exists():
            os.replace(src, shard)
    if manifest_bytes is not None:
        manifest = out / QUARANTINE_DIR / manifest_path(rel)
        replace_durably(manifest, manifest_bytes)
        kept.append(manifest)
    for path in kept:
        replace_durably(path.with_name(path.name + ".reason.txt"), f"{rel}: {reason}\n".encode())


def _remote(what: str, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, with whatever the source's driver raises (botocore, aiohttp, OSError) as one
    :class:`RemoteError` naming `what`; a pull stopped so resumes from its partial files."""
    try:
        return call(*args)
    except SinkError:
        raise
    except Exception as e:
        raise RemoteError(f"cannot {what}: {type(e).__name__}: {e}") from e


def _source_embargo(fs: Any, base: str) -> EmbargoState:
    """The embargo of a source that is a store's own root (a bucket holds only what was
    published, so none); pulling from a store's folder is a public read like any other."""
    path = f"{base}/{EMBARGO_FILE}"
    if not fs.exists(path):
        return EmbargoState()
    try:
        return EmbargoState.model_validate_json(fs.cat_file(path))
    except ValidationError as e:
        raise SinkError(f"{path}: unreadable embargo state ({e})") from None


def _download(fs: Any, remote: str, final: Path, chunk_bytes: int) -> bool:
    """Fetch `remote` into ``final.partial``, continuing what is there, then rename it to
    `final`. Returns whether an earlier partial was continued."""
    partial = final.with_name(final.name + PARTIAL_SUFFIX)
    partial.parent.mkdir(parents=True, exist_ok=True)
    size = int(fs.info(remote)["size"])
    offset = partial.stat().st_size if partial.exists() else 0
    if offset > size:  # not a prefix of this object: start again
        partial.unlink()
        offset = 0
    with fs.open(remote, "rb", block_size=chunk_bytes) as src, partial.open("ab") as dst:
        src.seek(offset)
        while data := src.read(chunk_bytes):
            dst.write(data)
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(partial, final)
    return offset > 0


def pull(
    source: RemoteTarget,
    out: str | Path,
    *,
    validator: str,
    verifier: Verifier,
    filters: PullFilters | None = None,
    chunk_bytes: int = _CHUNK_BYTES,
    on_shard: Callable[[str, int], None] | None = None,
) -> PullReport:
    """Fetch and verify `validator`'s shards from `source` into `out`; see the module doc.

    ``on_shard(path, total)`` is called once per manifest considered (for a progress bar).
    Raises :class:`~shopbench.archive.remote.RemoteError` when the source cannot be opened;
    a shard or manifest that fails lands in ``report.quarantined``, never raised.
    """
    filters = filters or PullFilters()
    out = Path(out)
    fs, base = source.open()
    listed = f"{base}/{MANIFESTS_DIR}/validator={validator}"
    found = _remote(f"list {listed}", lambda: fs.find(listed) if fs.exists(listed) else [])
    remote_manifests = sorted(p for p in found if p.endswith(".json"))
    embargo = _remote(f"read {base}/{EMBARGO_FILE}", _source_embargo, fs, base)
    report = PullReport()
    for remote_manifest in remote_manifests:
        rel = remote_manifest[len(f"{base}/{MANIFESTS_DIR}/") : -len(".json")]
        if on_shard is not None:
            on_shard(rel, len(remote_manifests))
        raw = _remote(f"fetch {remote_manifest}", fs.cat_file, remote_manifest)
        try:
            manifest = parse_manifest(raw, remote_manifest)
        except SinkError as e:
            _quarantine(out, rel, str(e), raw)
            report.quarantined[rel] = str(e)
            continue
        reason = _check_manifest(manifest, rel, validator, verifier)
        if reason is not None:
            _quarantine(out, rel, reason, raw)
            report.quarantined[rel] = reason
            continue
        if not embargo.is_public(manifest):
            report.embargoed += 1
            continue
        if not filters.wants(manifest):
            report.filtered += 1
            continue
        local_manifest = out / manifest_path(rel)
        if (
            local_manifest.exists()
            and local_manifest.read_bytes() == raw
            and (out / rel).exists()
            and verify_shard(out, manifest) is None
        ):
            report.held.append(rel)
            report.rows += manifest.rows
            continue
        remote, local = f"{base}/{rel}", out / rel
        resumed = _remote(f"fetch {remote}", _download, fs, remote, local, chunk_bytes)
        reason = verify_shard(out, manifest)
        if reason is not None and resumed:
            # The partial may be what was wrong: one fresh download before judging the source.
            local.unlink()
            resumed = _remote(f"fetch {remote}", _download, fs, remote, local, chunk_bytes)
            reason = verify_shard(out, manifest)
        if reason is not None:
            local_manifest.unlink(missing_ok=True)
            _quarantine(out, rel, f"shard fails its signed manifest: {reason}", raw)
            report.quarantined[rel] = f"shard fails its signed manifest: {reason}"
            continue
        replace_durably(local_manifest, raw)  # after the shard, as the publisher orders them
        report.fetched.append(rel)
        if resumed:
            report.resumed.append(rel)
        report.rows += manifest.rows
    return report
