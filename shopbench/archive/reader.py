"""The one verified reader of a local archive folder: which shards may be read, and why the
others may not.

Every command that reads an archive — ``traces query``, ``traces serve``, ``curate`` —
lists its shards here. Without a trusted validator the listing is what the folder's
manifests describe (each manifest's path checked by :func:`~shopbench.archive.paths.
shard_path`, the file present with its stated size; with a verifier, each manifest's
signature by its own signer). With :class:`Trust` — a validator's hotkey and a verifier —
a folder is held to what that validator signed, as a pull holds a bucket: a shard is read
only when its manifest lies in that validator's partition, names that validator as its
signer, carries that validator's signature, and the file's size, sha256 and row count
match it. Either way a shard whose footer promises more than its size may hold
(:func:`~shopbench.archive.bounds.footer_problem`) is left out before any row is read. Every
shard left out is in :attr:`ArchiveListing.dropped` with its reason, so a
command can say what it dropped. A verified file's sha256 is remembered by its size and
modification time, so a service that lists again and again hashes each shard once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from shopbench.archive.bounds import footer_problem
from shopbench.archive.errors import SinkError, UnsafePath
from shopbench.archive.manifest import ShardManifest, verify_manifest
from shopbench.archive.paths import partition_of_path, shard_path, shown
from shopbench.archive.shards import iter_manifests, verify_shard
from shopbench.archive.signing import Verifier


class ShardRef(BaseModel):
    """One sealed shard a reader may read: its manifest and the file's absolute path."""

    model_config = ConfigDict(frozen=True)

    manifest: ShardManifest
    file: str

    def partition(self) -> dict[str, str]:
        """The hive partition of the shard's path (validator, date, intent)."""
        return partition_of_path(self.manifest.path)


class Dropped(BaseModel):
    """A shard (or a manifest) the reader left out, and why."""

    model_config = ConfigDict(frozen=True)

    path: str
    rows: int
    reason: str
    unreadable: bool = False  # the manifest itself could not be read or named a bad path


@dataclass(frozen=True)
class Trust:
    """The validator whose signature a read requires, and the verifier that checks it."""

    validator: str
    verifier: Verifier


@dataclass
class ArchiveListing:
    """The shards a read may use, in path order, and those it may not."""

    root: Path
    shards: list[ShardRef] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    @property
    def dropped_rows(self) -> int:
        """Episodes in the shards left out (as their manifests state them)."""
        return sum(d.rows for d in self.dropped)

    def summary(self) -> str:
        """One line for a person: what was left out, or '' when nothing was."""
        if not self.dropped:
            return ""
        first = self.dropped[0]
        more = f" (and {len(self.dropped) - 1} more)" if len(self.dropped) > 1 else ""
        return (
            f"left out {len(self.dropped)} shard(s), {self.dropped_rows} episode(s): "
            f"{first.path}: {first.reason}{more}"
        )


_verified: dict[tuple[str, int, int, str], bool] = {}
_verified_lock = threading.Lock()


def _bytes_problem(root: Path, manifest: ShardManifest, file: Path) -> str | None:
    """:func:`verify_shard`, remembered for a file whose size and mtime have not changed."""
    try:
        st = file.stat()
    except OSError:
        return verify_shard(root, manifest)
    key = (str(file), st.st_size, st.st_mtime_ns, manifest.sha256)
    with _verified_lock:
        if _verified.get(key):
            return None
    problem = verify_shard(root, manifest)
    if problem is None:
        with _verified_lock:
            if len(_verified) > 100_000:
                _verified.clear()
            _verified[key] = True
    return problem


def list_archive(
    root: str | Path,
    *,
    trust: Trust | None = None,
    verifier: Verifier | None = None,
    check_bytes: bool | None = None,
) -> ArchiveListing:
    """The shards of the archive folder at `root` a read may use (see the module doc).

    `verifier` without `trust` checks each manifest against its own signer. `check_bytes`
    hashes every shard against its manifest (default: when `trust` is given); otherwise
    only the file's size is compared. SinkError when `root` is not a folder.
    """
    base = Path(root)
    if not base.is_dir():
        raise SinkError(f"{base}: no archive here (not a directory)")
    hashes = trust is not None if check_bytes is None else check_bytes
    listing = ArchiveListing(root=base)
    for path, manifest in iter_manifests(base):
        where = path.relative_to(base).as_posix()
        if isinstance(manifest, SinkError):
            listing.dropped.append(Dropped(path=where, rows=0, reason=str(manifest),
                                           unreadable=True))  # fmt: skip
            continue
        try:
            shard_path(manifest.path)
        except UnsafePath as e:
            listing.dropped.append(Dropped(
                path=where, rows=0, unreadable=True,
                reason=f"shard path {shown(manifest.path)!r} is not a partition path ({e})",
            ))  # fmt: skip
            continue
        if where != f"_manifests/{manifest.path}.json":
            listing.dropped.append(Dropped(
                path=manifest.path, rows=manifest.rows,
                reason=f"the manifest at {where} names another shard",
            ))  # fmt: skip
            continue
        reason = _trust_problem(manifest, trust, verifier)
        file = base / manifest.path
        if reason is None:
            if hashes:
                reason = _bytes_problem(base, manifest, file)
            else:
                try:
                    size = file.stat().st_size
                except FileNotFoundError:
                    size = -1
                if size != manifest.bytes:
                    reason = "missing" if size < 0 else (
                        f"{size} bytes, the manifest says {manifest.bytes}"
                    )  # fmt: skip
                else:
                    reason = footer_problem(file, size)
        if reason is not None:
            listing.dropped.append(Dropped(path=manifest.path, rows=manifest.rows, reason=reason))
            continue
        listing.shards.append(ShardRef(manifest=manifest, file=str(file)))
    return listing


def _trust_problem(
    manifest: ShardManifest, trust: Trust | None, verifier: Verifier | None
) -> str | None:
    """Why `manifest` fails the read's trust, or None."""
    if trust is not None:
        v = trust.validator
        if manifest.validator != v or not manifest.path.startswith(f"validator={v}/"):
            return f"not in validator {v}'s partition (it is {shown(manifest.validator, 64)}'s)"
        if not verify_manifest(manifest, trust.verifier, v):
            return f"manifest not signed by validator {v} (signer {shown(manifest.signer, 64)})"
        return None
    if verifier is not None and not verify_manifest(manifest, verifier, manifest.signer):
        return f"manifest signature does not verify ({shown(manifest.signer, 64)})"
    return None
