"""The archive curation reads: its sealed shards, each checked, streamed in small batches.

A local archive is read where it is; a URL (``s3://…``, ``file://…``) is first pulled with
:func:`shopbench.archive.pull.run.pull`, which checks every manifest's signature, every shard's
sha256 and the validator's signed head, into a folder of the output. Either way the shards
are listed by the archive's one verified reader (:mod:`shopbench.archive.reader`): with
``--validator`` a local folder is held to that validator's signatures exactly as a pulled
bucket is. A shard whose manifest does not verify, or whose size, sha256 or row count
differ from its manifest, is not read: its rows are counted as rejected with that reason,
as is what a pull refused or found withheld. Shards are read in path order, one batch of rows at
a time, so the same archive always streams in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shopbench.archive.errors import SinkError
from shopbench.archive.layout import SCHEMA
from shopbench.archive.reader import Trust, list_archive
from shopbench.archive.remote import ArchiveSource
from shopbench.archive.signing import Verifier
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
    sha256: str = ""  # the manifest's sha256 of the file, checked when the listing read it


@dataclass(slots=True)
class ArchiveShards:
    """The shards to read, and those refused with why (path → (rows, reason))."""

    root: Path
    shards: list[Shard]
    refused: dict[str, tuple[int, str]]


def local_archive(
    source: ArchiveSource, work: Path, *, verifier: Verifier | None
) -> tuple[Path, dict[str, tuple[int, str]]]:
    """The local folder of the archive `source` — itself, or a URL pulled into `work` — and
    what the pull refused, withheld or failed to fetch (path → (rows, reason))."""
    spec, validator = source.location, source.validator
    if not source.is_url:
        return Path(spec), {}
    if validator is None or verifier is None:
        raise CurationError(f"--archive {spec}: a URL needs --validator (whose shards to pull)")
    from shopbench.archive.pull.run import pull

    try:
        report = pull(source.target(), work, validator=validator, verifier=verifier)
    except SinkError as e:
        raise CurationError(f"--archive {spec}: {e}") from None
    if report.rows == 0 and not report.held:
        raise CurationError(f"--archive {spec}: no shards of validator {validator} there")
    missing = {p: (0, f"not pulled: {why}") for p, why in report.quarantined.items()}
    withheld = "withheld by the source (the validator's signed head lists it)"
    missing |= {p: (0, withheld) for p in report.withheld}
    missing |= {p: (0, f"not pulled: {why}") for p, why in report.failed.items()}
    if report.head_problem:
        missing["(head)"] = (0, report.head_problem)
    return work, missing


def list_shards(
    root: Path, verifier: Verifier | None, validator: str | None = None
) -> ArchiveShards:
    """The sealed shards under `root`, read by the archive's one verified reader: with
    `validator` (and a verifier) only that validator's signed shards, bytes checked; with a
    verifier alone each manifest's signature by its own signer, bytes checked."""
    trust = Trust(validator=validator, verifier=verifier) if validator and verifier else None
    try:
        listing = list_archive(root, trust=trust, verifier=verifier, check_bytes=True)
    except SinkError as e:
        raise CurationError(f"--archive: {e}") from None
    refused = {d.path: (d.rows, d.reason) for d in listing.dropped}
    shards = [
        Shard(file=Path(r.file), rel=r.manifest.path, rows=r.manifest.rows,
              signer=r.manifest.signer, sha256=r.manifest.sha256)
        for r in listing.shards
    ]  # fmt: skip
    if not shards and not refused:
        raise CurationError(f"--archive {root}: no sealed shards (nothing to curate)")
    return ArchiveShards(root=root, shards=shards, refused=refused)


def iter_batches(
    shards: list[Shard], rows: int = BATCH_ROWS, columns: Sequence[str] = tuple(SCHEMA.names)
) -> Iterator[tuple[Shard, pa.Table]]:
    """Every row of `shards`, in order, as (its shard, a table of at most `rows` rows of the
    archive's `columns`); columns a shard lacks come as nulls, so a bad record fails alone."""
    for shard in shards:
        for table in shard_batches(shard, shard.file, rows, columns):
            yield shard, table


def shard_batches(
    shard: Shard, source: Path | pa.NativeFile, rows: int = BATCH_ROWS,
    columns: Sequence[str] = tuple(SCHEMA.names),
) -> Iterator[pa.Table]:  # fmt: skip
    """The rows of one shard read from `source` (its file, or its bytes in memory) as
    :func:`iter_batches` reads them."""
    try:
        f = pq.ParquetFile(source)
    except (OSError, pa.ArrowException) as e:
        raise CurationError(f"{shard.file}: not a readable shard ({e})") from None
    present = [n for n in columns if n in f.schema_arrow.names]
    for batch in f.iter_batches(batch_size=rows, columns=present):
        table = pa.Table.from_batches([batch])
        for name in columns:
            if name not in table.column_names:
                field = SCHEMA.field(name)
                table = table.append_column(field, pa.nulls(table.num_rows, field.type))
        yield table.select(list(columns))
