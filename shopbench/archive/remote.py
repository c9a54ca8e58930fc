"""Publishing sealed shards to object storage: any fsspec URL, each shard before its manifest.

A destination mirrors a local archive root: a shard at ``<url>/<relative path>`` and its
manifest at ``<url>/_manifests/<relative path>.json``, so :mod:`shopbench.archive.pull`
reads a bucket and a folder alike. ``s3://bucket/prefix`` with an ``endpoint_url`` storage
option covers R2 and MinIO; ``file:///path`` a mounted disk.

:class:`ShardUploader` sends what the store has sealed: it verifies the local shard against
its manifest, uploads the shard, checks the stored size, and only then uploads the manifest,
so no reader ever sees a manifest whose shard is missing. Each file is retried with
exponential backoff; what still fails stays pending in a state file on disk and is retried
on the next pass. Run as a background task, a failed upload never blocks the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.durable import replace_durably
from shopbench.archive.errors import RemoteError, SinkError
from shopbench.archive.head import head_path, manifest_digest, read_local_head
from shopbench.archive.manifest import ShardManifest, manifest_path
from shopbench.archive.shards import iter_manifests, verify_shard

log = logging.getLogger(__name__)

UPLOADS_DIR = "_uploads"
"""Where a local archive root keeps one upload state file per destination."""


class RemoteTarget(BaseModel):
    """A destination or source: an fsspec URL and the options its filesystem takes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(description="fsspec URL: s3://bucket/prefix, file:///path, or a plain path")
    storage_options: dict[str, Any] = Field(
        default_factory=dict,
        description="options for the filesystem, e.g. endpoint_url, key, secret for S3/R2",
    )

    def open(self) -> tuple[Any, str]:
        """The filesystem and the root path inside it; :class:`RemoteError` when the URL's
        protocol is unknown or its driver (``s3fs`` for ``s3://``) is not installed."""
        try:
            import fsspec

            fs, root = fsspec.core.url_to_fs(self.url, **self.storage_options)
        except ImportError as e:
            raise RemoteError(
                f"cannot open {self.url!r}: {e} (s3:// needs `pip install s3fs`)"
            ) from e
        except (ValueError, TypeError) as e:
            raise RemoteError(f"cannot open {self.url!r}: {e}") from e
        return fs, root.rstrip("/")


class ArchiveSource(BaseModel):
    """Where an archive is read from — a local folder, or a URL to pull from (``s3://``,
    ``file://``, ``http(s)://`` another instance of the service) — and the validator whose
    key its shards must carry. Every command that reads an archive takes one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    location: str = Field(description="an archive folder, or a URL to pull from")
    validator: str | None = Field(
        default=None, description="the publishing validator's hotkey its shards must carry"
    )
    storage_options: dict[str, Any] = Field(
        default_factory=dict, description="options of a URL's filesystem (endpoint, keys)"
    )

    @property
    def is_url(self) -> bool:
        """Whether the archive is pulled from a URL rather than read where it is."""
        return "://" in self.location

    def target(self) -> RemoteTarget:
        """The source as a :class:`RemoteTarget` to pull from."""
        return RemoteTarget(url=self.location, storage_options=self.storage_options)


def parse_storage_options(pairs: list[str], endpoint_url: str | None = None) -> dict[str, Any]:
    """Storage options from ``KEY=VALUE`` strings (values ``true``/``false`` become
    booleans) plus an optional S3 endpoint; :class:`RemoteError` names a malformed pair."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RemoteError(f"storage option {pair!r}: expected KEY=VALUE")
        options[key] = {"true": True, "false": False}.get(value.lower(), value)
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    return options


class UploadConfig(BaseModel):
    """How the uploader retries and how often its background pass runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(default=4, ge=1, description="tries per file within one pass")
    backoff_s: float = Field(default=0.5, ge=0, description="wait after the first failure")
    backoff_max_s: float = Field(default=30.0, ge=0, description="longest wait between tries")
    interval_s: float = Field(
        default=60.0, gt=0, description="seconds between background passes (retries included)"
    )


class UploadFailure(BaseModel):
    """The last failed pass over one shard."""

    model_config = ConfigDict(extra="forbid")

    attempts: int = Field(description="tries so far, over all passes")
    error: str
    at: float = Field(description="unix time of the last try")


class UploadState(BaseModel):
    """What one destination holds of a local archive root, kept on disk between runs."""

    model_config = ConfigDict(extra="forbid")

    url: str
    uploaded: dict[str, str] = Field(
        default_factory=dict, description="relative shard path → sha256 of what was uploaded"
    )
    failures: dict[str, UploadFailure] = Field(default_factory=dict)
    head_sequence: int | None = Field(
        default=None, description="the sequence of the signed head published there last"
    )


class UploadReport(BaseModel):
    """What one pass did."""

    uploaded: list[str] = Field(default_factory=list, description="shards published now")
    held: int = Field(default=0, description="shards the destination already had")
    embargoed: list[str] = Field(default_factory=list, description="not public yet, kept back")
    failed: dict[str, str] = Field(default_factory=dict, description="shard → last error")
    head: int | None = Field(default=None, description="the signed head's sequence, if sent now")
    episodes: int = Field(default=0, description="episodes in the shards published now")
    error: str | None = Field(
        default=None, description="why the pass failed as a whole (the destination could not "
        "be opened, the state not written); None when it ran",
    )  # fmt: skip


def _state_file(root: Path, url: str) -> Path:
    return root / UPLOADS_DIR / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.json"


def local_manifests(root: Path) -> list[tuple[Path, ShardManifest]]:
    """Every manifest file under ``root/_manifests`` with its parsed manifest, in path order;
    an unreadable one is logged and left out (the store quarantines such shards)."""
    found: list[tuple[Path, ShardManifest]] = []
    for path, manifest in iter_manifests(root):
        if isinstance(manifest, SinkError):
            log.warning("archive: not publishing %s: %s", path, manifest)
        else:
            found.append((path, manifest))
    return found


class ShardUploader:
    """Publishes the sealed shards of the archive at `root` to `target`.

    ``is_public(manifest)`` decides what may leave the machine (the store's embargo); what it
    refuses is kept back and reconsidered on every pass. ``on_pass(report)`` is told what
    each background pass did, a pass that failed as a whole included (its ``error`` set).
    """

    def __init__(
        self,
        root: str | Path,
        target: RemoteTarget,
        *,
        is_public: Callable[[ShardManifest], bool],
        config: UploadConfig | None = None,
        on_pass: Callable[[UploadReport], None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.target = target
        self.is_public = is_public
        self.config = config or UploadConfig()
        self.on_pass = on_pass
        self._state_path = _state_file(self.root, target.url)
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- state -------------------------------------------------------------------------

    def state(self) -> UploadState:
        """The on-disk state for this destination (empty when nothing was uploaded yet)."""
        try:
            return UploadState.model_validate_json(self._state_path.read_bytes())
        except FileNotFoundError:
            return UploadState(url=self.target.url)
        except ValidationError as e:
            raise RemoteError(f"upload state {self._state_path} is corrupt: {e}") from e

    def _save(self, state: UploadState) -> None:
        replace_durably(self._state_path, state.model_dump_json(indent=1).encode())

    # -- one pass ----------------------------------------------------------------------

    async def sync(self) -> UploadReport:
        """Upload every public sealed shard the destination lacks, shard first, then its
        manifest. Failures are recorded in the report and the state file, never raised;
        the one error raised is :class:`RemoteError` for a destination that cannot be
        opened at all."""
        async with self._lock:
            fs, base = await asyncio.to_thread(self.target.open)
            state = self.state()
            report = UploadReport()
            for path, manifest in await asyncio.to_thread(local_manifests, self.root):
                rel = manifest.path
                if state.uploaded.get(rel) == manifest.sha256:
                    report.held += 1
                    continue
                if not self.is_public(manifest):
                    report.embargoed.append(rel)
                    continue
                error = await self._publish(fs, base, path, manifest)
                if error is None:
                    state.uploaded[rel] = manifest.sha256
                    state.failures.pop(rel, None)
                    report.uploaded.append(rel)
                    report.episodes += manifest.rows
                else:
                    prior = state.failures.get(rel)
                    tries = (prior.attempts if prior else 0) + self.config.attempts
                    state.failures[rel] = UploadFailure(attempts=tries, error=error, at=time.time())
                    report.failed[rel] = error
                    log.warning("archive: upload of %s failed, will retry: %s", rel, error)
                self._save(state)
            await self._publish_head(fs, base, state, report)
            return report

    async def _publish_head(
        self, fs: Any, base: str, state: UploadState, report: UploadReport
    ) -> None:
        """Send the store's signed head once every shard it names is at the destination with
        the manifest it names: a reader never sees a head whose shards are missing."""
        manifests = {m.path: m for _, m in await asyncio.to_thread(local_manifests, self.root)}
        for validator in sorted({m.validator for m in manifests.values()}):
            head = read_local_head(self.root, validator)
            if head is None or head.sequence == state.head_sequence:
                continue
            ready = all(
                p in manifests
                and manifest_digest(manifests[p]) == digest
                and state.uploaded.get(p) == manifests[p].sha256
                for p, digest in head.shards.items()
            )
            if not ready:
                continue
            local = self.root / head_path(validator)
            try:
                await asyncio.to_thread(_put, fs, local, f"{base}/{head_path(validator)}")
            # As for a shard: whatever the store answered, the next pass sends the head again.
            except Exception as e:
                report.failed[head_path(validator)] = f"{type(e).__name__}: {e}"
                continue
            state.head_sequence = head.sequence
            report.head = head.sequence
            self._save(state)

    async def _publish(
        self, fs: Any, base: str, manifest_file: Path, manifest: ShardManifest
    ) -> str | None:
        """Upload one shard and then its manifest; None on success, else the last error."""
        reason = await asyncio.to_thread(verify_shard, self.root, manifest)
        if reason is not None:
            return f"local shard fails its manifest, not published: {reason}"
        local = self.root / manifest.path
        remote_shard = f"{base}/{manifest.path}"
        remote_manifest = f"{base}/{manifest_path(manifest.path)}"
        size = local.stat().st_size
        error: str | None = None
        for attempt in range(self.config.attempts):
            if attempt:
                delay = min(self.config.backoff_max_s, self.config.backoff_s * 2 ** (attempt - 1))
                await asyncio.sleep(delay)
            try:
                await asyncio.to_thread(_put, fs, local, remote_shard)
                stored = (await asyncio.to_thread(fs.info, remote_shard))["size"]
                if stored != size:
                    raise OSError(f"stored {stored} bytes of {size}")
                await asyncio.to_thread(_put, fs, manifest_file, remote_manifest)
                return None
            # Each fsspec driver raises its own family (botocore, aiohttp, OSError): whatever
            # the store answered, this try failed and the next one, or the next pass, retries.
            except Exception as e:
                error = f"{type(e).__name__}: {e}"
        return error

    # -- in the background -------------------------------------------------------------

    def start(self) -> None:
        """Run passes in the background: one now, then every ``interval_s`` or when
        :meth:`notify` is called. Must be called inside a running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def notify(self) -> None:
        """A shard was sealed: run a pass soon instead of waiting out the interval."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                report = await self.sync()
            # A pass that fails as a whole (destination unreachable, state unwritable) must
            # not end the background task: the caller's rounds go on and the next pass retries.
            except Exception as e:
                log.warning("archive: upload pass failed, will retry: %s", e)
                report = UploadReport(error=f"{type(e).__name__}: {e}")
            if self.on_pass is not None:
                self.on_pass(report)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.config.interval_s)
            self._wake.clear()

    async def close(self) -> None:
        """Stop the background passes (an upload in flight is abandoned; the shard stays
        pending and goes out on the next run)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def _put(fs: Any, local: Path, remote: str) -> None:
    """Copy `local` to `remote` so that the destination holds all of it or nothing: object
    stores replace an object in one request; a local filesystem gets a synced temporary file
    renamed over the final name."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if "file" not in protocols and "local" not in protocols:
        fs.put_file(str(local), remote)
        return
    final = Path(fs._strip_protocol(remote))
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.partial")
    try:
        shutil.copyfile(local, tmp)
        with tmp.open("rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
