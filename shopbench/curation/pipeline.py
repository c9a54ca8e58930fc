"""A curation run: archive in, curated set and report out, in two streaming passes.

Pass one reads every sealed shard in small batches, rebuilds each record, and appends one
ledger row per episode: its ids and true policy when known, then what each rule of the
registry reads off it, in pipeline order (a per-episode rule's reason, the columns a rule's
SQL reads: the narrator's signals, the call skeleton, the reply fingerprint, the MinHash
signature), then its weight and recovery tags. A record that does not rebuild (missing
fields, an unknown schema) is a ledger row rejected with the reason. The rules then run over
the ledger (:meth:`~shopbench.curation.ledger.Ledger.run`). Pass
two reads the shards again in the same order and copies the kept rows, untouched, into the
curated set with their weights, tags and masks. Nothing but one batch and the ledger's
bounded cache is in memory at any time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from shopbench.archive.errors import SinkError
from shopbench.archive.layout import RECORD_COLUMNS, record_of, table_rows, validate_record
from shopbench.archive.remote import ArchiveSource
from shopbench.archive.signing import Verifier
from shopbench.curation.card import shard_check, write_curated_card
from shopbench.curation.config import CurateConfig
from shopbench.curation.contamination import TestSet
from shopbench.curation.curated import CuratedWriter, check_unwritten
from shopbench.curation.errors import CurationError, EmptyResult
from shopbench.curation.features import episode_facts
from shopbench.curation.heap import settled_heap
from shopbench.curation.ledger import Ledger
from shopbench.curation.recovery import recovery_mask, recovery_segments, recovery_tags
from shopbench.curation.registry import Episode
from shopbench.curation.report import CurationReport, build_report, write_report
from shopbench.curation.source import (
    ArchiveShards,
    Shard,
    iter_batches,
    list_shards,
    local_archive,
)
from shopbench.curation.truth import Truth
from shopbench.records.trajectory import Trajectory

WORK_DIR = "_work"
PULLED_DIR = "_archive"


class Curator:
    """Turns trajectories into ledger rows under one config: each rule of the registry, in
    pipeline order, reads each episode (see :mod:`shopbench.curation.registry`)."""

    def __init__(self, cfg: CurateConfig, verifier: Verifier | None, truth: Truth | None) -> None:
        self.cfg = cfg
        self.verifier = verifier
        self.plan = cfg.plan()
        gate = next((r for r, _ in self.plan if r.gate), None)
        self._gate = gate.column if gate is not None else None
        # Each rule's state for the run (the test sets), loaded before any work.
        self.state = {r.name: r.prepare(p) for r, p in self.plan if r.prepare is not None}
        self.labels = truth.lookup() if truth is not None else {}

    @property
    def test_sets(self) -> list[TestSet]:
        """The contamination rule's test sets (none when it is off)."""
        return list(self.state.get("contamination", []))

    def _label(self, hotkey: str | None) -> tuple[str | None, bool | None]:
        return self.labels.get(hotkey or "", (None, None))

    def rejected_row(self, seq: int, raw: dict[str, Any], reason: str) -> dict[str, Any]:
        """The ledger row of a record that did not rebuild as a trajectory (rejected by the
        gate, with `reason`)."""
        hotkey = raw.get("miner_hotkey")
        policy, honest = self._label(hotkey)
        row: dict[str, Any] = {
            "seq": seq, "episode_id": raw.get("episode_id"),
            "miner": hotkey or f"uid:{raw.get('miner_uid')}", "uid": raw.get("miner_uid"),
            "task_id": raw.get("task_id"), "intent": raw.get("intent"),
            "policy": policy, "honest": honest, "weight": 1.0, "tags": [],
        }  # fmt: skip
        if self._gate is not None:
            row[self._gate] = reason
        return row

    def row(
        self, seq: int, t: Trajectory, shard_signer: str | None = None,
        record: dict[str, Any] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """The ledger row of one trajectory (`shard_signer`: its shard's verified signer;
        `record`: the plain dict it was validated from)."""
        facts = episode_facts(t)
        policy, honest = self._label(t.miner_hotkey)
        row: dict[str, Any] = {
            "seq": seq, "episode_id": t.episode_id,
            "miner": t.miner_hotkey or f"uid:{t.miner_uid}", "uid": t.miner_uid,
            "block": t.block, "task_id": t.task_id, "cluster": t.cluster,
            "intent": str(t.intent), "score": t.score, "success": t.outcome.success,
            "failure": t.diagnosis.kind, "turns": t.turns, "started": t.timings.started_at,
            "policy": policy, "honest": honest, "weight": 1.0, "tags": [],
        }  # fmt: skip
        ep = Episode(t, facts, self.verifier, shard_signer, record, self.state)
        weight = 1.0
        for rule, params in self.plan:
            if rule.decide is not None:
                reason = rule.decide(ep, params)
                row[str(rule.column)] = reason
                if reason is not None and rule.gate:
                    return row  # no later rule reads what the gate rejected
            if rule.features is not None:
                row.update(rule.features(ep, params))
            if rule.weight is not None and params.enabled:
                weight *= rule.weight(ep, params)
        segments = recovery_segments(facts, t.outcome.success)
        if segments:
            weight *= self.cfg.recovery.weight
        row["weight"] = round(weight, 6)
        row["tags"] = recovery_tags(segments)
        if self.cfg.recovery.mask_errors:
            row["mask"] = recovery_mask(segments, facts.assistant_turns)
        return row

    def rows(
        self, first_seq: int, table: pa.Table, shard_signer: str | None = None
    ) -> list[dict[str, Any]]:
        """The ledger rows of one batch of archive rows, numbered from `first_seq`. Each
        record is rebuilt, judged and let go before the next (a batch of live trajectories
        would make every garbage collection walk them)."""
        out = []
        for i, raw in enumerate(table_rows(table)):
            try:
                record = record_of(raw)
                t = validate_record(record)
            except SinkError as e:
                out.append(self.rejected_row(first_seq + i, raw, f"invalid ({e})"))
                continue
            out.append(self.row(first_seq + i, t, shard_signer, record))
        return out


def _copy_kept(shards: list[Shard], ledger: Ledger, writer: CuratedWriter) -> None:
    """Pass two: the kept rows of the shards, read in pass one's order, into `writer`."""
    kept = ledger.iter_kept()
    pending = next(kept, None)
    seq = 0
    for _, table in iter_batches(shards):
        end = seq + table.num_rows
        rows = []
        while pending is not None and pending[0] < end:
            rows.append(pending)
            pending = next(kept, None)
        if rows:
            writer.write(
                table.take([s - seq for s, _, _, _ in rows]), [w for _, w, _, _ in rows],
                [list(g or []) for _, _, g, _ in rows], [m for _, _, _, m in rows],
            )  # fmt: skip
        seq = end


def curate(
    archive: ArchiveSource | str | Path,
    out: Path,
    cfg: CurateConfig,
    *,
    verifier: Verifier | None,
    truth: Truth | None = None,
    memory_limit: str = "512MB",
    progress: Callable[[int], None] | None = None,
) -> CurationReport:
    """Curate `archive` (an :class:`ArchiveSource`: a folder or URL and the validator its
    shards must carry; a bare folder or URL names no validator) into `out` (``data/``,
    ``report.json``, ``report.md``); the report. EmptyResult (after writing the report)
    when nothing is kept; CurationError for a config, archive, truth or test set that
    cannot be used."""
    source = archive if isinstance(archive, ArchiveSource) else ArchiveSource(
        location=str(archive)
    )  # fmt: skip
    validator = source.validator
    out = Path(out)
    check_unwritten(out)
    curator = Curator(cfg, verifier, truth)  # test sets load before any work
    root, missing = local_archive(source, out / PULLED_DIR, verifier=verifier)
    checking = verifier if cfg.validity.verify_signatures or validator else None
    listed = list_shards(root, checking, validator)
    listed.refused.update(missing)
    ledger = Ledger(out / WORK_DIR, [r for r, _ in curator.plan], memory_limit=memory_limit)
    try:
        with settled_heap():
            report = _run(curator, listed, ledger, cfg, out, source.location, truth, progress)
    finally:
        ledger.close()
    write_curated_card(out, report, listed, shard_check(checking, validator))
    return report


def _run(
    curator: Curator, listed: ArchiveShards, ledger: Ledger, cfg: CurateConfig, out: Path,
    archive: str, truth: Truth | None, progress: Callable[[int], None] | None,
) -> CurationReport:  # fmt: skip
    """Both passes and the report of :func:`curate`."""
    seq = 0
    for shard, table in iter_batches(listed.shards, columns=RECORD_COLUMNS):
        ledger.append(curator.rows(seq, table, shard.signer))
        seq += table.num_rows
        if progress is not None:
            progress(table.num_rows)
    ledger.run(curator.plan)
    report = build_report(
        ledger, cfg, listed.refused, truth=truth, archive=archive,
        test_set_sizes={ts.name: ts.size for ts in curator.test_sets},
        test_set_digests={ts.name: ts.sha256 for ts in curator.test_sets},
    )  # fmt: skip
    if report.kept == 0:
        write_report(report, out)
        raise EmptyResult(
            f"nothing kept of {report.episodes_in} episodes (see {out / 'report.md'} "
            "for what each rule dropped)"
        )
    writer = CuratedWriter(out)
    try:
        _copy_kept(listed.shards, ledger, writer)
    finally:
        files = writer.close()
    if writer.rows != report.kept:
        raise CurationError(
            f"the archive changed while curating ({writer.rows} rows written, "
            f"{report.kept} decided)"
        )
    report = report.model_copy(update={"files": [str(f) for f in files]})
    write_report(report, out)
    return report
