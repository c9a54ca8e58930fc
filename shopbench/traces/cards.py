"""Dataset cards: the ``README.md`` every export, curated set and SFT folder carries, the
provenance section each shows, and the card of a ``shopbench traces export``.

A card follows the Hugging Face convention: a YAML front matter block with the Hub's
metadata keys (``license``, ``pretty_name``, ``task_categories``, ``tags``,
``size_categories``, ``configs`` naming the files written, ``dataset_info`` with the features
and split sizes), then Markdown sections. :class:`DatasetCard` is plain data: the stage that
wrote the files (an export here, curation, distillation) builds its sections and hands the
card to :func:`write_card`. Every value comes from what was written — the features and the
schema table from the files' own Arrow schema (:func:`features_of`, :func:`schema_table`),
the sizes from their row counts — and every string taken from the data goes through
:func:`literal`, which shows it only when it is a plain identifier, so text a miner wrote
never reaches a card.

Provenance, where a set of archived episodes came from: :func:`archive_range` reads the
range from the rows themselves (blocks, epochs, start times, episodes per validator and per
intent); :func:`shard_sources` names the sealed shards those rows were read from and how
each was checked when it was read (the archive's one verified reader,
:mod:`shopbench.archive.reader`, decided that; this only reports it).
:func:`provenance_section` writes both as a card's Markdown. Everything shown of a hotkey,
path or intent goes through :func:`literal`.

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

import importlib.metadata
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, ConfigDict, Field

from shopbench.archive.layout import RECORD_COLUMNS, SCHEMA, UNKNOWN_VALIDATOR
from shopbench.archive.paths import partition_of_path
from shopbench.archive.reader import ShardRef
from shopbench.traces.formats import export_format

CARD_NAME = "README.md"
"""A card's file name inside the folder it describes (the Hub's and ``datasets``' name)."""
CARD_SUFFIX = ".card.md"
"""Appended to a single-file export's name for its card, written beside it."""
TAGS = ("shopbench", "bittensor", "agents", "tool-use", "shopping")
"""Tags every card carries."""

_LITERAL = re.compile(r"^[A-Za-z0-9_.:=/+@-]{1,200}$")
_SIZES = (
    (1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"),
    (1_000_000_000, "100M<n<1B"),
)  # fmt: skip
_DTYPES = {"double": "float64", "float": "float32", "halffloat": "float16"}


def literal(value: object) -> str:
    """`value` as inline code when it is a plain identifier (letters, digits, ``_.:=/+@-``,
    at most 200 characters), else a count of its characters: what a card may show of a
    string it did not write."""
    text = str(value)
    if _LITERAL.match(text):
        return f"`{text}`"
    return f"(not shown: {len(text)} characters)"


def fenced(text: str, info: str = "") -> str:
    """`text` as a fenced code block whose fence is longer than any backtick run in it."""
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def project_license() -> str:
    """The project's licence as a Hub licence id (``apache-2.0``), read from the installed
    package's metadata (pyproject's ``license``)."""
    try:
        meta = importlib.metadata.metadata("shopbench")
    except importlib.metadata.PackageNotFoundError:
        return "other"
    found = [*(meta.get_all("License-Expression") or []), *(meta.get_all("License") or [])]
    return (found[0].strip().lower() if found else "") or "other"


def shopbench_version() -> str:
    """``shopbench <version>``, as the archive's manifests name their generator."""
    try:
        return f"shopbench {importlib.metadata.version('shopbench')}"
    except importlib.metadata.PackageNotFoundError:
        return "shopbench (not installed)"


def license_section(license_id: str) -> str:
    """The card's licence statement."""
    return (
        f"{literal(license_id)}: the licence of shopbench itself (its `pyproject.toml`). "
        "The episodes are the subnet's own play: tasks and products from shopbench's "
        "seeded synthetic catalog, the miners' agents' replies, and the validator's tool "
        "log, grades and signatures. No third-party data is included; a contamination "
        "check names the test files it used (ShoppingBench's are Apache-2.0) by name and "
        "sha256 only."
    )


def size_category(rows: int) -> str:
    """The Hub's ``size_categories`` value for `rows` examples."""
    for bound, name in _SIZES:
        if rows < bound:
            return name
    return "n>1B"


def _dtype(t: pa.DataType) -> str:
    if isinstance(t, pa.JsonType):  # JSON text that ``datasets`` decodes (its ``Json``)
        return "json"
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, tz={t.tz}]" if t.tz else f"timestamp[{t.unit}]"
    name = str(t)
    return _DTYPES.get(name, name)


def _inner(t: pa.DataType) -> Any:
    """The feature of an Arrow type in the Hub's YAML: a dtype name, ``{"list": …}`` or
    ``{"struct": [fields]}``."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        value = t.value_type
        if pa.types.is_struct(value):
            return {"list": [_field(value.field(i)) for i in range(value.num_fields)]}
        return {"list": _inner(value)}
    if pa.types.is_struct(t):
        return {"struct": [_field(t.field(i)) for i in range(t.num_fields)]}
    return _dtype(t)


def _field(f: pa.Field) -> dict[str, Any]:
    inner = _inner(f.type)
    return {"name": f.name, **({"dtype": inner} if isinstance(inner, str) else inner)}


def features_of(schema: pa.Schema) -> list[dict[str, Any]]:
    """`schema` as ``dataset_info.features``: the list ``datasets.Features`` writes to a
    card (``Features.from_arrow_schema(schema)._to_yaml_list()``)."""
    return [_field(f) for f in schema]


def type_text(t: pa.DataType) -> str:
    """A short reading of an Arrow type for the schema table (structs by their field names)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{type_text(t.value_type)}>"
    if pa.types.is_struct(t):
        inner = ", ".join(
            f.name
            if not (pa.types.is_struct(f.type) or pa.types.is_list(f.type))
            else f"{f.name}: {type_text(f.type)}"
            for f in t
        )
        return f"struct<{inner}>"
    return _dtype(t)


def schema_table(schema: pa.Schema, notes: Mapping[str, str] | None = None) -> str:
    """A Markdown table of `schema`'s columns (name, type, and `notes` where given)."""
    notes = notes or {}
    lines = ["| column | type | notes |", "|---|---|---|"]
    for f in schema:
        lines.append(f"| `{f.name}` | {type_text(f.type)} | {notes.get(f.name, '')} |")
    return "\n".join(lines)


class Split(BaseModel):
    """One split of a card's default config: its files (relative to the card), its rows and
    its bytes (a Parquet file's uncompressed data, another file's size)."""

    model_config = ConfigDict(frozen=True)

    name: str
    files: list[str]
    rows: int
    bytes: int = 0

    @classmethod
    def of_parquet(cls, name: str, folder: Path, files: Sequence[Path]) -> Split:
        """The split of the Parquet `files` under `folder`, its sizes from their metadata."""
        rows = size = 0
        for f in files:
            meta = pq.ParquetFile(f).metadata
            rows += meta.num_rows
            size += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        rel = [Path(f).relative_to(folder).as_posix() for f in files]
        return cls(name=name, files=rel, rows=rows, bytes=size)


class DatasetCard(BaseModel):
    """What a card says: the Hub's metadata, then titled Markdown sections, in order."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    pretty_name: str
    summary: str = Field(description="the first paragraph: what the dataset is")
    license: str = Field(default_factory=project_license)
    task_categories: list[str] = Field(default_factory=lambda: ["text-generation"])
    tags: list[str] = Field(default_factory=lambda: list(TAGS))
    splits: list[Split] = Field(default_factory=list, description="empty: no loadable config")
    arrow_schema: pa.Schema | None = Field(
        default=None, description="the Arrow schema of the files; None when they are not "
        "Parquet (no dataset_info features then)",
    )  # fmt: skip
    sections: list[tuple[str, str]] = Field(default_factory=list)

    @property
    def rows(self) -> int:
        """Examples over every split."""
        return sum(s.rows for s in self.splits)

    def metadata(self) -> dict[str, Any]:
        """The front matter's keys and values."""
        meta: dict[str, Any] = {
            "license": self.license,
            "pretty_name": self.pretty_name,
            "task_categories": list(self.task_categories),
            "tags": list(self.tags),
            "size_categories": [size_category(self.rows)],
        }
        if self.splits:
            meta["configs"] = [{
                "config_name": "default",
                "data_files": [{"split": s.name, "path": list(s.files)} for s in self.splits],
            }]  # fmt: skip
        if self.arrow_schema is not None and self.splits:
            meta["dataset_info"] = {
                "features": features_of(self.arrow_schema),
                "splits": [
                    {"name": s.name, "num_bytes": s.bytes, "num_examples": s.rows}
                    for s in self.splits
                ],  # fmt: skip
            }
        return meta

    def render(self) -> str:
        """The card's text: ``---``, the YAML metadata, ``---``, the title and sections."""
        front = yaml.safe_dump(self.metadata(), sort_keys=False, allow_unicode=False)
        parts = [f"---\n{front}---", f"# {self.pretty_name}", self.summary]
        parts += [f"## {title}\n\n{body.strip()}" for title, body in self.sections]
        return "\n\n".join(parts) + "\n"


def card_path(written: Path) -> Path:
    """Where the card of `written` goes: ``README.md`` inside a folder, ``<name>.card.md``
    beside a single file (a README.md there may describe something else)."""
    written = Path(written)
    if written.is_dir():
        return written / CARD_NAME
    return written.with_name(written.name + CARD_SUFFIX)


def write_card(written: Path, card: DatasetCard) -> Path:
    """Write `card` for the folder or file `written` (:func:`card_path`); the card's path."""
    path = card_path(written)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(card.render(), encoding="utf-8")
    tmp.replace(path)
    return path


def table_notes(rows: Sequence[tuple[str, str]]) -> str:
    """A two-column Markdown table (what, value) of figures a card states."""
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


# Provenance: where a set of archived episodes came from.

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


# The export's card.

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


def archive_notes(schema: pa.Schema) -> dict[str, str]:
    """Schema-table notes for the archive's columns: which are derived copies."""
    return {n: "derived: a copy for filtering" for n in schema.names
            if n in SCHEMA.names and n not in RECORD_COLUMNS}  # fmt: skip


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
