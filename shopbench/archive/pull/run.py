"""One pull, shard by shard: :func:`pull` (see :mod:`shopbench.archive.pull` for what it
checks and why)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from shopbench.archive.paths import HOTKEY, first_link, shard_path, shown, validator_name
from shopbench.archive.pull.destination import (
    CHUNK_BYTES,
    PARTIAL_SUFFIX,
    Destination,
    Quarantine,
    download,
)
from shopbench.archive.pull.report import HeadSummary, PullReport, age_words, utc_text
from shopbench.archive.pull.source import (
    PullFilters,
    PullLimits,
    is_local,
    local_find,
    read_bounded,
    read_embargo,
    remote_call,
)
from shopbench.archive.remote import RemoteTarget
from shopbench.archive.shards import verify_shard_file
from shopbench.archive.signing import Verifier
from shopbench.archive.store import EMBARGO_FILE, QUARANTINE_DIR, EmbargoState


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
    dest: Destination, rel: str, validator: str, verifier: Verifier
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
        self.dest = Destination(out)
        self.local = is_local(fs)
        self.validator, self.verifier = validator, verifier
        self.filters, self.limits, self.chunk_bytes = filters, limits, chunk_bytes
        self.report = PullReport()
        self.quarantine = Quarantine(self.dest, limits.quarantine_bytes)
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
        return remote_call(f"read {path}", read_embargo, self.fs, path)

    # -- what the source lists ---------------------------------------------------------

    def validators(self) -> list[str]:
        """The hotkeys whose partitions the source's manifest folder lists (names that are not
        a plain hotkey are left out, never shown)."""
        prefix = f"{self.base}/{MANIFESTS_DIR}"
        fs = self.fs
        names = remote_call(
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
            found, links = remote_call(f"list {listed}", local_find, self.base,
                                   listed[len(self.base) + 1 :])  # fmt: skip
            for link in links:
                self.report.rejected[shown(link[len(self.base) + 1 :])] = (
                    "a symbolic link in the source folder; never read through"
                )
        else:
            found = remote_call(
                f"list {listed}", lambda: fs.find(listed) if fs.exists(listed) else []
            )
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
            elif remote_call(f"look for {remote}", self.fs.exists, remote):
                raw = remote_call(f"fetch {remote}", read_bounded, self.fs, remote, MAX_HEAD_BYTES)
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
        raw = remote_call(f"fetch {remote}", read_bounded, self.fs, remote,
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
        resumed, more = remote_call(f"fetch {remote}", download, *get)
        reason = verify_shard_file(self.dest.path(partial), manifest)
        if reason is not None and resumed:
            # The partial may be what was wrong: one fresh download before judging the source.
            self.dest.unlink(partial)
            resumed, more = remote_call(f"fetch {remote}", download, *get)
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
    chunk_bytes: int = CHUNK_BYTES,
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
    dest = Destination(out)
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
