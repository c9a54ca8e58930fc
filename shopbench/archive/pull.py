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
- **Writes stay inside ``OUT``; links are never followed.** Every file the pull creates or
  replaces (a ``.partial``, a shard, a manifest, the head, the quarantine's files, each
  temporary name) and every folder on the way to it is examined with ``lstat`` first, and
  files are opened ``O_NOFOLLOW`` (new ones ``O_CREAT | O_EXCL``): a symbolic link planted
  anywhere on those paths stops the pull with :class:`~shopbench.archive.errors.LinkRefused`
  naming it, before a byte goes through it. A local source folder is read the same way: a
  link in its tree (a manifest, a shard, the head, a folder) is refused, never read through,
  so a source cannot make the pull read a file outside it.
- **Staleness is visible.** The report carries the reference head's signing time; with
  ``max_head_age_s`` a head older than that (or none at all) raises
  :class:`~shopbench.archive.errors.StaleHead` before anything is written.

:attr:`PullReport.complete` is False whenever anything was refused, withheld, failed or the
head is in doubt: ``traces pull`` then exits 1 naming each. The output is an archive root
that DuckDB and Hugging Face ``datasets`` read directly (see ``SHARD_GLOB``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.durable import fsync_dir
from shopbench.archive.errors import (
    LinkRefused,
    RemoteError,
    SinkError,
    StaleHead,
    UnknownValidator,
    UnsafePath,
)
from shopbench.archive.head import (
    HEADS_DIR,
    MAX_HEAD_BYTES,
    ArchiveHead,
    head_path,
    head_problem,
    manifest_digest,
    parse_head,
    read_local_head,
)
from shopbench.archive.manifest import (
    MANIFESTS_DIR,
    ShardManifest,
    manifest_path,
    parse_manifest,
    verify_manifest,
)
from shopbench.archive.paths import (
    HOTKEY,
    first_link,
    inside,
    partition_of_path,
    shard_path,
    shown,
    validator_name,
)
from shopbench.archive.remote import RemoteTarget
from shopbench.archive.shards import verify_shard_file
from shopbench.archive.signing import Verifier
from shopbench.archive.store import EMBARGO_FILE, QUARANTINE_DIR, EmbargoState

PARTIAL_SUFFIX = ".partial"
"""An interrupted download's bytes so far, at ``OUT/<shard path>.partial``."""

_CHUNK_BYTES = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
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


def age_words(seconds: float) -> str:
    """`seconds` (at least 0) as a person reads an age: ``45 s``, ``12 min``, ``3 h 12 min``,
    ``2 d 5 h``."""
    whole = int(max(0.0, seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def utc_text(unix: float) -> str:
    """`unix` seconds as an ISO 8601 UTC time to the second (``2026-11-30T08:15:02Z``)."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class HeadSummary(BaseModel):
    """The signed head a pull checked against."""

    sequence: int
    created_at: float = Field(description="unix time the validator signed the head")
    shards: int

    def age_line(self, now: float | None = None) -> str:
        """How old the head is, for a person: ``head 4 signed 3 h 12 min ago
        (2026-11-30T08:15:02Z)``; a head dated ahead of this machine's clock says so."""
        now = time.time() if now is None else now
        when = utc_text(self.created_at)
        ahead = self.created_at - now
        if ahead > 60:
            return (
                f"head {self.sequence} signed {age_words(ahead)} in the future ({when}): "
                "this machine's clock or the validator's is wrong"
            )
        return f"head {self.sequence} signed {age_words(now - self.created_at)} ago ({when})"


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


def _source_embargo(fs: Any, path: str) -> EmbargoState:
    """The embargo state at `path` of a source, the default when there is none."""
    if not fs.exists(path):
        return EmbargoState()
    try:
        return EmbargoState.model_validate_json(_read_bounded(fs, path, 4096))
    except ValidationError as e:
        raise SinkError(f"{path}: unreadable embargo state ({e})") from None


def _is_local(fs: Any) -> bool:
    """Whether `fs` is the machine's own filesystem (a source given as a folder)."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return "file" in protocols or "local" in protocols


def _local_find(base: str, rel: str) -> tuple[list[str], list[str]]:
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


class _Destination:
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


def _download(
    fs: Any, remote: str, dest: _Destination, partial: str, size: int, chunk_bytes: int
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
    fs: Any, remote: str, dest: _Destination, partial: str, size: int, offset: int,
    block_size: int,
) -> tuple[bool, bool]:  # fmt: skip
    chunk = block_size or _CHUNK_BYTES
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


class _Quarantine:
    """``OUT/_quarantine/``: what a pull refused, each beside a reason file, bytes capped."""

    def __init__(self, dest: _Destination, limit: int) -> None:
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


def _held_manifest(
    dest: _Destination, rel: str, validator: str, verifier: Verifier
) -> ShardManifest | None:
    """The verified manifest already held for `rel`, or None (LinkRefused for a link)."""
    path = dest.path(manifest_path(rel))
    try:
        held = parse_manifest(path.read_bytes(), rel)
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
        self.dest = _Destination(out)
        self.local = _is_local(fs)
        self.validator, self.verifier = validator, verifier
        self.filters, self.limits, self.chunk_bytes = filters, limits, chunk_bytes
        self.report = PullReport()
        self.quarantine = _Quarantine(self.dest, limits.quarantine_bytes)
        self.embargo = EmbargoState()

    def source_link(self, remote: str) -> str | None:
        """The first symbolic link on the way to `remote` in a local source folder (shown
        relative to it), None for one without or for a source that is not a folder."""
        if not self.local or not remote.startswith(f"{self.base}/"):
            return None
        link = first_link(Path(self.base), remote[len(self.base) + 1 :])
        return None if link is None else shown(str(link)[len(self.base) + 1 :])

    def source_embargo(self) -> EmbargoState:
        """The embargo of a source that is a store's own root (a bucket holds only what was
        published, so none); pulling from a store's folder is a public read like any other.
        LinkRefused when a local source's embargo file is a link."""
        path = f"{self.base}/{EMBARGO_FILE}"
        link = self.source_link(path)
        if link is not None:
            raise LinkRefused(
                f"{link}: a symbolic link in the source folder {shown(self.base)}; refused, "
                "never read through"
            )
        return _remote(f"read {path}", _source_embargo, self.fs, path)

    # -- what the source lists ---------------------------------------------------------

    def validators(self) -> list[str]:
        """The hotkeys whose partitions the source's manifest folder lists (names that are not
        a plain hotkey are left out, never shown)."""
        prefix = f"{self.base}/{MANIFESTS_DIR}"
        fs = self.fs
        names = _remote(
            f"list {prefix}", lambda: fs.ls(prefix, detail=False) if fs.exists(prefix) else []
        )
        held = []
        for entry in names:
            name = str(entry).rstrip("/").rsplit("/", 1)[-1]
            hotkey = name.removeprefix("validator=")
            if name.startswith("validator=") and HOTKEY.fullmatch(hotkey):
                held.append(hotkey)
        return sorted(held)

    def listing(self) -> dict[str, str]:
        """Shard path → the source's manifest path, for every name that is a shard path of
        the validator's partition; the rest are rejected."""
        prefix = f"{self.base}/{MANIFESTS_DIR}/"
        listed = f"{prefix}validator={self.validator}"
        fs = self.fs
        if self.local:
            found, links = _remote(f"list {listed}", _local_find, self.base,
                                   listed[len(self.base) + 1 :])  # fmt: skip
            for link in links:
                self.report.rejected[shown(link[len(self.base) + 1 :])] = (
                    "a symbolic link in the source folder; never read through"
                )
        else:
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
        self.dest.path(head_path(self.validator))  # never read through a link
        local = read_local_head(self.out, self.validator)
        if local is not None and head_problem(local, self.validator, self.verifier):
            local = None
        source: ArchiveHead | None = None
        remote = f"{self.base}/{head_path(self.validator)}"
        link = self.source_link(remote)
        try:
            if link is not None:
                self.report.head_problem = (
                    f"the source's head is a symbolic link ({link}); never read through"
                )
            elif _remote(f"look for {remote}", self.fs.exists, remote):
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

    def refuse(self, rel: str, reason: str, raw: bytes | None, partial: str | None) -> None:
        self.report.quarantined[rel] = self.quarantine.put(rel, reason, raw, partial)

    def shard(self, rel: str, remote: str | None, head: ArchiveHead | None) -> None:
        r = self.report
        named = head.shards.get(rel) if head is not None else None
        held = _held_manifest(self.dest, rel, self.validator, self.verifier)
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
        return verify_shard_file(self.dest.path(manifest.path), manifest) is None

    def fetch(self, rel: str, manifest: ShardManifest, raw: bytes) -> None:
        final = self.dest.path(rel)
        partial = f"{rel}{PARTIAL_SUFFIX}"
        remote = f"{self.base}/{rel}"
        link = self.source_link(remote)
        if link is not None:
            self.refuse(rel, f"the source's shard is a symbolic link ({link}); never read "
                        "through", raw, None)  # fmt: skip
            return
        get = (self.fs, remote, self.dest, partial, manifest.bytes, self.chunk_bytes)
        resumed, more = _remote(f"fetch {remote}", _download, *get)
        reason = verify_shard_file(self.dest.path(partial), manifest)
        if reason is not None and resumed:
            # The partial may be what was wrong: one fresh download before judging the source.
            self.dest.unlink(partial)
            resumed, more = _remote(f"fetch {remote}", _download, *get)
            reason = verify_shard_file(self.dest.path(partial), manifest)
        if more:
            cut = f"the source sent more than the signed {manifest.bytes} bytes; cut there"
            reason = cut if reason is None else f"{reason}; {cut}"
        if reason is not None:
            self.refuse(rel, f"shard fails its signed manifest: {reason}", raw, partial)
            return
        os.replace(self.dest.path(partial), final)
        self.dest.write(manifest_path(rel), raw)  # after the shard
        self.report.fetched.append(rel)
        if resumed:
            self.report.resumed.append(rel)
        self.report.rows += manifest.rows


def _check_age(head: ArchiveHead | None, validator: str, max_age_s: float) -> None:
    """StaleHead when `head` (the reference head) was signed more than `max_age_s` seconds
    ago, or when there is no verified head to date the source by."""
    accepted = age_words(max_age_s)
    if head is None:
        raise StaleHead(
            f"the source serves no verified signed head of validator {validator}: its age "
            f"cannot be checked against the {accepted} accepted; nothing pulled"
        )
    age = time.time() - head.created_at
    if age > max_age_s:
        raise StaleHead(
            f"validator {validator}'s signed head {head.sequence} was signed {age_words(age)} "
            f"ago ({utc_text(head.created_at)}), older than the {accepted} accepted; "
            "nothing pulled"
        )


def _fixed_paths(validator: str) -> tuple[str, ...]:
    """The paths under ``OUT`` every pull of `validator` reads or writes, whatever the source
    lists: checked for links before anything is read or written."""
    return (
        f"validator={validator}", MANIFESTS_DIR, f"{MANIFESTS_DIR}/validator={validator}",
        HEADS_DIR, head_path(validator), QUARANTINE_DIR,
    )  # fmt: skip


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
    max_head_age_s: float | None = None,
) -> PullReport:
    """Fetch and verify `validator`'s shards from `source` into `out`; see the module doc.

    ``on_shard(path, total)`` is called once per shard considered (for a progress bar).
    Raises :class:`~shopbench.archive.errors.RemoteError` when the source cannot be opened
    or listed (and SinkError for a validator hotkey that cannot name a folder);
    :class:`~shopbench.archive.errors.LinkRefused` naming a symbolic link met where the pull
    writes in `out` (nothing is written through it); with `max_head_age_s`,
    :class:`~shopbench.archive.errors.StaleHead` when the reference head is older than that
    or missing, before anything is written. Everything about one shard from the source lands
    in the report, never raised.
    """
    validator_name(validator)
    out = Path(out)
    dest = _Destination(out)
    for rel in _fixed_paths(validator):
        dest.path(rel)
    fs, base = source.open()
    job = _Pull(fs, base, out, validator, verifier, filters or PullFilters(),
                limits or PullLimits(), chunk_bytes)  # fmt: skip
    listed = job.listing()
    head = job.reference_head()
    if not listed and head is None and not job.report.rejected:
        held = job.validators()
        raise UnknownValidator(
            f"{shown(source.url)} holds nothing of validator {validator} (no manifest, no "
            "signed head); "
            + (f"it holds: {', '.join(held)}" if held else "it holds no validator's shards")
        )
    if max_head_age_s is not None:
        _check_age(head, validator, max_head_age_s)
    if head is not None:
        job.report.head = HeadSummary(
            sequence=head.sequence, created_at=head.created_at, shards=len(head.shards)
        )
    job.embargo = job.source_embargo()
    dest.folder(".")
    paths = sorted(set(listed) | set(head.shards if head is not None else ()))
    for rel in paths:
        if on_shard is not None:
            on_shard(rel, len(paths))
        try:
            job.shard(rel, listed.get(rel), head)
        except RemoteError as e:
            job.report.failed[rel] = str(e)
    if head is not None and job.report.head_problem is None:
        try:
            dest.write(head_path(validator), head.to_bytes())
        except OSError as e:
            raise SinkError(f"{out}: cannot write the head ({e.strerror or e})") from None
    return job.report
