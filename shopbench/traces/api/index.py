"""The service's view of one archive root: its sealed shards, its embargo, an id index.

Every read goes through the archive's own functions: the shards are those
:func:`~shopbench.archive.query.sealed_shards` lists, the embargo is the store's
(:func:`~shopbench.archive.store.load_embargo`), the filters and the embargo become SQL
through :func:`~shopbench.archive.query.scan`. On top of those the index keeps, in an
in-memory DuckDB table, each public and embargoed episode's id, task, epoch, bucket, shard
file and row, so that one episode or one task is found without scanning the shards; the
embargo is applied to that table with the same condition. The list of shards is read again
when it is older than ``refresh_s`` (a validator keeps sealing shards while it is served).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from shopbench.archive.errors import FilterError, QueryError
from shopbench.archive.filters import TraceFilter
from shopbench.archive.layout import from_table
from shopbench.archive.manifest import ShardManifest
from shopbench.archive.query import Cursor, EmbargoView, ShardRef, query, scan
from shopbench.archive.reader import Dropped, Trust, list_archive
from shopbench.archive.store import EmbargoState, load_embargo
from shopbench.records.trajectory import Trajectory

LIST_COLUMNS: tuple[str, ...] = (
    "episode_id", "task_id", "validator_hotkey", "miner_uid", "miner_hotkey", "block", "epoch",
    "intent", "split", "query", "agent", "agent_model", "success", "rule_score", "judge_score",
    "score", "turns", "tool_calls", "termination", "failure", "failure_constraint",
    "tool_errors", "started_at", "total_ms",
)  # fmt: skip
"""The columns of one row of an episode list."""
LATER_COLUMNS: tuple[str, ...] = ("failure", "failure_constraint", "tool_errors", "agent_model")
"""List columns a shard sealed before they existed lacks; an archive of only such shards
lists them as null."""
_MEMO_ENTRIES = 256
T = TypeVar("T")


class ArchiveIndex:
    """One archive root as the service reads it (thread-safe; the web server's workers
    share one)."""

    def __init__(
        self, root: str | Path, *, refresh_s: float = 5.0, threads: int = 2,
        trust: Trust | None = None,
    ) -> None:  # fmt: skip
        """`trust`: serve only that validator's verified shards (the archive's one verified
        reader, :mod:`shopbench.archive.reader`); what it leaves out is in :attr:`dropped`."""
        import duckdb

        self.root = Path(root)
        self.trust = trust
        self.dropped: list[Dropped] = []
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._con = duckdb.connect()
        self._con.execute(f"SET threads TO {int(threads)}")
        self._con.execute("SET parquet_metadata_cache = true")
        self._con.execute(
            "CREATE TABLE ids (episode_id VARCHAR, task_id VARCHAR, epoch BIGINT, "
            "bucket BIGINT, block BIGINT, miner_uid BIGINT, file VARCHAR, row BIGINT)"
        )
        self._refs: list[ShardRef] = []
        self._embargo = EmbargoState()
        self._checked = float("-inf")
        self._gates: tuple[str, list[str]] = ("", [])
        self._memo: dict[tuple[str, str], Any] = {}
        self._indexed = False
        self.refresh(force=True)

    # -- the shards ----------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> None:
        """Read the sealed shards and the embargo again if the last read is older than
        ``refresh_s`` (or `force`), indexing the shards that are new and forgetting those
        gone (quarantined)."""
        with self._lock:
            if not force and time.monotonic() - self._checked < self.refresh_s:
                return
            listing = list_archive(self.root, trust=self.trust)
            bad = next((d for d in listing.dropped if d.unreadable), None)
            if bad is not None:
                raise QueryError(f"{bad.path}: {bad.reason}")
            refs, self.dropped = listing.shards, listing.dropped
            embargo = load_embargo(self.root)
            known = {r.file for r in self._refs}
            now = {r.file for r in refs}
            gone = sorted(known - now)
            new = [r.file for r in refs if r.file not in known]
            con = self._con.cursor()
            if gone:
                con.execute("DELETE FROM ids WHERE file IN (SELECT unnest(?))", [gone])
            if new:
                con.execute(
                    "INSERT INTO ids SELECT episode_id, task_id, epoch, bucket, block, "
                    "miner_uid, filename, file_row_number FROM read_parquet(?, filename=true, "
                    "file_row_number=true, union_by_name=true)",
                    [new],
                )
            if gone or new or embargo != self._embargo:
                self._memo.clear()
            if not self._indexed:  # after the first bulk insert, then kept up by DuckDB
                con.execute("CREATE INDEX ids_episode ON ids (episode_id)")
                con.execute("CREATE INDEX ids_task ON ids (task_id)")
                self._indexed = True
            self._refs, self._embargo = refs, embargo
            self._checked = time.monotonic()

    def shards(self) -> list[ShardRef]:
        """The sealed shards (refreshed when stale)."""
        self.refresh()
        return self._refs

    @property
    def embargo(self) -> EmbargoState:
        """The store's embargo state as last read."""
        return self._embargo

    def view(self) -> EmbargoView:
        """The embargo as queries apply it."""
        return self._embargo.view()

    def manifests(self) -> list[ShardManifest]:
        """The manifests of the shards a public reader may fetch (the store's own
        :meth:`~shopbench.archive.store.EmbargoState.is_public` decision), in path order."""
        refs = self.shards()
        return [r.manifest for r in refs if self._embargo.is_public(r.manifest)]

    # -- reads ---------------------------------------------------------------------------

    def page(
        self, filters: TraceFilter, *, limit: int, after: Cursor | None = None
    ) -> tuple[list[dict[str, Any]], Cursor | None]:
        """Up to `limit` rows (:data:`LIST_COLUMNS`) matching `filters` after `after`, in the
        archive's order, and the cursor of the next page (None on the last)."""
        f = filters.model_copy(update={"limit": limit + 1})

        def read(columns: Sequence[str]) -> pa.Table:
            return query(
                self.root, f, columns=columns, embargo=self.view(), shards=self.shards(),
                after=after, connection=self._con,
            )  # fmt: skip

        try:
            table = read(LIST_COLUMNS)
        except FilterError:
            # Every shard predates the derived columns (DuckDB fills a column only when some
            # file has it). A filter on them still refuses, from this second read.
            table = read([c for c in LIST_COLUMNS if c not in LATER_COLUMNS])
            for name in LATER_COLUMNS:
                table = table.append_column(name, pa.nulls(table.num_rows))
        rows = table.to_pylist()
        more = len(rows) > limit
        rows = rows[:limit]
        for row in rows:
            row["started_at"] = row["started_at"].timestamp() if row["started_at"] else None
        nxt = Cursor(block=rows[-1]["block"], episode_id=rows[-1]["episode_id"]) if more else None
        return rows, nxt

    def tables(self, filters: TraceFilter, *, batch: int, select: str = "*") -> Iterator[pa.Table]:
        """Every matching episode as Arrow tables of the layout's columns (or of `select`, the
        service's own SQL), of at most `batch` rows, shard by shard in path order and in each
        shard in its rows' order (a bulk read needs no global sort, so memory and time stay
        linear); ``filters.limit`` caps the total."""
        left = filters.limit
        view = self.view()
        for ref in self.shards():
            if left is not None and left <= 0:
                return
            scanned = scan([ref], filters, embargo=view)
            if scanned is None:
                continue
            source, params = scanned
            sql = f"SELECT {select} {source}"
            if left is not None:
                sql += f" LIMIT {int(left)}"
            relation = self._con.cursor().sql(sql, params=params)
            # to_arrow_reader since DuckDB 1.4; fetch_record_batch before it
            read = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch
            reader = read(batch)
            for record_batch in reader:
                if record_batch.num_rows == 0:
                    continue
                if left is not None:
                    left -= record_batch.num_rows
                yield pa.Table.from_batches([record_batch])

    def trajectory(self, episode_id: str) -> Trajectory | None:
        """The episode `episode_id`, or None when it is unknown or embargoed (the two are
        not told apart)."""
        found = self._located("episode_id = ?", [episode_id])
        return found[0] if found else None

    def trajectories(self, episode_ids: Sequence[str]) -> list[Trajectory]:
        """The episodes of `episode_ids` the service serves (unknown and embargoed ones left
        out alike), in shard order: one read per shard that holds some."""
        if not episode_ids:
            return []
        return self._located("episode_id IN (SELECT unnest(?))", [list(episode_ids)])

    def served(self, episode_ids: Sequence[str]) -> set[str]:
        """Those of `episode_ids` the service serves (the embargo applied), read from the id
        index alone (no shard is opened)."""
        if not episode_ids:
            return set()
        self.refresh()
        embargo, embargo_params = self.view().sql()
        rows = (
            self._con.cursor()
            .execute(
                f"SELECT DISTINCT episode_id FROM ids WHERE episode_id IN (SELECT unnest(?)) "
                f"AND ({embargo})",
                [list(episode_ids), *embargo_params],
            )
            .fetchall()
        )
        return {str(r[0]) for r in rows}

    def task(self, task_id: str) -> list[Trajectory]:
        """Every public episode of task `task_id`, by block then miner uid."""
        found = self._located("task_id = ?", [task_id])
        return sorted(found, key=lambda t: (t.block or -1, t.miner_uid or -1, t.episode_id))

    def task_members(self, task_id: str) -> list[tuple[str, int | None]]:
        """The public episodes of task `task_id` as (episode id, miner uid), by block, miner
        uid and id, read from the id index alone (no shard is opened)."""
        self.refresh()
        embargo, embargo_params = self.view().sql()
        rows = (
            self._con.cursor()
            .execute(
                f"SELECT episode_id, miner_uid FROM ids WHERE task_id = ? AND ({embargo}) "
                "ORDER BY block NULLS FIRST, miner_uid NULLS FIRST, episode_id",
                [task_id, *embargo_params],
            )
            .fetchall()
        )
        return [(str(e), None if uid is None else int(uid)) for e, uid in rows]

    def _located(self, condition: str, params: list[Any]) -> list[Trajectory]:
        self.refresh()
        embargo, embargo_params = self.view().sql()
        rows = (
            self._con.cursor()
            .execute(
                f"SELECT file, row FROM ids WHERE {condition} AND ({embargo}) ORDER BY file, row",
                [*params, *embargo_params],
            )
            .fetchall()
        )
        by_file: dict[str, list[int]] = {}
        for file, row in rows:
            by_file.setdefault(file, []).append(row)
        out: list[Trajectory] = []
        for file, wanted in by_file.items():
            out.extend(from_table(self._rows(file, wanted)))
        return out

    def _rows(self, file: str, rows: Sequence[int]) -> pa.Table:
        """Rows `rows` of shard `file`. DuckDB pushes the row-number condition into the
        Parquet scan and decodes only the vectors that hold them."""
        marks = ", ".join("?" for _ in rows)
        return (
            self._con.cursor()
            .sql(
                "SELECT * EXCLUDE (file_row_number) FROM read_parquet(?, file_row_number=true) "
                f"WHERE file_row_number IN ({marks}) ORDER BY file_row_number",
                params=[file, *rows],
            )
            .to_arrow_table()
        )

    def memo(self, name: str, filters: TraceFilter, compute: Callable[[], T]) -> T:
        """`compute()`, kept until the shards or the embargo change (aggregates over the
        whole archive — the leaderboard, the counts — are asked for on every page). The
        entry is keyed on `name` and the filter's canonical :meth:`~TraceFilter.key`, which
        no other filter shares, so one client's filter can never answer for another's."""
        self.refresh()
        key = (name, filters.key())
        with self._lock:
            if key in self._memo:
                return self._memo[key]  # type: ignore[no-any-return]
        value = compute()
        with self._lock:
            if len(self._memo) >= _MEMO_ENTRIES:
                self._memo.pop(next(iter(self._memo)))
            self._memo[key] = value
        return value

    def failure_constraints(self) -> list[str]:
        """The diagnoses' failing constraints the public episodes name, sorted (kept until
        the shards or the embargo change; none when every shard predates the column)."""
        import duckdb

        def distinct() -> list[str]:
            try:
                rows = self.sql("DISTINCT failure_constraint", TraceFilter(),
                                tail="AND failure_constraint IS NOT NULL")  # fmt: skip
            except duckdb.BinderException:
                return []
            return sorted(str(r[0]) for r in rows)

        return self.memo("failure_constraints", TraceFilter(), distinct)

    def gate_names(self) -> list[str]:
        """The judge gates the newest shard's episodes were judged on (for the gate filter's
        choices; a sample, so it stays cheap on a large archive)."""
        refs = self.shards()
        if not refs:
            return []
        newest = max(refs, key=lambda r: r.manifest.created_at)
        if self._gates[0] != newest.file:
            rows = (
                self._con.cursor()
                .execute(
                    "SELECT DISTINCT unnest(json_keys(judge_json, '$.gates')) FROM (SELECT "
                    "judge_json FROM read_parquet(?) WHERE judge_json IS NOT NULL LIMIT 256)",
                    [newest.file],
                )
                .fetchall()
            )
            self._gates = (newest.file, sorted(str(r[0]) for r in rows))
        return self._gates[1]

    def sql(
        self, select: str, filters: TraceFilter, *, tail: str = "", outer: str | None = None
    ) -> list[tuple[Any, ...]]:
        """``SELECT <select> FROM <the matching episodes> <tail>`` (more WHERE terms, GROUP
        BY, ORDER BY), the embargo applied, wrapped in `outer` (``{inner}`` marks where)
        when given; no rows when no shard can match. Every argument but `filters` is the
        service's own SQL, never a client's."""
        scanned = scan(self.shards(), filters, embargo=self.view())
        if scanned is None:
            return []
        source, params = scanned
        sql = f"SELECT {select} {source} {tail}"
        if outer is not None:
            sql = outer.replace("{inner}", sql)
        return self._con.cursor().execute(sql, params).fetchall()
