"""Provenance, a dataset card's section saying where a set of archived episodes came from.

:func:`archive_range` reads the
range from the rows themselves (blocks, epochs, start times, episodes per validator and per
intent); :func:`shard_sources` names the sealed shards those rows were read from and how
each was checked when it was read (the archive's one verified reader,
:mod:`shopbench.archive.reader`, decided that; this only reports it).
:func:`provenance_section` writes both as a card's Markdown. Everything shown of a hotkey,
path or intent goes through :func:`literal`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from shopbench.archive.layout import UNKNOWN_VALIDATOR
from shopbench.archive.paths import partition_of_path
from shopbench.archive.reader import ShardRef
from shopbench.traces.cards import literal, table_notes

RANGE_COLUMNS = ("episode_id", "validator_hotkey", "block", "epoch", "started_at", "intent")
"""The columns :func:`archive_range` reads."""
SHARDS_LISTED = 50
"""Shards a card lists one by one; the rest are counted."""


class ArchiveRange(BaseModel):
    """The span of a set of archived episodes, read from their rows."""

    model_config = ConfigDict(frozen=True)

    episodes: int
    block_min: int | None = None
    block_max: int | None = None
    epoch_min: int | None = None
    epoch_max: int | None = None
    started_min: str | None = None  # ISO 8601, UTC
    started_max: str | None = None
    validators: dict[str, int] = {}  # hotkey → episodes
    intents: dict[str, int] = {}


def _bounds(column: pa.ChunkedArray) -> tuple[object, object]:
    if column.null_count == len(column):
        return None, None
    mm = pc.min_max(column)
    return mm["min"].as_py(), mm["max"].as_py()


def _iso(value: object) -> str | None:
    if not isinstance(value, datetime):
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def archive_range(table: pa.Table) -> ArchiveRange:
    """The range of the episodes in `table` (any table with :data:`RANGE_COLUMNS`)."""
    blocks = _bounds(table.column("block"))
    epochs = _bounds(table.column("epoch"))
    started = _bounds(table.column("started_at"))
    hotkeys = Counter(v or UNKNOWN_VALIDATOR for v in table.column("validator_hotkey").to_pylist())
    intents = Counter(str(v) for v in table.column("intent").to_pylist())
    return ArchiveRange(
        episodes=table.num_rows, block_min=blocks[0], block_max=blocks[1],  # type: ignore[arg-type]
        epoch_min=epochs[0], epoch_max=epochs[1],  # type: ignore[arg-type]
        started_min=_iso(started[0]), started_max=_iso(started[1]),
        validators=dict(sorted(hotkeys.items())), intents=dict(sorted(intents.items())),
    )  # fmt: skip


def range_of_files(files: Iterable[Path], episode_ids: set[str] | None = None) -> ArchiveRange:
    """:func:`archive_range` of Parquet files with the archive's columns (a curated set),
    only the episodes in `episode_ids` when given."""
    tables = [pq.read_table(f, columns=list(RANGE_COLUMNS)) for f in files]
    table = pa.concat_tables(tables) if tables else pa.table(
        {c: pa.array([], pa.string()) for c in RANGE_COLUMNS}
    )  # fmt: skip
    if episode_ids is not None:
        keep = pc.is_in(table.column("episode_id"), pa.array(sorted(episode_ids), pa.string()))
        table = table.filter(keep)
    return archive_range(table)


class ShardSource(BaseModel):
    """One sealed shard a set of episodes was read from, and how it was checked."""

    model_config = ConfigDict(frozen=True)

    path: str
    rows: int
    signer: str
    sha256: str
    verified: str | None  # how its manifest and bytes were checked; None: not checked


def shard_sources(
    refs: Sequence[ShardRef], table: pa.Table, verified: str | None
) -> list[ShardSource]:
    """The shards of `refs` that can hold rows of `table` — a partition (validator, date,
    intent) some row falls in, and a block range overlapping those rows' — each marked
    with `verified`, the check the read applied to every shard it used."""
    days = pc.strftime(table.column("started_at"), format="%Y-%m-%d").to_pylist()
    blocks: dict[tuple[str, str, str], list[int]] = {}
    for v, d, i, b in zip(
        table.column("validator_hotkey").to_pylist(), days,
        table.column("intent").to_pylist(), table.column("block").to_pylist(), strict=True,
    ):  # fmt: skip
        seen = blocks.setdefault((v or UNKNOWN_VALIDATOR, str(d), str(i)), [])
        if b is not None:
            seen.append(b)
    out = []
    for ref in refs:
        m = ref.manifest
        p = partition_of_path(m.path)
        held = blocks.get((p.get("validator", ""), p.get("date", ""), p.get("intent", "")))
        if held is None:
            continue
        if (
            held
            and m.block_min is not None
            and m.block_max is not None
            and (m.block_max < min(held) or m.block_min > max(held))
        ):
            continue
        out.append(ShardSource(path=m.path, rows=m.rows, signer=m.signer, sha256=m.sha256,
                               verified=verified))  # fmt: skip
    return out


def range_rows(r: ArchiveRange) -> list[tuple[str, str]]:
    """The range as (what, value) rows of a card's table."""
    return [
        ("episodes", f"{r.episodes:,}"),
        ("blocks", f"{r.block_min} – {r.block_max}" if r.block_min is not None else "none"),
        ("epochs", f"{r.epoch_min} – {r.epoch_max}" if r.epoch_min is not None else "none"),
        ("started_at (UTC)", f"{r.started_min} – {r.started_max}" if r.started_min else "none"),
        ("intents", ", ".join(f"{literal(k)} {v}" for k, v in r.intents.items()) or "none"),
    ]


def provenance_section(
    r: ArchiveRange, shards: Sequence[ShardSource] | None,
    extra: Sequence[tuple[str, str]] = (), unrecorded: str = "not recorded",
) -> str:  # fmt: skip
    """The card's provenance: the range, each validator with its episodes and shards and
    how they were checked, then the shards one by one (the first :data:`SHARDS_LISTED`).
    `shards` None: the shards were not recorded here (`unrecorded` says so in their cells)."""
    lines = [table_notes([*range_rows(r), *extra]), ""]
    lines += ["| validator hotkey | episodes | shards | shards verified against their signature |",
              "|---|---|---|---|"]  # fmt: skip
    for hotkey, n in r.validators.items():
        if shards is None:
            lines.append(f"| {literal(hotkey)} | {n} | {unrecorded} | {unrecorded} |")
            continue
        mine = [s for s in shards if partition_of_path(s.path).get("validator") == hotkey]
        checked = sum(1 for s in mine if s.verified)
        lines.append(f"| {literal(hotkey)} | {n} | {len(mine)} | {checked} of {len(mine)} |")
    if shards:
        lines += ["", "| shard | rows | signer | sha256 | verified |", "|---|---|---|---|---|"]
        for s in shards[:SHARDS_LISTED]:
            lines.append(
                f"| {literal(s.path)} | {s.rows} | {literal(s.signer)} | {literal(s.sha256)} "
                f"| {s.verified or 'not checked'} |"
            )
        if len(shards) > SHARDS_LISTED:
            lines.append(f"\n… and {len(shards) - SHARDS_LISTED} more shards.")
    return "\n".join(lines)
