"""The ledger: one small row per episode, on disk, where every drop is decided and counted.

The first pass over the archive appends each episode's summary (its ids and, per rule of
the registry, the rule's reason column and its other columns: the narrator's signals, the
call skeleton, the reply fingerprint, the decision key, whether its claims are refuted, the
MinHash signature; then the weight and the recovery tags) to a DuckDB table in a file under
the output folder; the rules then run over it in pipeline order, each charging its drops to
itself with a reason. DuckDB spills to disk under its memory limit, so memory stays flat
however large the archive. The second pass reads the kept rows back in archive order.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from shopbench.curation.errors import CurationError
from shopbench.curation.registry import LIVE, Rule, RuleParams

BASE_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("seq", pa.int64()),
    ("episode_id", pa.string()),
    ("miner", pa.string()),
    ("uid", pa.int64()),
    ("block", pa.int64()),
    ("task_id", pa.string()),
    ("cluster", pa.string()),
    ("intent", pa.string()),
    ("score", pa.float64()),
    ("success", pa.bool_()),
    ("failure", pa.string()),
    ("turns", pa.int64()),
    ("started", pa.float64()),
    ("policy", pa.string()),
    ("honest", pa.bool_()),
)  # fmt: skip
"""What every episode's row holds, whatever the rules."""

OUTCOME_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("weight", pa.float64()),
    ("tags", pa.list_(pa.string())),
    ("mask", pa.list_(pa.bool_())),
    ("drop_rule", pa.string()),
    ("drop_reason", pa.string()),
)  # fmt: skip
"""What the run decides: the weight, tags and turn mask of a kept episode, or the rule
that dropped it and why."""


def ledger_schema(rules: Iterable[Rule[Any]]) -> pa.Schema:
    """The ledger's columns: the base, each rule's in pipeline order, then the outcome's;
    CurationError when a rule's column is one of the base's."""
    fields = list(BASE_COLUMNS)
    reserved = {name for name, _ in (*BASE_COLUMNS, *OUTCOME_COLUMNS)}
    for rule in rules:
        for name, kind in rule.ledger_columns.items():
            if name in reserved:
                raise CurationError(f"rule {rule.name}: ledger column {name!r} is reserved")
            fields.append((name, kind))
    return pa.schema([*fields, *OUTCOME_COLUMNS])


class Ledger:
    """The per-episode table of one curation run (a DuckDB file in `work`), laid out for
    `rules` (:func:`ledger_schema`)."""

    def __init__(
        self, work: Path, rules: Iterable[Rule[Any]], *, memory_limit: str = "512MB"
    ) -> None:
        import duckdb

        rules = list(rules)
        self.schema = ledger_schema(rules)
        gate = next((r for r in rules if r.gate), None)
        self._valid = f"{gate.column} IS NULL" if gate is not None else "TRUE"
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.path = work / "ledger.duckdb"
        self.path.unlink(missing_ok=True)
        self.db = duckdb.connect(str(self.path))
        self.db.execute(f"SET memory_limit = '{memory_limit}'")
        self.db.execute("SET threads = 1")
        spill = str(work / "spill").replace("'", "''")
        self.db.execute(f"SET temp_directory = '{spill}'")
        self.db.execute("SET preserve_insertion_order = true")
        self._created = False

    def close(self) -> None:
        """Close the database and remove its folder."""
        self.db.close()
        shutil.rmtree(self.work, ignore_errors=True)

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append episode rows (dicts of :attr:`schema`'s fields; a field left out is null)."""
        if rows:
            self.append_table(pa.Table.from_pylist(rows, schema=self.schema))

    def append_table(self, table: pa.Table) -> None:
        """Append a table of episode rows with exactly :attr:`schema`'s columns (as
        :meth:`~shopbench.curation.curator.Curator.table` makes them, in any process).
        CurationError for a table of other columns."""
        if table.num_rows == 0:
            return
        if not table.schema.equals(self.schema, check_metadata=False):
            raise CurationError("ledger rows of another layout (another rule set or version)")
        batch = table  # noqa: F841 (read by DuckDB)
        if not self._created:
            self.db.execute("CREATE TABLE ep AS SELECT * FROM batch")
            self._created = True
        else:
            self.db.execute("INSERT INTO ep SELECT * FROM batch")

    @property
    def empty(self) -> bool:
        """Whether no episode was appended."""
        return not self._created

    @property
    def valid(self) -> str:
        """The condition for an episode the gate let through."""
        return self._valid

    # -- what a rule's SQL may do (registry.LedgerOps) --------------------------------------

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        """Run statements over the ledger."""
        self.db.execute(sql, params or [])

    def load(self, name: str, table: pa.Table) -> None:
        """(Re)create the temporary table `name` holding `table`'s rows."""
        self.db.register("_loaded", table)
        try:
            self.db.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _loaded")
        finally:
            self.db.unregister("_loaded")

    def drop(self, rule: str, where: str, reason: str, params: list[Any] | None = None) -> None:
        """Drop the live episodes where `where` holds, `reason` (SQL) saying why."""
        self.db.execute(
            f"UPDATE ep SET drop_rule = '{rule}', drop_reason = {reason} "
            f"WHERE {LIVE} AND ({where})",
            params or [],
        )

    def drop_from(self, rule: str, table: str) -> None:
        """Drop the live episodes listed in `table` (columns seq, why)."""
        self.db.execute(
            f"UPDATE ep SET drop_rule = '{rule}', drop_reason = t.why FROM {table} t "
            f"WHERE ep.seq = t.seq AND ep.{LIVE}"
        )

    # -- the pipeline ----------------------------------------------------------------------

    def run(self, plan: Iterable[tuple[Rule[Any], RuleParams]]) -> None:
        """Apply every rule of `plan` (rules with their parameters) in pipeline order: its
        SQL flags, the drop of the episodes its reason column names (when it is on, or is
        the gate), then its SQL drops (when it is on)."""
        if self.empty:
            return
        for rule, params in plan:
            if rule.flag is not None:
                rule.flag(self, params)
            if rule.column is not None and (params.enabled or rule.gate):
                self.drop(rule.name, f"{rule.column} IS NOT NULL", rule.column)
            if rule.drop is not None and params.enabled:
                rule.drop(self, params)

    # -- reading it back -------------------------------------------------------------------

    def kept_count(self) -> int:
        """Episodes still kept."""
        if self.empty:
            return 0
        return int(self.db.execute(f"SELECT count(*) FROM ep WHERE {LIVE}").fetchone()[0])

    def iter_kept(self, chunk: int = 2048) -> Iterator[tuple[int, float, list[str], Any]]:
        """(seq, weight, tags, mask) of every kept episode, in seq order, `chunk` at a time."""
        if self.empty:
            return
        cursor = self.db.cursor()
        try:
            cursor.execute(f"SELECT seq, weight, tags, mask FROM ep WHERE {LIVE} ORDER BY seq")
            while rows := cursor.fetchmany(chunk):
                yield from rows
        finally:
            cursor.close()

    def rows(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows of a query over the ledger's ``ep`` table."""
        try:
            return self.db.execute(sql, params or []).fetchall()
        except Exception as e:  # duckdb's errors share no base class worth naming here
            raise CurationError(f"ledger query failed: {e}") from None
