"""The curated set: what curation writes and distillation reads.

A curated set is a folder ``<out>/data/part-NNNNN.parquet`` (zstd). Each file has exactly the
archive's columns (:data:`shopbench.archive.layout.SCHEMA`, so every archive reader, DuckDB
and Hugging Face ``datasets`` read it as they read shards) plus three of curation's own:

- ``curation_weight`` (float64): how much the episode counts in training (1 = as usual);
- ``curation_tags`` (list<string>): why it was kept or what it shows, e.g. ``recovery`` and
  ``recovery:search_retry``;
- ``turn_mask`` (list<bool>, null = train on every turn): one entry per assistant message of
  ``messages``, in order; True = train on that turn.

:func:`write_curated` streams episodes out in files of :data:`ROWS_PER_FILE` rows;
:func:`read_curated` streams them back, one row group at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shopbench.archive.errors import SinkError
from shopbench.archive.layout import LATE_COLUMNS, SCHEMA, from_table, to_table
from shopbench.curation.errors import CuratedSetError
from shopbench.errors import first_problem
from shopbench.records.trajectory import Trajectory

DATA_DIR = "data"
FILE_GLOB = "part-*.parquet"
ROWS_PER_FILE = 50_000
"""Episodes per output file (a new file is started after this many)."""
ROW_GROUP_ROWS = 2048
"""Episodes per Parquet row group: the unit :func:`read_curated` holds in memory."""

CURATED_SCHEMA = (
    SCHEMA.append(pa.field("curation_weight", pa.float64()))
    .append(pa.field("curation_tags", pa.list_(pa.string())))
    .append(pa.field("turn_mask", pa.list_(pa.bool_())))
)
"""The archive's schema plus curation's three columns."""


class CuratedEpisode(BaseModel):
    """One kept episode, with how much it counts and which of its turns to train on."""

    model_config = ConfigDict(extra="forbid")

    trajectory: Trajectory
    weight: float = Field(default=1.0, ge=0.0, description="training weight (1 = as usual)")
    tags: list[str] = Field(default_factory=list, description="e.g. recovery:search_retry")
    turn_mask: list[bool] | None = Field(
        default=None,
        description="one entry per assistant message, in order; True = train on it; "
        "None = train on all",
    )

    @model_validator(mode="after")
    def _mask_fits(self) -> CuratedEpisode:
        if self.turn_mask is not None:
            n = sum(1 for m in self.trajectory.messages if m.role == "assistant")
            if len(self.turn_mask) != n:
                raise ValueError(
                    f"turn_mask has {len(self.turn_mask)} entries; episode "
                    f"{self.trajectory.episode_id} has {n} assistant messages"
                )
        return self


def with_curation(
    table: pa.Table, weights: list[float], tags: list[list[str]], masks: list[list[bool] | None]
) -> pa.Table:
    """An archive table (SCHEMA's columns) with curation's three columns appended: the
    table a :class:`CuratedWriter` writes."""
    table = table.select(SCHEMA.names).cast(SCHEMA)
    table = table.append_column(
        CURATED_SCHEMA.field("curation_weight"), pa.array(weights, pa.float64())
    )
    table = table.append_column(
        CURATED_SCHEMA.field("curation_tags"), pa.array(tags, pa.list_(pa.string()))
    )
    table = table.append_column(
        CURATED_SCHEMA.field("turn_mask"), pa.array(masks, pa.list_(pa.bool_()))
    )
    return table.replace_schema_metadata(CURATED_SCHEMA.metadata)


def check_unwritten(out: Path) -> None:
    """CuratedSetError when `out` already holds a curated set (one is written once)."""
    data = Path(out) / DATA_DIR
    if data.exists() and any(data.glob(FILE_GLOB)):
        raise CuratedSetError(f"{data} already holds a curated set")


class CuratedWriter:
    """Writes a curated set file by file, from archive tables and curation's columns."""

    def __init__(self, out: Path, *, rows_per_file: int = ROWS_PER_FILE) -> None:
        check_unwritten(out)
        self.data = Path(out) / DATA_DIR
        self.rows_per_file = rows_per_file
        self.files: list[Path] = []
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._in_file = 0

    def write(
        self,
        table: pa.Table,
        weights: list[float],
        tags: list[list[str]],
        masks: list[list[bool] | None],
    ) -> None:
        """Append the rows of `table` (archive columns) with their weights, tags and masks."""
        self.write_table(with_curation(table, weights, tags, masks))

    def write_table(self, table: pa.Table) -> None:
        """Append the rows of `table` (:data:`CURATED_SCHEMA`'s columns, as
        :func:`with_curation` makes them), starting a new file every `rows_per_file`."""
        table = table.select(CURATED_SCHEMA.names).cast(CURATED_SCHEMA)
        start = 0
        while start < table.num_rows:
            if self._writer is None:
                self._open()
            n = min(table.num_rows - start, self.rows_per_file - self._in_file)
            try:
                self._writer.write_table(table.slice(start, n), row_group_size=ROW_GROUP_ROWS)  # type: ignore[union-attr]
            except OSError as e:
                raise CuratedSetError(f"cannot write {self.files[-1]}: {e}") from None
            start += n
            self._in_file += n
            self.rows += n
            if self._in_file >= self.rows_per_file:
                self._close_file()

    def _open(self) -> None:
        try:
            self.data.mkdir(parents=True, exist_ok=True)
            path = self.data / f"part-{len(self.files):05d}.parquet"
            self._writer = pq.ParquetWriter(path, CURATED_SCHEMA, compression="zstd")
        except OSError as e:
            raise CuratedSetError(f"cannot write the curated set to {self.data}: {e}") from None
        self.files.append(path)
        self._in_file = 0

    def _close_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def close(self) -> list[Path]:
        """Finish the last file; the files written."""
        self._close_file()
        return list(self.files)


def write_curated(
    episodes: Iterable[CuratedEpisode], out: Path, *, rows_per_file: int = ROWS_PER_FILE
) -> list[Path]:
    """Write `episodes` as ``out/data/part-00000.parquet``, ... and return the files written.

    Streams: at most one row group of episodes is held at a time. Files already in
    ``out/data`` are an error (a curated set is written once). Nothing is written for no
    episodes (the list returned is empty)."""
    writer = CuratedWriter(out, rows_per_file=rows_per_file)
    batch: list[CuratedEpisode] = []

    def flush() -> None:
        if batch:
            writer.write(
                to_table([e.trajectory for e in batch]), [e.weight for e in batch],
                [e.tags for e in batch], [e.turn_mask for e in batch],
            )  # fmt: skip
            batch.clear()

    try:
        for episode in episodes:
            batch.append(episode)
            if len(batch) >= ROW_GROUP_ROWS:
                flush()
        flush()
    finally:
        files = writer.close()
    return files


def curated_files(path: Path) -> list[Path]:
    """The curated set's files under `path` (the folder given to :func:`write_curated`, or
    its ``data`` folder), in order. CuratedSetError when there are none."""
    path = Path(path)
    files = sorted(path.glob(f"{DATA_DIR}/{FILE_GLOB}")) or sorted(path.glob(FILE_GLOB))
    if not files:
        raise CuratedSetError(
            f"{path}: no curated set here (no {DATA_DIR}/{FILE_GLOB}; write one with "
            "shopbench curate)"
        )
    return files


def read_curated(path: Path) -> Iterator[CuratedEpisode]:
    """The episodes of the curated set at `path`, in order, one row group in memory at a
    time. CuratedSetError when there are no curated files or a file is not one."""
    for file, groups in curated_groups(path):
        for group in range(groups):
            yield from read_curated_group(file, group)


def curated_groups(path: Path) -> list[tuple[Path, int]]:
    """Each file of the curated set at `path`, in order, with its number of row groups (the
    units :func:`read_curated_group` reads). CuratedSetError as :func:`read_curated`."""
    out = []
    for file in curated_files(path):
        out.append((file, _curated_file(file).num_row_groups))
    return out


def _curated_file(file: Path) -> pq.ParquetFile:
    try:
        reader = pq.ParquetFile(file)
    except (OSError, pa.ArrowException) as e:
        raise CuratedSetError(f"{file}: not a Parquet file ({e})") from None
    missing = [n for n in CURATED_SCHEMA.names
               if n not in reader.schema_arrow.names and n not in LATE_COLUMNS]  # fmt: skip
    if missing:
        raise CuratedSetError(f"{file}: not a curated file (missing {', '.join(missing)})")
    return reader


def read_curated_group(file: Path, group: int) -> Iterator[CuratedEpisode]:
    """The episodes of one row group of one curated file, in order (a unit of work any
    engine can hand out). CuratedSetError for a file that is not a curated one."""
    table = _curated_file(file).read_row_group(group)
    try:
        trajectories = from_table(table)
    except SinkError as e:
        raise CuratedSetError(f"{file}: {e}") from None
    weights = table.column("curation_weight").to_pylist()
    tags = table.column("curation_tags").to_pylist()
    masks = table.column("turn_mask").to_pylist()
    for t, w, g, m in zip(trajectories, weights, tags, masks, strict=True):
        try:
            yield CuratedEpisode(trajectory=t, weight=w, tags=g or [], turn_mask=m)
        except ValidationError as e:
            why = first_problem(e, located=False)
            raise CuratedSetError(f"{file}: episode {t.episode_id}: {why}") from None
