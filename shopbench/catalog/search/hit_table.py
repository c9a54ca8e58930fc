"""The hit table: what a search result shows of each product, by row, memory-mapped.

Reading a search hit's fields from the engine's document store means decompressing a block
per hit (about 20 µs each): a millisecond for a 50-hit window, a third of a typical search,
spent in Python where threads cannot share it. So the fields a hit shows live in one Arrow
record batch, one row per product in the order the products were added, read zero-copy
from a memory-mapped file that every process opening the index shares.

While building, added rows go to a pending Arrow stream; each commit folds it into the
single-batch ``hits.arrow`` (rewritten atomically), so the file always matches the
committed documents.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from shopbench.catalog.errors import CatalogError
from shopbench.catalog.search.fields import service_bits

HITS_FILE = "hits.arrow"
_PENDING = "hits.pending.arrows"

SCHEMA = pa.schema(
    [
        ("product_id", pa.large_string()),
        ("shop_id", pa.large_string()),
        ("title", pa.large_string()),
        ("price", pa.float64()),
        ("sold_count", pa.int64()),
        ("service_bits", pa.uint8()),
    ]
)

HitRow = tuple[str, str, str, float, int, int]
"""product_id, shop_id, title, price, sold_count, service bits."""


class HitTableWriter:
    """Appends product rows to the pending stream; :meth:`commit` folds them into the table."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._sink: Any = None
        self._stream: Any = None

    def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append the hit fields of `rows` (dicts with Product's fields)."""
        if self._stream is None:
            self._sink = pa.OSFile(str(self.directory / _PENDING), "wb")
            self._stream = pa.ipc.new_stream(self._sink, SCHEMA)
        columns = [
            [r["product_id"] for r in rows],
            [r["shop_id"] for r in rows],
            [r["title"] for r in rows],
            [r["price"] for r in rows],
            [r["sold_count"] for r in rows],
            [service_bits(r["service"]) for r in rows],
        ]
        self._stream.write_batch(pa.record_batch(columns, schema=SCHEMA))

    def commit(self) -> None:
        """Make ``hits.arrow`` hold every row added so far, as one record batch."""
        if self._stream is None:
            if not (self.directory / HITS_FILE).exists():
                _write(self.directory / HITS_FILE, SCHEMA.empty_table())
            return
        self._close_stream()
        hits, pending = self.directory / HITS_FILE, self.directory / _PENDING
        # The maps stay open as long as the tables reading them live; never closed by hand.
        parts = [pa.ipc.open_file(pa.memory_map(str(hits))).read_all()] if hits.exists() else []
        parts.append(pa.ipc.open_stream(pa.memory_map(str(pending))).read_all())
        _write(hits, pa.concat_tables(parts).combine_chunks())
        pending.unlink()

    def abort(self) -> None:
        """Drop the rows added since the last commit."""
        self._close_stream()
        (self.directory / _PENDING).unlink(missing_ok=True)

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._sink.close()
            self._stream = self._sink = None


class HitTable:
    """The hit fields of every product, by row (read-only, memory-mapped, thread-safe)."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self._batch = batch

    @classmethod
    def open(cls, directory: Path) -> HitTable:
        """Map ``hits.arrow`` in `directory`; CatalogError naming the file if unreadable."""
        path = directory / HITS_FILE
        try:
            reader = pa.ipc.open_file(pa.memory_map(str(path)))
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        except (OSError, pa.ArrowInvalid) as e:
            raise CatalogError(f"{path}: unreadable hit table ({e})") from None
        if len(batches) > 1 or (batches and batches[0].schema != SCHEMA):
            raise CatalogError(f"{path}: not a hit table of this shopbench; rebuild the catalog")
        return cls(batches[0] if batches else pa.RecordBatch.from_pylist([], schema=SCHEMA))

    def __len__(self) -> int:
        return self._batch.num_rows

    def rows(self, rows: Sequence[int]) -> list[HitRow]:
        """The hit fields of these rows, in the same order."""
        if not rows:
            return []
        picked = self._batch.take(pa.array(rows, type=pa.int64()))
        return list(zip(*(c.to_pylist() for c in picked.columns), strict=True))

    def titles(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        """The product id and title of these rows, in the same order: two of the six
        columns, for callers that read nothing else of many hits."""
        if not rows:
            return []
        picked = self._batch.select(["product_id", "title"]).take(pa.array(rows, type=pa.int64()))
        return list(zip(*(c.to_pylist() for c in picked.columns), strict=True))


def _write(path: Path, table: pa.Table) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        writer.write_table(table, max_chunksize=max(1, table.num_rows))
    os.replace(tmp, path)
