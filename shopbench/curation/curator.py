"""The curator: one archive record in, its ledger row out, under one config.

Each rule of the registry, in pipeline order, reads each rebuilt record (see
:mod:`shopbench.curation.registry`). A curator holds no open file and no connection: the
local engine calls it in its own process, and the Ray engine ships it (its config, the
test sets its rules loaded, the arena's labels) to every worker, so both build the same rows.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shopbench.archive.errors import SinkError
from shopbench.archive.layout import record_of, table_rows, validate_record
from shopbench.archive.signing import Verifier
from shopbench.curation.config import CurateConfig
from shopbench.curation.contamination import TestSet
from shopbench.curation.features import episode_facts
from shopbench.curation.ledger import ledger_schema
from shopbench.curation.recovery import (
    recovery_segments,
    recovery_tags,
    refused_turns,
    turn_mask,
)
from shopbench.curation.registry import Episode
from shopbench.curation.truth import Truth
from shopbench.records.trajectory import Trajectory


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
        self.schema = ledger_schema([r for r, _ in self.plan])

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
        recovery = self.cfg.recovery
        if recovery.mask_errors or recovery.mask_refused:
            wrong = {t for s in segments for t in s.wrong_turns} if recovery.mask_errors else set()
            if recovery.mask_refused:
                wrong |= refused_turns(facts)
            row["mask"] = turn_mask(wrong, facts.assistant_turns)
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

    def table(self, first_seq: int, table: pa.Table, shard_signer: str | None = None) -> pa.Table:
        """:meth:`rows` as a table of the ledger's columns (:attr:`schema`): what a pass-one
        stage hands the ledger, in its process or from a worker."""
        return pa.Table.from_pylist(self.rows(first_seq, table, shard_signer), schema=self.schema)
