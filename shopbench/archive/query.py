"""Queries over the archive's shards: DuckDB on hive-partitioned Parquet, returning Arrow.

What a query reads is decided before DuckDB sees a file: only shards that a manifest under
``_manifests/`` lists (a shard whose manifest is not yet written is still being sealed, and
``_quarantine/`` is never listed), pruned by the partition in their path (validator, date,
intent), and — when a verifier is given — only those whose manifest signature verifies.
The store's embargo then drops the episodes of the rotation bucket still being asked,
unless the store was opened with the embargo lifted. The remaining filters become one
parameterised ``WHERE`` over the scalar columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from shopbench.archive.errors import FilterError, QueryError, SinkError
from shopbench.archive.filters import TraceFilter
from shopbench.archive.reader import ShardRef, Trust, list_archive
from shopbench.archive.signing import Verifier

SUMMARY_COLUMNS: tuple[str, ...] = (
    "episode_id", "validator_hotkey", "block", "epoch", "intent", "miner_uid", "agent",
    "success", "rule_score", "judge_score", "score", "turns", "tool_calls", "termination",
)  # fmt: skip
"""The scalar columns a table listing shows."""

_RANGES: tuple[tuple[str, str, str], ...] = (
    ("block_min", "block", ">="), ("block_max", "block", "<="),
    ("epoch_min", "epoch", ">="), ("epoch_max", "epoch", "<="),
    ("score_min", "score", ">="), ("score_max", "score", "<="),
    ("rule_score_min", "rule_score", ">="), ("rule_score_max", "rule_score", "<="),
    ("judge_score_min", "judge_score", ">="), ("judge_score_max", "judge_score", "<="),
)  # fmt: skip
_LISTS: tuple[tuple[str, str], ...] = (
    ("intent", "intent"), ("cluster", "cluster"), ("miner_uid", "miner_uid"),
    ("miner_hotkey", "miner_hotkey"), ("validator", "validator_hotkey"), ("agent", "agent"),
    ("judge_id", "judge_id"), ("termination", "termination"), ("failure", "failure"),
    ("failure_constraint", "failure_constraint"), ("episode_id", "episode_id"),
)  # fmt: skip


def sealed_shards(
    root: str | Path,
    *,
    verifier: Verifier | None = None,
    validator: str | None = None,
    trust: Trust | None = None,
) -> list[ShardRef]:
    """The shards under `root` that a manifest lists and whose file exists with the size the
    manifest states, in path order (``_quarantine/`` and shards still being sealed, which no
    manifest lists yet, are never among them): :func:`~shopbench.archive.reader.list_archive`
    without what it dropped.

    With `trust` (or `verifier` and `validator`), only that validator's verified shards, their
    bytes checked; with `verifier` alone, a manifest whose signature does not verify by its
    own signer is left out. QueryError names a manifest that does not parse or that points
    outside the partition tree.
    """
    if trust is None and verifier is not None and validator is not None:
        trust = Trust(validator=validator, verifier=verifier)
    try:
        listing = list_archive(root, trust=trust, verifier=verifier)
    except SinkError as e:
        raise QueryError(str(e)) from None
    bad = next((d for d in listing.dropped if d.unreadable), None)
    if bad is not None:
        raise QueryError(f"{bad.path}: {bad.reason}")
    return listing.shards


def _prune(refs: Sequence[ShardRef], f: TraceFilter) -> list[ShardRef]:
    """The shards whose partition can hold a matching row."""
    first = f.since.astimezone(UTC).date() if f.since else None
    last = (f.until.astimezone(UTC) - timedelta(microseconds=1)).date() if f.until else None
    kept = []
    for ref in refs:
        p = ref.partition()
        if f.intent is not None and p.get("intent") not in f.intent:
            continue
        if f.validator is not None and p.get("validator") not in f.validator:
            continue
        day = p.get("date")
        if day and (first or last):
            d = datetime.strptime(day, "%Y-%m-%d").date()
            if (first and d < first) or (last and d > last):
                continue
        bmin, bmax = ref.manifest.block_min, ref.manifest.block_max
        if f.block_min is not None and bmax is not None and bmax < f.block_min:
            continue
        if f.block_max is not None and bmin is not None and bmin > f.block_max:
            continue
        kept.append(ref)
    return kept


def where_clause(f: TraceFilter) -> tuple[str, list[Any]]:
    """The filter as a DuckDB ``WHERE`` body with ``?`` parameters (``TRUE`` for none)."""
    terms: list[str] = []
    params: list[Any] = []
    for field, column, op in _RANGES:
        value = getattr(f, field)
        if value is not None:
            terms.append(f'"{column}" {op} ?')
            params.append(value)
    for field, column in _LISTS:
        values = getattr(f, field)
        if values is not None and not values:
            terms.append("FALSE")  # none of no values: `IN ()` is no SQL
        elif values is not None:
            terms.append(f'"{column}" IN ({", ".join("?" for _ in values)})')
            params.extend(str(v) if column != "miner_uid" else v for v in values)
    if f.success is not None:
        terms.append('"success" = ?')
        params.append(f.success)
    if f.since is not None:
        terms.append('"started_at" >= ?')
        params.append(f.since)
    if f.until is not None:
        terms.append('"started_at" < ?')
        params.append(f.until)
    if f.text is not None:
        # the user query, or the reasoning of a turn (only assistant turns carry any): reading
        # that one leaf of the messages, not their content with every tool result, is what
        # keeps the scan cheap. LIKE's wildcards in the text are literal.
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", f.text) + "%"
        terms.append(
            "(\"query\" ILIKE ? ESCAPE '\\' OR len(list_filter(\"messages\", lambda m: "
            "m.reasoning_content ILIKE ? ESCAPE '\\')) > 0)"
        )
        params.extend((pattern, pattern))
    if f.slow_turn_ms is not None:
        terms.append(
            "coalesce(list_max(CAST(json_extract(\"timings_json\", '$.turns[*].policy_ms') "
            "AS DOUBLE[])), 0) >= ?"
        )
        params.append(f.slow_turn_ms)
    if f.tool_error is not None:
        marks = ", ".join("?" for _ in f.tool_error)
        terms.append(f'len(list_filter("tool_log", lambda e: e.error IN ({marks}))) > 0')
        params.extend(f.tool_error)
    if f.gate_failed is not None:
        ors = " OR ".join(
            "json_extract_string(\"judge_json\", ?) = 'false'" for _ in f.gate_failed
        )
        terms.append(f"({ors})")
        params.extend(f'$.gates."{g}"' for g in f.gate_failed)
    return (" AND ".join(terms) or "TRUE"), params


class Cursor(BaseModel):
    """Where a page of results ended, in the query's order (block, nulls first; episode id):
    the next page starts after it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    block: int | None
    episode_id: str


ORDER_BY = "block NULLS FIRST, episode_id"
"""The order every query returns its rows in; :class:`Cursor` follows it."""


def after_clause(cursor: Cursor) -> tuple[str, list[Any]]:
    """The rows after `cursor` in :data:`ORDER_BY`, as a condition with parameters."""
    key = -1 if cursor.block is None else cursor.block  # blocks are >= 0; null sorts first
    return (
        '(coalesce("block", -1) > ? OR (coalesce("block", -1) = ? AND "episode_id" > ?))',
        [key, key, cursor.episode_id],
    )


def scan(
    refs: Sequence[ShardRef],
    filters: TraceFilter | None = None,
    *,
    embargo: EmbargoView | None = None,
    after: Cursor | None = None,
) -> tuple[str, list[Any]] | None:
    """``FROM read_parquet(…) WHERE …`` over `refs` (pruned by `filters`) with `filters`,
    the `embargo` and the rows `after` a cursor applied, and its parameters; the one source
    every reader of the shards (queries, the API's pages, counts) builds its SQL on.
    None when no shard can hold a matching row."""
    f = filters or TraceFilter()
    kept = _prune(refs, f)
    if not kept:
        return None
    where, params = where_clause(f)
    if embargo is not None:
        extra, extra_params = embargo.sql()
        where = f"({where}) AND ({extra})"
        params.extend(extra_params)
    if after is not None:
        extra, extra_params = after_clause(after)
        where = f"({where}) AND {extra}"
        params.extend(extra_params)
    from shopbench.archive.layout import scan_source_sql

    files = [r.file for r in kept]
    source = scan_source_sql()
    return f"FROM {source} WHERE {where}", [files, *params]


def query(
    root: str | Path,
    filters: TraceFilter | None = None,
    *,
    columns: Sequence[str] | None = None,
    embargo: EmbargoView | None = None,
    verifier: Verifier | None = None,
    validator: str | None = None,
    threads: int = 2,
    shards: Sequence[ShardRef] | None = None,
    after: Cursor | None = None,
    connection: Any = None,
) -> pa.Table:
    """The archived episodes under `root` matching `filters`, as an Arrow table of the shard
    layout's columns (or only `columns`), ordered by block then episode id.

    `embargo` is the store's view of which rotation buckets are still live; the caller that
    opened the store passes it (``ArchiveStore.embargo_view()``), and an episode of a live
    bucket is left out unless the view has the embargo lifted. `verifier` leaves out the
    shards whose manifest signature does not verify (by `validator` when given, else by
    the manifest's own signer). `shards` are the sealed shards to read, when the caller
    listed them already (:func:`sealed_shards`); `after` starts after a cursor;
    `connection` is a DuckDB connection to run on (a fresh one when None). FilterError for
    an unknown column or a filter the shards cannot answer; QueryError when the archive
    cannot be read.
    """
    import duckdb

    from shopbench.archive.layout import SCHEMA

    unknown = [c for c in columns or () if c not in SCHEMA.names]
    if unknown:
        raise FilterError(f"unknown column {unknown[0]!r} (columns: {', '.join(SCHEMA.names)})")
    f = filters or TraceFilter()
    if shards is None:
        shards = sealed_shards(root, verifier=verifier, validator=validator)
    scanned = scan(shards, f, embargo=embargo, after=after)
    if scanned is None:
        return _empty(columns)
    source, params = scanned
    select = ", ".join(f'"{c}"' for c in columns) if columns else "*"
    sql = f"SELECT {select} {source} ORDER BY {ORDER_BY}"
    if f.limit is not None:
        sql += f" LIMIT {int(f.limit)}"
    con = connection.cursor() if connection is not None else duckdb.connect()
    try:
        if connection is None:
            con.execute(f"SET threads TO {int(threads)}")
        return con.sql(sql, params=params).to_arrow_table()
    except duckdb.BinderException as e:
        raise FilterError(f"a filter names a column the shards lack ({e})") from None
    except duckdb.Error as e:
        raise QueryError(f"{root}: query failed ({e})") from None
    finally:
        con.close()


def _empty(columns: Sequence[str] | None) -> pa.Table:
    from shopbench.archive.layout import SCHEMA

    schema = SCHEMA if not columns else pa.schema([SCHEMA.field(c) for c in columns])
    return schema.empty_table()


class EmbargoView(BaseModel):
    """Which rotation buckets a public read must leave out: those still live.

    ``live`` maps an epoch to the bucket current in it; an episode is embargoed when its
    ``(epoch, bucket)`` is one of them. ``lifted`` (the arena's public seed) reads all.
    """

    model_config = ConfigDict(frozen=True)

    live: dict[int, int] = {}
    lifted: bool = False

    def sql(self) -> tuple[str, list[Any]]:
        """The embargo as a DuckDB condition that keeps the publishable rows."""
        if self.lifted or not self.live:
            return "TRUE", []
        pairs = " OR ".join('("epoch" = ? AND "bucket" = ?)' for _ in self.live)
        params: list[Any] = []
        for epoch, bucket in sorted(self.live.items()):
            params.extend((epoch, bucket))
        return f"NOT coalesce({pairs}, FALSE)", params
