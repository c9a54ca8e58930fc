"""Curation's engine-free stages: functions over one shard's Arrow tables that any engine runs.

A run is three steps, and only the middle one needs every episode at once:

1. **pass one**, per shard (:func:`shard_ledger`): the shard's rows, read in batches of
   :data:`~shopbench.curation.source.BATCH_ROWS`, each rebuilt and judged by the
   :class:`~shopbench.curation.curator.Curator` into a table of the ledger's columns,
   numbered from the shard's first row (:class:`ShardWork`: rows are numbered across the
   shards in path order, so every engine numbers them alike);
2. **the decisions**: the ledger's rules over every row, in pipeline order
   (:meth:`~shopbench.curation.ledger.Ledger.run`: the cross-episode rules are keyed groups
   and picks in SQL, one implementation for every engine);
3. **pass two**, per shard (:func:`shard_kept`): the shard's kept rows, untouched, with
   their weights, tags and masks (:data:`KEPT_SCHEMA`, one table per shard from
   :func:`kept_by_shard`), one curated table per batch the shard is read in.

The local engine runs the steps in its process; the Ray engine runs passes one and two on a
cluster's workers. Both read each shard in the same batches and hand the writer the same
tables, so the curated files are the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from shopbench.archive.layout import RECORD_COLUMNS, SCHEMA
from shopbench.curation.curated import with_curation
from shopbench.curation.errors import CurationError
from shopbench.curation.source import Shard, shard_batches

if TYPE_CHECKING:
    from shopbench.curation.curator import Curator

KEPT_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("weight", pa.float64()), ("tags", pa.list_(pa.string())),
    ("mask", pa.list_(pa.bool_())),
])  # fmt: skip
"""What pass two needs of each kept episode: its row number, weight, tags and turn mask."""


@dataclass(frozen=True, slots=True)
class ShardWork:
    """One shard and the number of its first row among all the shards read."""

    shard: Shard
    first_seq: int

    @property
    def end(self) -> int:
        """The number after its last row."""
        return self.first_seq + self.shard.rows


def plan_shards(shards: Sequence[Shard]) -> list[ShardWork]:
    """`shards` (in path order) with each one's first row number (rows as their verified
    manifests state them)."""
    out, seq = [], 0
    for shard in shards:
        out.append(ShardWork(shard, seq))
        seq += shard.rows
    return out


def shard_source(shard: Shard, *, check: bool) -> Path | pa.NativeFile:
    """Where to read `shard` from: its file; with `check`, its bytes read into memory and
    held to the sha256 its verified manifest states, so a worker parses exactly the bytes
    the listing verified, whatever happened to the file since (CurationError when they
    differ)."""
    if not check:
        return shard.file
    try:
        data = shard.file.read_bytes()
    except OSError as e:
        raise CurationError(f"{shard.file}: cannot read the shard ({e})") from None
    if shard.sha256 and hashlib.sha256(data).hexdigest() != shard.sha256:
        raise CurationError(
            f"{shard.rel}: the shard's bytes no longer match its verified manifest's sha256"
        )
    return pa.BufferReader(data)


def shard_ledger(curator: Curator, work: ShardWork, *, check: bool = False) -> Iterator[pa.Table]:
    """Pass one over one shard: a ledger table (the curator's columns) per batch of rows,
    numbered from `work.first_seq`; with `check`, from the bytes :func:`shard_source`
    verified. CurationError when the shard's row count is not its manifest's."""
    source = shard_source(work.shard, check=check)
    seq = work.first_seq
    for table in shard_batches(work.shard, source, columns=RECORD_COLUMNS):
        yield curator.table(seq, table, work.shard.signer)
        seq += table.num_rows
    if seq != work.end:
        raise CurationError(
            f"{work.shard.rel}: {seq - work.first_seq} rows read, its manifest says "
            f"{work.shard.rows} (the archive changed while curating)"
        )


def shard_kept(work: ShardWork, kept: pa.Table, *, check: bool = False) -> Iterator[pa.Table]:
    """Pass two over one shard: per batch of rows it is read in (as in pass one), the
    batch's rows named in `kept` (:data:`KEPT_SCHEMA`, in row order, all within the shard),
    untouched, with curation's columns appended; nothing for a batch with none kept."""
    seqs = kept.column("seq").to_pylist()
    weights = kept.column("weight").to_pylist()
    tags = [list(g or []) for g in kept.column("tags").to_pylist()]
    masks = kept.column("mask").to_pylist()
    if not seqs:
        return
    source = shard_source(work.shard, check=check)
    at, start = 0, work.first_seq
    for table in shard_batches(work.shard, source, columns=tuple(SCHEMA.names)):
        end = start + table.num_rows
        first = at
        while at < len(seqs) and seqs[at] < end:
            at += 1
        if at > first:
            rows = [s - start for s in seqs[first:at]]
            yield with_curation(
                table.take(rows), weights[first:at], tags[first:at], masks[first:at]
            )
        start = end
        if at == len(seqs):
            return


def kept_by_shard(
    kept: Iterable[tuple[int, float, list[str] | None, Any]], plan: Sequence[ShardWork]
) -> Iterator[tuple[ShardWork, pa.Table]]:
    """The kept episodes (seq, weight, tags, mask, in seq order: the ledger's
    :meth:`~shopbench.curation.ledger.Ledger.iter_kept`) grouped by the shard they are
    in, as :data:`KEPT_SCHEMA` tables; shards with none kept are left out."""
    it = iter(plan)
    work = next(it, None)
    rows: list[tuple[int, float, list[str] | None, Any]] = []
    for row in kept:
        while work is not None and row[0] >= work.end:
            if rows:
                yield work, _kept_table(rows)
                rows = []
            work = next(it, None)
        if work is None:
            raise CurationError(f"kept row {row[0]} is in no shard read")
        rows.append(row)
    if rows and work is not None:
        yield work, _kept_table(rows)


def _kept_table(rows: list[tuple[int, float, list[str] | None, Any]]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    return pa.Table.from_arrays(
        [pa.array(c, t) for c, t in zip(cols, KEPT_SCHEMA.types, strict=True)], schema=KEPT_SCHEMA
    )


def concat(tables: Iterable[pa.Table], schema: pa.Schema) -> pa.Table:
    """`tables` as one (an empty table of `schema` for none)."""
    listed = list(tables)
    return pa.concat_tables(listed) if listed else schema.empty_table()
