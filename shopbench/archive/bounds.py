"""How much a shard may hold before any reader builds a row of it.

A shard is signed, but a signer can still be hostile or broken: one text of a row rewritten as
hundreds of megabytes of one letter compresses to a few kilobytes, and a reader that trusts
the signature would build all of it. Two checks stop that, both against the record's own
limits (:data:`~shopbench.records.trajectory.MAX_FIELD_BYTES`,
:data:`~shopbench.records.trajectory.MAX_RECORD_BYTES`):

- :func:`footer_problem` reads only the Parquet footer — the column chunks' uncompressed
  sizes, known before any page is decompressed — and refuses a shard that would inflate
  beyond :data:`MAX_INFLATION` times its bytes on disk, or beyond what its rows may hold.
  Every reader lists shards through :func:`~shopbench.archive.reader.list_archive` or checks
  a download with :func:`~shopbench.archive.shards.verify_shard_file`, and both call it.
- :func:`oversized_rows` measures each row's texts in Arrow's buffers, before any Python
  object is made of them: a row over a limit is refused alone, by index and with the field
  that is over, and only its identifying columns are read (cut short).

Honest shards inflate little: Parquet's dictionary encoding already removes repeated texts
before the uncompressed size is counted (an archive of 2,000 copies of four episodes is 4.4
times its bytes; a 64 MiB text of one letter, over 5,000).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shopbench.records.trajectory import MAX_FIELD_BYTES, MAX_RECORD_BYTES

MAX_INFLATION = 64
"""Uncompressed bytes a shard may hold per byte on disk (its footer's column-chunk sizes)."""

FOOTER_SLACK = 1 << 20
"""Uncompressed bytes every shard may hold whatever its size (a small shard is mostly
footer, and its ratio says nothing)."""


def uncompressed_bytes(metadata: pq.FileMetaData) -> int:
    """The uncompressed bytes of every column chunk a Parquet footer lists."""
    total = 0
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        total += sum(group.column(c).total_uncompressed_size for c in range(group.num_columns))
    return total


def footer_problem(path: str | Path, size: int) -> str | None:
    """Why the Parquet file at `path` (`size` bytes on disk) would inflate out of proportion
    when read, from its footer alone; None when it would not. An unreadable footer is a
    problem too."""
    try:
        metadata = pq.ParquetFile(path).metadata
    except (OSError, pa.ArrowException) as e:
        return f"not a readable shard ({e})"
    inflated = uncompressed_bytes(metadata)
    rows = metadata.num_rows
    if inflated > FOOTER_SLACK + MAX_INFLATION * size:
        return (
            f"{inflated} bytes uncompressed from {size} on disk, more than {MAX_INFLATION} "
            "times its size (a decompression bomb); not read"
        )
    if inflated > FOOTER_SLACK + rows * MAX_RECORD_BYTES:
        return (
            f"{inflated} bytes uncompressed in {rows} rows, more than {MAX_RECORD_BYTES} a "
            "row; not read"
        )
    return None


def _sizes(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per element of `array`: the bytes of all its texts, and of its largest one."""
    n = len(array)
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_binary(kind) or \
            pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):  # fmt: skip
        lengths = pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False)
        lengths = lengths.astype(np.int64)
        return lengths, lengths
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        total, largest = _sizes(pc.list_flatten(array))
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        sums = np.bincount(parents, weights=total, minlength=n).astype(np.int64)
        most = np.zeros(n, dtype=np.int64)
        np.maximum.at(most, parents, largest)
        return sums, most
    if pa.types.is_struct(kind):
        sums = np.zeros(n, dtype=np.int64)
        most = np.zeros(n, dtype=np.int64)
        for child in array.flatten():
            total, largest = _sizes(child)
            sums += total
            np.maximum(most, largest, out=most)
        return sums, most
    zeros = np.zeros(n, dtype=np.int64)  # numbers and flags: bounded by the row count
    return zeros, zeros


def oversized_rows(table: pa.Table, columns: list[str]) -> dict[int, str]:
    """The rows of `table` whose `columns` hold more than a record may (one text over
    :data:`MAX_FIELD_BYTES`, or all together over :data:`MAX_RECORD_BYTES`), each with the
    reason; measured in Arrow's buffers, nothing built."""
    if not table.num_rows:
        return {}
    row_total = np.zeros(table.num_rows, dtype=np.int64)
    found: dict[int, str] = {}
    for name in columns:
        parts = [_sizes(chunk) for chunk in table.column(name).chunks]
        total = np.concatenate([p[0] for p in parts]) if parts else row_total * 0
        largest = np.concatenate([p[1] for p in parts]) if parts else row_total * 0
        row_total += total
        for i in np.flatnonzero(largest > MAX_FIELD_BYTES).tolist():
            found.setdefault(i, (
                f"{name} holds a text of {int(largest[i])} bytes; a record's texts are at "
                f"most {MAX_FIELD_BYTES}"
            ))  # fmt: skip
    for i in np.flatnonzero(row_total > MAX_RECORD_BYTES).tolist():
        found.setdefault(
            i, f"{int(row_total[i])} bytes of text; a record holds at most {MAX_RECORD_BYTES}"
        )
    return found
