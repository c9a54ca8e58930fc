"""The archive store: the validator's sink, a write-ahead segment rolled into signed shards.

:class:`ArchiveStore` is an :class:`~shopbench.archive.sink.ArchiveSink`. A batch handed to
:meth:`~ArchiveStore.put` is validated whole (one bad record refuses the batch with the
reason and nothing of it is written), appended to the write-ahead segment with group commit
(:mod:`shopbench.archive.segment`), and acknowledged once it is fsynced. When the segment
holds ``roll_rows`` records or its first is ``roll_seconds`` old, it is sealed, a fresh one
takes the appends, and the sealed one is rolled into shards — one per partition (validator /
date / intent) and epoch, each a zstd Parquet file with its signed manifest
(:mod:`shopbench.archive.shards`) — and deleted only once every shard and manifest is durable.

Shard names derive from the segment (``part-<segment>-<n>``), so rolling the same segment
twice writes the same shards: on open the store quarantines what a crash left half done (a
shard without its manifest, a shard whose bytes fail its manifest's sha256, a manifest
whose shard is gone — each moved under ``_quarantine/`` beside a ``.reason.txt``), then
replays the segments left on disk, skipping the shards that already verify, cutting a torn
segment tail. Nothing acknowledged is lost and nothing is stored twice.

What the store refuses: records that do not validate, two records of one batch with the
same episode id, a record naming another validator than the store's signer, and every
held-out record (``split == "heldout"``): held-out product groups never reach the archive,
and a validator that produced one has a bug worth a loud error rather than a silent drop.

The embargo is the store's, written to ``_embargo.json`` before any record that moves it is
acknowledged: the latest epoch the store has seen, the bucket current in it, and whether
the embargo is lifted. An episode of that (epoch, bucket) is stored but left out of every
public read (:meth:`ArchiveStore.embargo_view` for queries, :meth:`ArchiveStore.is_public`
for uploads) until a later epoch retires its bucket. Only the arena's store, on a public
seed, is opened with ``EmbargoPolicy(lifted=True)``, and says so loudly.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from shopbench.archive.durable import fsync_dir, replace_durably
from shopbench.archive.errors import RecordRefused, SegmentError, SinkError
from shopbench.archive.head import publish_head
from shopbench.archive.layout import partition_of
from shopbench.archive.manifest import (
    MANIFESTS_DIR,
    ShardManifest,
    manifest_path_for,
    read_manifest,
)
from shopbench.archive.segment import DEFAULT_COMMIT_WINDOW_MS, Segment, replay
from shopbench.archive.shards import (
    TEMP_SUFFIX,
    ShardBuilder,
    iter_manifests,
    read_shard,
    verify_shard,
)
from shopbench.archive.signing import Signer
from shopbench.records.trajectory import Trajectory

if TYPE_CHECKING:
    from shopbench.archive.query import EmbargoView

log = logging.getLogger("shopbench.archive")

WAL_DIR = "_wal"
"""The folder of the write-ahead segments under the archive root."""
QUARANTINE_DIR = "_quarantine"
"""Where recovery moves shards and manifests it cannot trust, each beside a reason file."""
EMBARGO_FILE = "_embargo.json"
"""The store's embargo state, read by every public reader of the root."""
DEFAULT_ROLL_ROWS = 10_000
DEFAULT_ROLL_SECONDS = 300.0
_RECORD = TypeAdapter(Trajectory)
ROLL_BATCH = 512
"""Records of a segment read back and turned into columns at once when it is rolled."""
DEFAULT_MAX_SEALED = 2
"""Sealed segments that may wait for their shards before ``put`` waits for the roll: the
backpressure that keeps memory bounded when records arrive faster than shards are sealed."""
_SEGMENT = re.compile(r"^segment-(\d{8})\.wal$")
LIFTED_WARNING = (
    "ARCHIVE EMBARGO LIFTED: every episode in {root} is public, live rotation buckets "
    "included (a demo on a public seed; never a validator's archive)"
)


class EmbargoPolicy(BaseModel):
    """How the store treats episodes of the rotation bucket still being asked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lifted: bool = Field(
        default=False,
        description="publish live buckets too (the arena on a public seed; never a validator)",
    )


class EmbargoState(BaseModel):
    """``_embargo.json``: the latest epoch seen, its current bucket, and the policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lifted: bool = False
    epoch: int | None = Field(default=None, description="the latest epoch of a stored record")
    bucket: int | None = Field(default=None, description="the bucket current in that epoch")

    def view(self) -> EmbargoView:
        """The embargo as the query layer applies it."""
        # the query layer (DuckDB) is a reader's concern; writing never needs it
        from shopbench.archive.query import EmbargoView

        known = self.epoch is not None and self.bucket is not None
        live = {self.epoch: self.bucket} if known else {}
        return EmbargoView(live=live, lifted=self.lifted)

    def is_public(self, manifest: ShardManifest) -> bool:
        """Whether the shard of `manifest` may leave the machine: the embargo is lifted, or
        no row of it belongs to the latest epoch (whose bucket is still live)."""
        if self.lifted or self.epoch is None or manifest.epoch_max is None:
            return True
        return manifest.epoch_max < self.epoch


def load_embargo(root: str | Path) -> EmbargoState:
    """The embargo state of the archive at `root` (none recorded: nothing embargoed yet)."""
    path = Path(root) / EMBARGO_FILE
    try:
        return EmbargoState.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return EmbargoState()
    except (OSError, ValidationError) as e:
        raise SinkError(f"{path}: unreadable embargo state ({e})") from None


def _shard_files(root: Path) -> Iterator[Path]:
    """Every Parquet file of the partition tree (not the quarantine, not hidden temps)."""
    for path in root.glob("validator=*/**/*.parquet"):
        if not path.name.startswith("."):
            yield path


class RecoveryReport(BaseModel):
    """What opening the store found and did."""

    replayed_segments: int = 0
    replayed_records: int = 0
    torn_bytes: int = 0
    shards_written: int = 0
    quarantined: list[str] = Field(default_factory=list, description="'path: reason' each")


class ArchiveStore:
    """The crash-safe archive at `root`: segment, shards, manifests, quarantine, embargo.

    Opening recovers (see the module doc); ``recovery`` says what it found. Use it from one
    event loop; :meth:`close` rolls what the segment holds into shards.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        signer: Signer,
        embargo: EmbargoPolicy | None = None,
        roll_rows: int = DEFAULT_ROLL_ROWS,
        roll_seconds: float = DEFAULT_ROLL_SECONDS,
        commit_window_ms: float = DEFAULT_COMMIT_WINDOW_MS,
        fsync: bool = True,
        max_sealed: int = DEFAULT_MAX_SEALED,
    ) -> None:
        if roll_rows < 1:
            raise ValueError(f"roll_rows must be at least 1, got {roll_rows}")
        self.root = Path(root)
        self.signer = signer
        self.policy = embargo or EmbargoPolicy()
        self.roll_rows = roll_rows
        self.roll_seconds = roll_seconds
        self.commit_window_ms = commit_window_ms
        self.max_sealed = max(1, max_sealed)
        self.fsync = fsync
        self.acknowledged = 0
        self.shards_written = 0
        try:
            (self.root / WAL_DIR).mkdir(parents=True, exist_ok=True)
            state = load_embargo(self.root)
            self._embargo = state.model_copy(update={"lifted": self.policy.lifted})
            if self._embargo != state or not (self.root / EMBARGO_FILE).exists():
                replace_durably(self.root / EMBARGO_FILE, self._embargo.model_dump_json().encode())
        except OSError as e:
            raise SinkError(f"{self.root}: cannot open the archive ({e.strerror or e})") from None
        if self.policy.lifted:
            # Said once, to the person at the terminal; the log keeps it at info, so a
            # logger without handlers (whose last resort prints warnings) does not say it twice.
            line = LIFTED_WARNING.format(root=self.root)
            print(line, file=sys.stderr, flush=True)
            log.info(line)
        self.recovery = self._recover()
        self._publish_head()
        self._generation = self._next_generation()
        self._segment = self._open_segment()
        self._first_at: float | None = None
        self._sealed: list[tuple[int, Segment]] = []
        self._roll_task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._past_commits = 0

    @property
    def commits(self) -> int:
        """How many fsyncs of the segment acknowledged records so far (group commit makes
        this far fewer than the puts)."""
        return self._past_commits + self._segment.commits + sum(s.commits for _, s in self._sealed)

    # -- the embargo ---------------------------------------------------------------------

    def embargo_view(self) -> EmbargoView:
        """Which episodes every public query must leave out now."""
        return self._embargo.view()

    def is_public(self, manifest: ShardManifest) -> bool:
        """Whether the shard of `manifest` may be uploaded now (see :class:`EmbargoState`)."""
        return self._embargo.is_public(manifest)

    def _advance_embargo(self, stamps: Sequence[tuple[int | None, int | None]]) -> None:
        """Move the embargo to the latest (epoch, bucket) of a batch's records."""
        latest = max((s for s in stamps if s[0] is not None), key=lambda s: s[0] or 0,
                     default=None)  # fmt: skip
        if latest is None:
            return
        epoch, bucket = latest
        assert epoch is not None
        current = self._embargo
        if current.epoch is not None and epoch < current.epoch:
            return
        if current.epoch == epoch and (bucket is None or current.bucket is not None):
            return
        new = current.model_copy(update={"epoch": epoch, "bucket": bucket})
        try:  # durable before the records that move it are acknowledged
            replace_durably(self.root / EMBARGO_FILE, new.model_dump_json().encode())
        except OSError as e:
            raise SinkError(f"{self.root}: cannot record the embargo ({e.strerror or e})") from None
        self._embargo = new
        if new.epoch != current.epoch:  # shards of the retired bucket became public
            self._publish_head()

    # -- writing -------------------------------------------------------------------------

    def _validate(
        self, trajectories: Sequence[Trajectory]
    ) -> tuple[list[bytes], list[tuple[int | None, int | None]]]:
        """Each record's payload, checked by validating it back from those very bytes, and
        its (epoch, bucket); RecordRefused for the first that fails."""
        seen: set[str] = set()
        payloads: list[bytes] = []
        stamps: list[tuple[int | None, int | None]] = []
        for t in trajectories:
            if not isinstance(t, Trajectory):
                raise RecordRefused("?", f"not a Trajectory but {type(t).__name__}")
            try:
                payload = _RECORD.dump_json(t)  # bytes straight from the serializer
                record = Trajectory.model_validate_json(payload)
            except (ValidationError, ValueError, TypeError) as e:
                name = getattr(t, "episode_id", "?")
                raise RecordRefused(name, f"invalid record ({e})") from None
            if record.split == "heldout":
                raise RecordRefused(
                    record.episode_id, "held-out split: held-out product groups are never archived"
                )
            if record.validator_hotkey not in (None, self.signer.hotkey):
                raise RecordRefused(
                    record.episode_id,
                    f"names validator {record.validator_hotkey}, this archive is "
                    f"{self.signer.hotkey}'s",
                )
            if record.episode_id in seen:
                raise RecordRefused(record.episode_id, "appears twice in one batch")
            seen.add(record.episode_id)
            payloads.append(payload)
            stamps.append((record.epoch, record.bucket))
        return payloads, stamps

    async def put(self, trajectories: Sequence[Trajectory]) -> int:
        """Validate `trajectories` whole, append them to the segment and return once they are
        fsynced (their count). RecordRefused (nothing written) for a bad record; SinkError
        when the disk refuses: then nothing of the batch is acknowledged."""
        if self._closed:
            raise SinkError(f"{self.root}: the archive is closed")
        if not trajectories:
            return 0
        # Only the payloads outlive validation: the segment holds each acknowledged record
        # as its bytes until the roll, because tens of thousands of live models (every put
        # awaiting one group commit holds its batch) make the garbage collector's full
        # passes the ingest's bottleneck, and bytes are invisible to it.
        payloads, stamps = self._validate(trajectories)
        self._advance_embargo(stamps)
        await self._segment.append(payloads, payloads)
        self.acknowledged += len(payloads)
        if self._first_at is None:
            self._first_at = time.monotonic()
            self._timer = asyncio.get_running_loop().call_later(
                self.roll_seconds, self._roll_if_due
            )
        self._roll_if_due()
        roll = self._roll_task
        if len(self._sealed) > self.max_sealed and roll is not None and not roll.done():
            # Backpressure: what is acknowledged stays durable; the caller waits for shards.
            await asyncio.shield(roll)
        return len(payloads)

    def _roll_if_due(self) -> None:
        if self._closed or not self._segment.items:
            return
        old = self._first_at is not None and time.monotonic() - self._first_at >= self.roll_seconds
        if len(self._segment.items) >= self.roll_rows or old:
            self._seal_current()
            if self._roll_task is None or self._roll_task.done():
                self._roll_task = asyncio.get_running_loop().create_task(self._roll_sealed())

    def _seal_current(self) -> None:
        self._sealed.append((self._generation, self._segment))
        self._generation += 1
        self._segment = self._open_segment()
        self._first_at = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _roll_sealed(self) -> None:
        """Roll every sealed segment into shards, oldest first; a failure keeps the segment
        (and its records) for the next roll, logged."""
        while self._sealed:
            generation, segment = self._sealed[0]
            try:
                await segment.seal()
                written = await asyncio.to_thread(
                    self._roll_pending, generation, list(segment.items), segment.path
                )
            except (SinkError, OSError) as e:
                log.error("archive: rolling %s into shards failed, kept for later: %s",
                          segment.path, e)  # fmt: skip
                return
            self.shards_written += written
            self._past_commits += segment.commits
            self._sealed.pop(0)

    async def flush(self) -> None:
        """Roll everything acknowledged so far into shards now (and wait for it)."""
        if self._segment.items:
            self._seal_current()
        if self._roll_task is not None and not self._roll_task.done():
            await self._roll_task
        await self._roll_sealed()
        if self._sealed:
            raise SinkError(f"{self.root}: {len(self._sealed)} segment(s) could not be rolled")

    async def close(self) -> None:
        """Roll what the segment holds into shards and release the store. The records stay
        durable in the segment if the roll fails (SinkError), and the next open replays them."""
        if self._closed:
            return
        try:
            await self.flush()
        finally:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            await self._segment.seal()
            if not self._segment.items and self._segment.size == 0:
                self._segment.path.unlink(missing_ok=True)

    # -- segments and shards ---------------------------------------------------------------

    def _segment_path(self, generation: int) -> Path:
        return self.root / WAL_DIR / f"segment-{generation:08d}.wal"

    def _open_segment(self) -> Segment:
        return Segment(
            self._segment_path(self._generation), commit_window_ms=self.commit_window_ms,
            fsync=self.fsync,
        )

    def _segments(self) -> list[tuple[int, Path]]:
        found = []
        for path in (self.root / WAL_DIR).iterdir():
            m = _SEGMENT.match(path.name)
            if m:
                found.append((int(m.group(1)), path))
        return sorted(found)

    def _next_generation(self) -> int:
        segments = self._segments()
        return segments[-1][0] + 1 if segments else self._last_shard_generation() + 1

    def _last_shard_generation(self) -> int:
        last = -1
        for path in _shard_files(self.root):
            m = re.match(r"^part-(\d{8})-\d+\.parquet$", path.name)
            if m:
                last = max(last, int(m.group(1)))
        return last

    def _roll_pending(self, generation: int, payloads: Sequence[bytes], segment: Path) -> int:
        """Write the shards of one segment's records, given as their payloads (skipping the
        shards already sealed and verified), then delete the segment. The records are read
        back and turned into columns :data:`ROLL_BATCH` at a time (see ShardBuilder).
        Returns the shards written."""
        builders: dict[tuple[str, int], ShardBuilder] = {}
        for start in range(0, len(payloads), ROLL_BATCH):
            groups: dict[tuple[str, int], list[Trajectory]] = {}
            for payload in payloads[start : start + ROLL_BATCH]:
                t = Trajectory.model_validate_json(payload)
                key = (partition_of(t).path(), -1 if t.epoch is None else t.epoch)
                groups.setdefault(key, []).append(t)
            for key, group in groups.items():
                if key not in builders:
                    builders[key] = ShardBuilder(partition_of(group[0]))
                builders[key].add(group)
        written = 0
        for n, key in enumerate(sorted(builders)):
            part = f"{generation:08d}-{n:04d}"
            rel = f"{key[0]}/part-{part}.parquet"
            manifest_file = self.root / manifest_path_for(rel)
            if manifest_file.exists():
                manifest = read_manifest(manifest_file)
                whole = manifest.rows == builders[key].rows
                if whole and verify_shard(self.root, manifest) is None:
                    continue
                self._quarantine(rel, "a replayed segment found it incomplete or altered")
            elif (self.root / rel).exists():
                self._quarantine(rel, "no manifest: the roll that wrote it did not finish")
            builders[key].write(self.root, signer=self.signer, shard_id=part)
            written += 1
        if written:
            self._publish_head()
        segment.unlink(missing_ok=True)
        fsync_dir(segment.parent)
        return written

    def _publish_head(self) -> None:
        """Sign a new head over the public shards (:mod:`shopbench.archive.head`) when they
        changed; an unreadable manifest is left out (recovery quarantines it)."""
        public = [
            m for _, m in iter_manifests(self.root)
            if isinstance(m, ShardManifest) and self._embargo.is_public(m)
        ]  # fmt: skip
        publish_head(self.root, self.signer, public)

    # -- recovery ------------------------------------------------------------------------

    def _quarantine(self, rel: str, reason: str) -> None:
        """Move the shard at `rel` and its manifest (those that exist) under the quarantine,
        each beside a reason file."""
        stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
        for source_rel in (rel, manifest_path_for(rel)):
            source = self.root / source_rel
            if not source.exists():
                continue
            dest = self.root / QUARANTINE_DIR / f"{source_rel}.{stamp}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(source, dest)
            dest.with_name(dest.name + ".reason.txt").write_text(f"{source_rel}: {reason}\n")
            fsync_dir(dest.parent)
            fsync_dir(source.parent)
            self.recovery_quarantined.append(f"{source_rel}: {reason}")
            log.warning("archive: quarantined %s: %s", source_rel, reason)

    def _recover(self) -> RecoveryReport:
        self.recovery_quarantined: list[str] = []
        report = RecoveryReport()
        try:
            for tmp in self.root.rglob(f".*{TEMP_SUFFIX}"):  # a write a kill cut short
                tmp.unlink()
            self._check_shards()
            for generation, path in self._segments():
                payloads, torn = replay(path)
                report.torn_bytes += torn
                report.replayed_segments += 1
                report.replayed_records += len(payloads)
                if payloads:
                    report.shards_written += self._roll_pending(generation, payloads, path)
                else:
                    path.unlink()
        except (OSError, ValidationError) as e:
            raise SinkError(f"{self.root}: recovery failed ({e})") from None
        report.quarantined = list(self.recovery_quarantined)
        if report.replayed_records or report.quarantined or report.torn_bytes:
            log.warning("archive %s recovered: %s", self.root, report.model_dump_json())
        return report

    def _check_shards(self) -> None:
        """Quarantine shards without a manifest or failing it, and manifests without shards."""
        shards = {p.relative_to(self.root).as_posix() for p in _shard_files(self.root)}
        manifests_dir = self.root / MANIFESTS_DIR
        manifests: dict[str, Path] = {}
        if manifests_dir.is_dir():
            for path in manifests_dir.rglob("*.parquet.json"):
                rel = path.relative_to(manifests_dir).as_posix()[: -len(".json")]
                manifests[rel] = path
        for rel in sorted(shards - manifests.keys()):
            self._quarantine(rel, "no manifest: the roll that wrote it did not finish")
        for rel in sorted(manifests.keys() - shards):
            self._quarantine(rel, "manifest without its shard")
        for rel in sorted(shards & manifests.keys()):
            try:
                manifest = read_manifest(manifests[rel])
            except SinkError as e:
                self._quarantine(rel, str(e))
                continue
            reason = verify_shard(self.root, manifest)
            if reason is not None:
                self._quarantine(rel, reason)


def read_store(root: str | Path) -> Iterator[Trajectory]:
    """Every sealed record under `root` (the operator's own read: embargoed ones included;
    public reads go through :func:`shopbench.archive.query.query` with the embargo view),
    shard by shard in path order. The segment's records appear once the store rolls them."""
    base = Path(root)
    manifests = base / MANIFESTS_DIR
    for path in sorted(manifests.rglob("*.parquet.json")) if manifests.is_dir() else []:
        manifest = read_manifest(path)
        yield from read_shard(base / manifest.path)


__all__ = [
    "ArchiveStore",
    "EmbargoPolicy",
    "EmbargoState",
    "RecoveryReport",
    "SegmentError",
    "load_embargo",
    "read_store",
]
