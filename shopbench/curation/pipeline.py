"""A curation run: archive in, curated set and report out, in two streaming passes.

Pass one reads every sealed shard in small batches, rebuilds each record, and appends one
ledger row per episode (what each per-episode rule says, the narrator's signals, the call
skeleton, the reply fingerprint, the MinHash signature, recovery tags, the true policy when
known). A record that does not rebuild (missing fields, an unknown schema) is a ledger row
rejected with the reason. The rules that compare episodes then run over the ledger. Pass
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
from shopbench.curation.features import EpisodeFacts, content_words, decision_key, episode_facts
from shopbench.curation.heap import settled_heap
from shopbench.curation.ledger import Ledger
from shopbench.curation.recovery import recovery_mask, recovery_segments, recovery_tags
from shopbench.curation.report import CurationReport, build_report, write_report
from shopbench.curation.rules import (
    claimed,
    judge_reason,
    judge_weight,
    loop_reason,
    narrator_parts,
    outcome_reason,
    refuted_reason,
    validity_reason,
)
from shopbench.curation.similarity import minhash_words
from shopbench.curation.source import (
    ArchiveShards,
    Shard,
    iter_batches,
    list_shards,
    local_archive,
)
from shopbench.curation.truth import Truth
from shopbench.records.decisions import episode_decisions
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.copies import TaskDecisions

WORK_DIR = "_work"
PULLED_DIR = "_archive"


class Curator:
    """Turns trajectories into ledger rows under one config."""

    def __init__(self, cfg: CurateConfig, verifier: Verifier | None, truth: Truth | None) -> None:
        self.cfg = cfg
        self.verifier = verifier
        c = cfg.contamination
        self.test_sets = [TestSet.load(p, c) for p in c.test_sets] if c.enabled else []
        self.labels = truth.lookup() if truth is not None else {}

    def _decision(self, t: Trajectory, facts: EpisodeFacts) -> dict[str, Any]:
        """The ledger's decision columns: with ``compare = "decisions"`` the core of the
        episode's decisions and its searches' digests (compared by containment), else the
        exact key of the mode and no searches."""
        compare = self.cfg.duplicates.compare
        if compare != "decisions":
            return {"decision": decision_key(facts, compare), "searches": []}
        d = TaskDecisions.of(episode_decisions(t))
        return {"decision": d.core, "searches": d.searches}

    def _label(self, hotkey: str | None) -> tuple[str | None, bool | None]:
        return self.labels.get(hotkey or "", (None, None))

    def rejected_row(self, seq: int, raw: dict[str, Any], reason: str) -> dict[str, Any]:
        """The ledger row of a record that did not rebuild as a trajectory."""
        hotkey = raw.get("miner_hotkey")
        policy, honest = self._label(hotkey)
        return {
            "seq": seq, "episode_id": raw.get("episode_id"), "r_validity": reason,
            "miner": hotkey or f"uid:{raw.get('miner_uid')}", "uid": raw.get("miner_uid"),
            "task_id": raw.get("task_id"), "intent": raw.get("intent"),
            "policy": policy, "honest": honest, "weight": 1.0, "tags": [],
        }  # fmt: skip

    def row(
        self, seq: int, t: Trajectory, shard_signer: str | None = None,
        record: dict[str, Any] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """The ledger row of one trajectory (`shard_signer`: its shard's verified signer;
        `record`: the plain dict it was validated from)."""
        cfg = self.cfg
        facts = episode_facts(t)
        policy, honest = self._label(t.miner_hotkey)
        base = {
            "seq": seq, "episode_id": t.episode_id,
            "miner": t.miner_hotkey or f"uid:{t.miner_uid}", "uid": t.miner_uid,
            "block": t.block, "task_id": t.task_id, "cluster": t.cluster,
            "intent": str(t.intent), "score": t.score, "success": t.outcome.success,
            "failure": t.diagnosis.kind, "turns": t.turns, "policy": policy, "honest": honest,
            "weight": 1.0, "tags": [],
            "fingerprint": facts.reply_fingerprint,
            **self._decision(t, facts),
            "started": t.timings.started_at,
        }  # fmt: skip
        invalid = (
            validity_reason(t, facts, cfg.validity, self.verifier, shard_signer, record)
            if (cfg.validity.enabled)
            else None
        )
        if invalid is not None:
            return base | {"r_validity": invalid}
        contaminated = []
        worst: tuple[float, str] = (0.0, "")
        for ts in self.test_sets:
            match = ts.match(t.query)
            if match is not None:
                contaminated.append(ts.name)
                share = max(match.contained, match.covered)
                worst = max(worst, (share, f"{ts.name} ({match.reason()})"))
        parts = narrator_parts(facts, cfg.narrator)
        segments = recovery_segments(facts, t.outcome.success)
        weight = judge_weight(t, cfg.judge) if cfg.judge.enabled else 1.0
        if segments:
            weight *= cfg.recovery.weight
        return base | {
            "r_contamination": (
                f"query overlaps test set {worst[1]}" if contaminated else None
            ),
            "contaminated_by": contaminated,
            "r_outcome": outcome_reason(t, cfg.outcome),
            "r_judge": judge_reason(t, cfg.judge),
            "r_loops": loop_reason(facts, cfg.structure),
            "claimed": claimed(facts),
            "refuted": refuted_reason(facts, cfg.claims),
            "narrator_base": sum(parts.values()),
            "narrator_why": ", ".join(f"{k} {v:.2f}" for k, v in parts.items()),
            "skeleton": facts.skeleton,
            "sig": (
                minhash_words(content_words(facts), cfg.dedup.shingle, cfg.dedup.permutations)
                if cfg.dedup.enabled else None
            ),
            "weight": round(weight, 6),
            "tags": recovery_tags(segments),
            "mask": (
                recovery_mask(segments, facts.assistant_turns)
                if cfg.recovery.mask_errors else None
            ),
        }  # fmt: skip

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
    ledger = Ledger(out / WORK_DIR, memory_limit=memory_limit)
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
    ledger.run(cfg)
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
