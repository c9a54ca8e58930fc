"""The card of a ``shopbench traces export``.

An export's card (:func:`export_card`): a folder export (``datasets``) gets ``README.md``
inside it, whose ``configs`` name its Parquet files, so ``datasets.load_dataset(folder)``
and the Hub read it as one ``train`` split. A single-file export (``jsonl``,
``shoppingbench``) gets ``<file>.card.md`` beside it: a folder may hold other things, and a
``README.md`` there is not ours to replace. Its ``configs`` name the file by its bare name,
so moving the file and the card (renamed ``README.md``) into a folder of their own makes a
Hub dataset as it stands.

The schema is read back from what was written: a Parquet file's own Arrow schema; for JSON
lines, the keys and JSON types found in the written lines, down to the depth at which the
format's shape is fixed (below it, e.g. a tool call's ``parameters``, the keys are the
agent's, so they are not listed).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from shopbench.archive.reader import ShardRef
from shopbench.traces.cards import (
    CARD_NAME,
    DatasetCard,
    Split,
    archive_notes,
    fenced,
    license_section,
    literal,
    schema_table,
    shopbench_version,
    write_card,
)
from shopbench.traces.formats import export_format
from shopbench.traces.provenance import (
    ShardSource,
    archive_range,
    provenance_section,
    shard_sources,
)

JSON_LINES_SCANNED = 10_000
"""Lines of a JSON-lines export read for its schema table."""
NOT_CHECKED = (
    "**Not checked.** A raw export is not compared against any test set: its queries may "
    "overlap ShoppingBench's test queries or our held-out tasks. Curate the archive with "
    "`shopbench curate --test-set FILE` (its card names each file checked, by sha256, and "
    "what was dropped) before training on it or evaluating a model trained on it."
)


class ExportSource(BaseModel):
    """How the exported rows were read: the archive, its shards, the trust, the filters."""

    model_config = ConfigDict(frozen=True)

    archive: str
    shards: list[ShardRef] | None = None  # the shards the read listed; None: not recorded
    validator: str | None = None  # the hotkey every shard was verified against (--signed-by)
    filters: dict[str, Any] = {}
    embargo_lifted: bool | None = None

    def trust(self) -> str:
        """How the read checked the shards, in one sentence."""
        if self.shards is None:
            return "not recorded"
        if self.validator is not None:
            return (
                f"verified: each shard's manifest signed by validator {literal(self.validator)}"
                ", its size, sha256 and row count checked against it (`--signed-by`)"
            )
        return (
            "not verified: shards listed by their manifests and each file's size checked, "
            "no signature checked (export with `--signed-by HOTKEY` to verify them)"
        )

    def sources(self, table: pa.Table) -> list[ShardSource] | None:
        """The shards the rows of `table` came from, each marked with the check it had."""
        if self.shards is None:
            return None
        verified = None
        if self.validator is not None:
            verified = f"signature of {literal(self.validator)}, sha256"
        return shard_sources(self.shards, table, verified)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _walk(value: Any, path: str, depth: int, seen: dict[str, set[str]]) -> None:
    if path:
        seen.setdefault(path, set()).add(_json_type(value))
    if isinstance(value, list):
        for item in value:
            _walk(item, f"{path}[]", depth, seen)
    elif isinstance(value, dict) and depth > 0:
        for key, item in value.items():
            name = str(key)
            shown = name if literal(name).startswith("`") else "(a key not shown)"
            _walk(item, f"{path}.{shown}" if path else shown, depth - 1, seen)


def json_lines_schema(path: Path, depth: int, limit: int = JSON_LINES_SCANNED) -> str:
    """A Markdown table of the keys (to `depth`) and JSON types in the first `limit` lines
    of the JSON-lines file at `path` (``[]``: an array's items)."""
    seen: dict[str, set[str]] = {}
    lines = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            if lines >= limit:
                break
            lines += 1
            value = json.loads(line)
            seen.setdefault("(line)", set()).add(_json_type(value))
            _walk(value, "", depth, seen)
    rows = ["| key | JSON type |", "|---|---|"]
    rows += [f"| `{k}` | {' or '.join(sorted(v))} |" for k, v in seen.items()]
    scope = f"the {lines:,} lines written" if lines < limit else f"the first {limit:,} lines"
    return f"Keys and types found in {scope}:\n\n" + "\n".join(rows)


def _parquet_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("data/*.parquet"))


ANNOTATIONS_NOTE = (
    "people's labels and notes on episodes or turns, each signed by its annotator's key and "
    "bound to the sha256 of the record it was made on; kept apart from the records, which "
    "they never alter (docs/browser.md, Annotations)"
)


def export_card(
    written: Path, fmt: str, table: pa.Table, source: ExportSource,
    annotations: tuple[Path, int] | None = None,
) -> DatasetCard:  # fmt: skip
    """The card of the export of `table` in `fmt` written at `written` (a folder or file);
    `annotations`: the annotations file written beside it and how many it holds."""
    spec = export_format(fmt)
    notes = annotations[0].name if annotations else None
    r = archive_range(table)
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    schema: pa.Schema | None = None
    if written.is_dir() and not _parquet_files(written):
        files = sorted(
            p for p in written.rglob("*") if p.is_file() and p.name not in (CARD_NAME, notes)
        )
        splits = []
        schema_text = f"{len(files):,} files in the `{fmt}` format; not a table."
        loading = "Not a table: this card names no `datasets` config."
    elif written.is_dir():
        files = _parquet_files(written)
        splits = [Split.of_parquet("train", written, files)]
        schema = pq.read_schema(files[0]) if files else None
        schema_text = (
            schema_table(schema, archive_notes(schema)) if schema is not None else "No files."
        )
        loading = (f"```python\nimport datasets\nds = datasets.load_dataset(\"{written.name}\", "
                   "split=\"train\")\n```")  # fmt: skip
    else:
        size = written.stat().st_size
        splits = [Split(name="train", files=[written.name], rows=table.num_rows, bytes=size)
                  ] if spec.table else []  # fmt: skip
        schema_text = (
            json_lines_schema(written, spec.card_depth) if spec.card_depth is not None
            else f"One `{fmt}` file; not JSON lines."
        )  # fmt: skip
        loading = spec.loading
    trust_rows = [
        ("archive", literal(Path(source.archive).name or source.archive)),
        ("how the shards were read", source.trust()),
    ]
    if source.embargo_lifted is not None:
        trust_rows.append(("embargo", "lifted: every episode public, live rotation buckets "
                           "included (an arena on a public seed)" if source.embargo_lifted
                           else "applied: the live rotation bucket is left out"))  # fmt: skip
    filters = (
        "Filters of the export (`shopbench traces export`'s options):\n\n"
        + fenced(json.dumps(source.filters, indent=2, sort_keys=True, ensure_ascii=True), "json")
        if source.filters else "No filters: every public episode of the archive."
    )  # fmt: skip
    card = DatasetCard(
        pretty_name=f"shopbench trajectories ({fmt} export)",
        summary=(
            f"{r.episodes:,} agent episodes from the shopbench trajectory archive, exported "
            f"with `shopbench traces export --format {fmt}` by {shopbench_version()} at "
            f"{when}. {spec.shape}"
        ),
        task_categories=["text-generation", "reinforcement-learning"],
        splits=splits,
        arrow_schema=schema,
        sections=[],
    )
    if annotations is not None:
        loading += (
            f"\n\n`{annotations[0].name}`: {annotations[1]:,} annotations of the exported "
            f"episodes, {ANNOTATIONS_NOTE}."
        )
    sections = [
        ("Files and loading", loading),
        ("Schema", schema_text),
        ("Provenance", provenance_section(r, source.sources(table), trust_rows) + "\n\n" + filters),
        ("Contamination", NOT_CHECKED),
        ("License", license_section(card.license)),
        ("Intended use and limits", INTENDED_USE),
    ]
    return card.model_copy(update={"sections": sections})


INTENDED_USE = (
    "For studying shopping agents and for building training sets from their episodes "
    "(`shopbench curate`, then `shopbench distill build`). A raw export is not a training "
    "set: it holds every archived episode the filters matched — failures, scripted and "
    "dishonest miners' play, duplicates — and no contamination check. Queries, replies and "
    "tool arguments are written by miners' agents and are untrusted text: render them "
    "escaped. Product ids are tokens of each episode (the record's `token_map` maps them to "
    "the catalog); the catalog is synthetic, so prices and products are not real."
)


def write_export_card(
    written: Path, fmt: str, table: pa.Table, source: ExportSource | None = None,
    annotations: tuple[Path, int] | None = None,
) -> Path:  # fmt: skip
    """Write the card of an export (:func:`export_card`); its path."""
    src = source or ExportSource(archive="(not recorded)")
    return write_card(written, export_card(Path(written), fmt, table, src, annotations))
