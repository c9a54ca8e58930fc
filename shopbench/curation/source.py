"""The archive curation reads: its sealed shards, each checked, streamed in small batches.

A local archive is read where it is; a URL (``s3://…``, ``file://…``) is first pulled with
:func:`shopbench.archive.pull.pull`, which checks every manifest's signature and every
shard's sha256, into a folder of the output. A shard whose manifest does not verify, or
whose size, sha256 or row count differ from its manifest, is not read: its rows are
counted as rejected with that reason. Shards are read in path order, one batch of rows at
a time, so the same archive always streams in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shopbench.archive.layout import SCHEMA
from shopbench.archive.manifest import verify_manifest
from shopbench.archive.query import sealed_shards
from shopbench.archive.shards import verify_shard
from shopbench.archive.signing import Verifier
from shopbench.archive.sink import SinkError
from shopbench.curation.errors import CurationError

BATCH_ROWS = 256
"""Rows converted to Python objects at a time (the unit that bounds memory)."""


@dataclass(frozen=True, slots=True)
class Shard:
    """One sealed shard: its file, its path in the archive and its manifest's row count."""

    file: Path
    rel: str
    rows: int
    signer: str  # the manifest's signer, verified when the run verifies signatures


@dataclass(slots=True)
class ArchiveShards:
    """The shards to read, and those refused with why (path → (rows, reason))."""

    root: Path
    shards: list[Shard]
    refused: dict[str, tuple[int, str]]


def is_url(spec: str) -> bool:
    """Whether `spec` names object storage rather than a local folder."""
    return "://" in spec


def local_archive(
    spec: str, work: Path, *, validator: str | None, verifier: Verifier | None
) -> Path:
    """The local folder of the archive `spec`: itself, or a URL pulled into `work`."""
    if not is_url(spec):
        return Path(spec)
    if validator is None or verifier is None:
        raise CurationError(f"--archive {spec}: a URL needs --validator (whose shards to pull)")
    from shopbench.archive.pull import pull
    from shopbench.archive.remote import RemoteTarget

    try:
        report = pull(RemoteTarget(url=spec), work, validator=validator, verifier=verifier)
    except SinkError as e:
        raise CurationError(f"--archive {spec}: {e}") from None
    if report.rows == 0 and not report.held:
        raise CurationError(f"--archive {spec}: no shards of validator {validator} there")
    return work


def list_shards(root: Path, verifier: Verifier | None) -> ArchiveShards:
    """The sealed shards under `root`, each checked against its manifest (and, with a
    verifier, the manifest's signature by its signer)."""
    try:
        refs = sealed_shards(root)
    except SinkError as e:
        raise CurationError(f"--archive: {e}") from None
    shards: list[Shard] = []
    refused: dict[str, tuple[int, str]] = {}
    for ref in refs:
        m = ref.manifest
        if verifier is not None and not verify_manifest(m, verifier, m.signer):
            refused[m.path] = (m.rows, f"shard manifest signature does not verify ({m.signer})")
            continue
        problem = verify_shard(root, m)
        if problem is not None:
            refused[m.path] = (m.rows, f"shard does not match its manifest: {problem}")
            continue
        shards.append(Shard(file=Path(ref.file), rel=m.path, rows=m.rows, signer=m.signer))
    if not shards and not refused:
        raise CurationError(f"--archive {root}: no sealed shards (nothing to curate)")
    return ArchiveShards(root=root, shards=shards, refused=refused)


def iter_batches(
    shards: list[Shard], rows: int = BATCH_ROWS, columns: Sequence[str] = tuple(SCHEMA.names)
) -> Iterator[tuple[Shard, pa.Table]]:
    """Every row of `shards`, in order, as (its shard, a table of at most `rows` rows of the
    archive's `columns`); columns a shard lacks come as nulls, so a bad record fails alone."""
    for shard in shards:
        try:
            f = pq.ParquetFile(shard.file)
        except (OSError, pa.ArrowException) as e:
            raise CurationError(f"{shard.file}: not a readable shard ({e})") from None
        present = [n for n in columns if n in f.schema_arrow.names]
        for batch in f.iter_batches(batch_size=rows, columns=present):
            table = pa.Table.from_batches([batch])
            for name in columns:
                if name not in table.column_names:
                    field = SCHEMA.field(name)
                    table = table.append_column(field, pa.nulls(table.num_rows, field.type))
            yield shard, table.select(list(columns))
