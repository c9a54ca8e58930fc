"""Pulling one validator's published shards, verified, into a local folder.

:func:`pull` lists the manifests a source (a bucket, a folder laid out as
:mod:`shopbench.archive.remote` publishes, or another instance's HTTP mirror) holds for one
validator, and trusts nothing it names until checked:

- **Names are data.** Every path the source lists is checked by
  :func:`~shopbench.archive.paths.shard_path` before a byte is written for it; a name that
  is not one of the archive's own shard paths is reported in ``rejected`` and never
  followed, and the quarantine is confined to ``OUT/_quarantine/`` the same way.
- **Reads are bounded.** A manifest is read up to :attr:`PullLimits.manifest_bytes`, a
  head up to :data:`~shopbench.archive.head.MAX_HEAD_BYTES`, a shard up to the byte count
  its signed manifest states: a source that sends more is cut there, and the shard is
  quarantined saying so. Quarantined bytes are capped (:attr:`PullLimits.quarantine_bytes`);
  past the cap only the reason is kept.
- **Signatures and hashes.** Each manifest must be the validator's, signed, for the path it
  is published at; each shard's bytes must match it. A download goes to
  ``<shard>.partial`` (resumed from there when interrupted), is verified there, and only
  then takes the shard's place, so a bad download never replaces a good shard.
- **The signed head** (:mod:`shopbench.archive.head`) says which manifests must be there.
  A shard it names that the source does not serve is reported ``withheld``; a manifest
  other than the one it names is refused as a rollback or a substitution, as is a manifest
  older than the one already held for the same path; a head older than the one pulled
  before is reported and the newer one kept as the reference.
- **Partial failure delivers the rest.** A shard the source fails to send is reported in
  ``failed`` and the pull goes on; every intact shard is delivered.

:attr:`PullReport.complete` is False whenever anything was refused, withheld, failed or the
head is in doubt: ``traces pull`` then exits 1 naming each. The output is an archive root
that DuckDB and Hugging Face ``datasets`` read directly (see ``SHARD_GLOB``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.durable import replace_durably
from shopbench.archive.errors import RemoteError, SinkError, UnsafePath
from shopbench.archive.head import (
    MAX_HEAD_BYTES,
    ArchiveHead,
    head_path,
    head_problem,
    manifest_digest,
    parse_head,
    read_local_head,
    write_head,
)
from shopbench.archive.manifest import (
    MANIFESTS_DIR,
    ShardManifest,
    manifest_path,
    parse_manifest,
    verify_manifest,
)
from shopbench.archive.paths import inside, partition_of_path, shard_path, shown, validator_name
from shopbench.archive.remote import RemoteTarget
from shopbench.archive.shards import verify_shard_file
from shopbench.archive.signing import Verifier
from shopbench.archive.store import EMBARGO_FILE, QUARANTINE_DIR, EmbargoState

PARTIAL_SUFFIX = ".partial"
"""An interrupted download's bytes so far, at ``OUT/<shard path>.partial``."""

_CHUNK_BYTES = 1 << 20
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


class HeadSummary(BaseModel):
    """The signed head a pull checked against."""

    sequence: int
    created_at: float
    shards: int


class PullReport(BaseModel):
    """What one pull did. ``quarantined`` maps a shard path to why it was refused,
    ``rejected`` a name the source listed (escaped) to why it is not a shard path,
    ``withheld`` lists the shards the signed head names that the source did not serve, and
    ``failed`` maps a shard path to the error fetching it."""

    fetched: list[str] = Field(default_factory=list, description="shards downloaded now")
    resumed: list[str] = Field(default_factory=list, description="of those, continued partials")
    held: list[str] = Field(default_factory=list, description="already here and verified")
    filtered: int = Field(default=0, description="shards the filters left out")
    embargoed: int = Field(default=0, description="shards of a live bucket, left at the source")
    rows: int = Field(default=0, description="episodes in the fetched and held shards")
    quarantined: dict[str, str] = Field(default_factory=dict)
    rejected: dict[str, str] = Field(default_factory=dict)
    withheld: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)
    head: HeadSummary | None = Field(default=None, description="the head checked against")
    head_problem: str | None = Field(default=None, description="why the head is in doubt")

    @property
    def complete(self) -> bool:
        """Whether everything the source should hold arrived verified and nothing was refused."""
        return not (
            self.quarantined or self.rejected or self.withheld or self.failed or self.head_problem
        )

    def problems(self) -> list[str]:
        """One line per thing refused, withheld or failed, for a person (names escaped)."""
        lines = [f"head: {self.head_problem}"] if self.head_problem else []
        lines += [f"rejected {name}: {why}" for name, why in self.rejected.items()]
        lines += [f"quarantined {p}: {why}" for p, why in self.quarantined.items()]
        lines += [
            f"withheld {p}: the validator's signed head lists it, the source does not serve it"
            for p in self.withheld
        ]
        lines += [f"failed {p}: {why}" for p, why in self.failed.items()]
        return lines


def _remote(what: str, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, with whatever the source's driver raises (botocore, aiohttp, OSError) as one
    :class:`RemoteError` naming `what`; a pull stopped so resumes from its partial files."""
    try:
        return call(*args)
    except SinkError:
        raise
    except Exception as e:
        raise RemoteError(f"cannot {what}: {type(e).__name__}: {e}") from e


def _read_bounded(fs: Any, path: str, limit: int) -> bytes:
    """At most `limit` bytes of `path`; SinkError when it holds more."""
    with fs.open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SinkError(f"{shown(path)}: more than {limit} bytes")
    return bytes(data)


def _source_embargo(fs: Any, base: str) -> EmbargoState:
    """The embargo of a source that is a store's own root (a bucket holds only what was
    published, so none); pulling from a store's folder is a public read like any other."""
    path = f"{base}/{EMBARGO_FILE}"
    if not fs.exists(path):
        return EmbargoState()
    try:
        return EmbargoState.model_validate_json(_read_bounded(fs, path, 4096))
    except ValidationError as e:
        raise SinkError(f"{path}: unreadable embargo state ({e})") from None


def _download(
    fs: Any, remote: str, partial: Path, size: int, chunk_bytes: int
) -> tuple[bool, bool]:
    """Fetch `remote` into `partial`, continuing what is there, never past `size` bytes (the
    signed size). Returns (an earlier partial was continued, the source had more bytes). A
    server without range requests is read as a stream from the start."""
    partial.parent.mkdir(parents=True, exist_ok=True)
    offset = partial.stat().st_size if partial.exists() else 0
    if offset > size:  # not a prefix of this shard: start again
        partial.unlink()
        offset = 0
    try:
        return _copy(fs, remote, partial, size, offset, chunk_bytes)
    except ValueError:  # fsspec's HTTP file without range requests: stream it whole
        partial.unlink(missing_ok=True)
        return _copy(fs, remote, partial, size, 0, 0)


def _copy(
    fs: Any, remote: str, partial: Path, size: int, offset: int, block_size: int
) -> tuple[bool, bool]:
    chunk = block_size or _CHUNK_BYTES
    with fs.open(remote, "rb", block_size=block_size) as src:
        if offset:
            src.seek(offset)
        with partial.open("ab") as dst:
            left = size - offset
            while left > 0 and (data := src.read(min(chunk, left))):
                dst.write(data)
                left -= len(data)
            dst.flush()
            os.fsync(dst.fileno())
        more = left == 0 and bool(src.read(1))
    return offset > 0, more


class _Quarantine:
    """``OUT/_quarantine/``: what a pull refused, each beside a reason file, bytes capped."""

    def __init__(self, out: Path, limit: int) -> None:
        self.root = out / QUARANTINE_DIR
        self.limit = limit
        self.used = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file()) if (
            self.root.is_dir()
        ) else 0  # fmt: skip

    def put(self, rel: str, reason: str, manifest: bytes | None, partial: Path | None) -> str:
        """Keep what was fetched now of the shard at `rel` (a checked shard path): the partial
        download and the manifest's bytes, within the cap; the reason as recorded. The shard
        already held is never touched."""
        kept: list[Path] = []
        if partial is not None and partial.exists():
            target = inside(self.root, rel)
            size = partial.stat().st_size
            if self.used + size <= self.limit:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(partial, target)
                self.used += size
                kept.append(target)
            else:
                partial.unlink()
                reason += " (its bytes are not kept: the quarantine is full)"
        if manifest is not None:
            target = inside(self.root, manifest_path(rel))
            replace_durably(target, manifest)
            self.used += len(manifest)
            kept.append(target)
        if not kept:
            kept.append(inside(self.root, rel))
        note = f"{rel}: {reason}\n".encode()
        for path in kept:
            replace_durably(path.with_name(path.name + ".reason.txt"), note)
        return reason


def _check_manifest(
    manifest: ShardManifest, rel: str, validator: str, verifier: Verifier
) -> str | None:
    """Why `manifest`, published for the shard at `rel`, may not be trusted as `validator`'s,
    or None: a signed manifest must not be replayed at another path."""
    if manifest.path != rel:
        return f"manifest names shard {shown(manifest.path)!r} but is published for {rel!r}"
    expected = f"validator={manifest.validator}/date={manifest.date}/intent={manifest.intent}/"
    if not rel.startswith(expected):
        return f"manifest's partition does not match its path {rel!r}"
    if manifest.validator != validator:
        return f"shard {rel!r} is not in validator {validator}'s partition"
    if not verify_manifest(manifest, verifier, validator):
        return f"manifest signature is not {validator}'s"
    return None


def _held_manifest(out: Path, rel: str, validator: str, verifier: Verifier) -> ShardManifest | None:
    """The verified manifest already held for `rel`, or None."""
    try:
        held = parse_manifest(inside(out, manifest_path(rel)).read_bytes(), rel)
    except (OSError, SinkError):
        return None
    return held if _check_manifest(held, rel, validator, verifier) is None else None


class _Pull:
    """One pull's state (see :func:`pull`)."""

    def __init__(
        self, fs: Any, base: str, out: Path, validator: str, verifier: Verifier,
        filters: PullFilters, limits: PullLimits, chunk_bytes: int,
    ) -> None:  # fmt: skip
        self.fs, self.base, self.out = fs, base, out
        self.validator, self.verifier = validator, verifier
        self.filters, self.limits, self.chunk_bytes = filters, limits, chunk_bytes
        self.report = PullReport()
        self.quarantine = _Quarantine(out, limits.quarantine_bytes)
        self.embargo = EmbargoState()

    # -- what the source lists ---------------------------------------------------------

    def listing(self) -> dict[str, str]:
        """Shard path → the source's manifest path, for every name that is a shard path of
        the validator's partition; the rest are rejected."""
        prefix = f"{self.base}/{MANIFESTS_DIR}/"
        listed = f"{prefix}validator={self.validator}"
        fs = self.fs
        found = _remote(f"list {listed}", lambda: fs.find(listed) if fs.exists(listed) else [])
        out: dict[str, str] = {}
        for remote in sorted(str(p) for p in found):
            name = remote[len(prefix) :] if remote.startswith(prefix) else remote
            if not name.endswith(".json"):
                continue
            try:
                rel = shard_path(name[: -len(".json")])
            except UnsafePath as e:
                self.report.rejected[shown(name)] = str(e).split(": ", 1)[-1]
                continue
            if not rel.startswith(f"validator={self.validator}/"):
                self.report.rejected[shown(name)] = "outside the validator's partition"
                continue
            out[rel] = remote
        return out

    def reference_head(self) -> ArchiveHead | None:
        """The newest verified head: the source's, or the one an earlier pull kept when the
        source's is missing, older, or conflicting (then ``head_problem`` says so)."""
        local = read_local_head(self.out, self.validator)
        if local is not None and head_problem(local, self.validator, self.verifier):
            local = None
        source: ArchiveHead | None = None
        remote = f"{self.base}/{head_path(self.validator)}"
        try:
            if _remote(f"look for {remote}", self.fs.exists, remote):
                raw = _remote(f"fetch {remote}", _read_bounded, self.fs, remote, MAX_HEAD_BYTES)
                source = parse_head(raw, remote)
                problem = head_problem(source, self.validator, self.verifier)
                if problem is not None:
                    self.report.head_problem = problem
                    source = None
        except SinkError as e:
            self.report.head_problem = str(e)
        if local is not None and (source is None or local.sequence > source.sequence):
            if self.report.head_problem is None:
                self.report.head_problem = (
                    f"the source serves no head, though head {local.sequence} was pulled before"
                    if source is None else
                    f"the source's head {source.sequence} is older than head {local.sequence} "
                    "pulled before (a rollback)"
                )  # fmt: skip
            return local
        same = local is not None and source is not None and local.sequence == source.sequence
        if same and local is not None and source is not None and local.shards != source.shards:
            self.report.head_problem = (
                f"the source's head {source.sequence} differs from the head of that "
                "sequence pulled before"
            )
            return local
        return source

    # -- one shard ---------------------------------------------------------------------

    def refuse(self, rel: str, reason: str, raw: bytes | None, partial: Path | None) -> None:
        self.report.quarantined[rel] = self.quarantine.put(rel, reason, raw, partial)

    def shard(self, rel: str, remote: str | None, head: ArchiveHead | None) -> None:
        r = self.report
        named = head.shards.get(rel) if head is not None else None
        held = _held_manifest(self.out, rel, self.validator, self.verifier)
        if remote is None:  # the head names it, the source lists nothing
            if not self.filters.wants_path(rel):
                r.filtered += 1
            elif held is not None and manifest_digest(held) == named and self._intact(held):
                r.held.append(rel)
                r.rows += held.rows
            else:
                r.withheld.append(rel)
            return
        raw = _remote(f"fetch {remote}", _read_bounded, self.fs, remote,
                      self.limits.manifest_bytes)  # fmt: skip
        try:
            manifest = parse_manifest(raw, remote)
        except SinkError as e:
            self.refuse(rel, str(e), raw, None)
            return
        reason = _check_manifest(manifest, rel, self.validator, self.verifier)
        if reason is None and named is not None and manifest_digest(manifest) != named:
            reason = (
                f"not the manifest the validator's signed head {head.sequence if head else 0} "
                "names for this shard (an older or substituted one)"
            )
        if reason is None and held is not None and manifest.created_at < held.created_at:
            reason = "older than the manifest already held for this shard (a rollback)"
        if reason is not None:
            self.refuse(rel, reason, raw, None)
            return
        if named is None and not self.embargo.is_public(manifest):
            r.embargoed += 1
            return
        if not self.filters.wants(manifest):
            r.filtered += 1
            return
        if held is not None and held == manifest and self._intact(manifest):
            r.held.append(rel)
            r.rows += manifest.rows
            return
        self.fetch(rel, manifest, raw)

    def _intact(self, manifest: ShardManifest) -> bool:
        return verify_shard_file(inside(self.out, manifest.path), manifest) is None

    def fetch(self, rel: str, manifest: ShardManifest, raw: bytes) -> None:
        final = inside(self.out, rel)
        partial = final.with_name(final.name + PARTIAL_SUFFIX)
        remote = f"{self.base}/{rel}"
        get = (self.fs, remote, partial, manifest.bytes, self.chunk_bytes)
        resumed, more = _remote(f"fetch {remote}", _download, *get)
        reason = verify_shard_file(partial, manifest)
        if reason is not None and resumed:
            # The partial may be what was wrong: one fresh download before judging the source.
            partial.unlink()
            resumed, more = _remote(f"fetch {remote}", _download, *get)
            reason = verify_shard_file(partial, manifest)
        if more:
            cut = f"the source sent more than the signed {manifest.bytes} bytes; cut there"
            reason = cut if reason is None else f"{reason}; {cut}"
        if reason is not None:
            self.refuse(rel, f"shard fails its signed manifest: {reason}", raw, partial)
            return
        os.replace(partial, final)
        replace_durably(inside(self.out, manifest_path(rel)), raw)  # after the shard
        self.report.fetched.append(rel)
        if resumed:
            self.report.resumed.append(rel)
        self.report.rows += manifest.rows


def pull(
    source: RemoteTarget,
    out: str | Path,
    *,
    validator: str,
    verifier: Verifier,
    filters: PullFilters | None = None,
    limits: PullLimits | None = None,
    chunk_bytes: int = _CHUNK_BYTES,
    on_shard: Callable[[str, int], None] | None = None,
) -> PullReport:
    """Fetch and verify `validator`'s shards from `source` into `out`; see the module doc.

    ``on_shard(path, total)`` is called once per shard considered (for a progress bar).
    Raises :class:`~shopbench.archive.errors.RemoteError` when the source cannot be opened
    or listed (and SinkError for a validator hotkey that cannot name a folder); everything
    about one shard lands in the report, never raised.
    """
    validator_name(validator)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fs, base = source.open()
    job = _Pull(fs, base, out, validator, verifier, filters or PullFilters(),
                limits or PullLimits(), chunk_bytes)  # fmt: skip
    listed = job.listing()
    head = job.reference_head()
    if head is not None:
        job.report.head = HeadSummary(
            sequence=head.sequence, created_at=head.created_at, shards=len(head.shards)
        )
    job.embargo = _remote(f"read {base}/{EMBARGO_FILE}", _source_embargo, fs, base)
    paths = sorted(set(listed) | set(head.shards if head is not None else ()))
    for rel in paths:
        if on_shard is not None:
            on_shard(rel, len(paths))
        try:
            job.shard(rel, listed.get(rel), head)
        except RemoteError as e:
            job.report.failed[rel] = str(e)
    if head is not None and job.report.head_problem is None:
        write_head(out, head)
    return job.report
