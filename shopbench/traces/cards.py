"""Dataset cards: the ``README.md`` every export, curated set and SFT folder carries.

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

Where a set of archived episodes came from is a card's provenance section
(:mod:`shopbench.traces.provenance`); the card of a ``shopbench traces export`` is built in
:mod:`shopbench.traces.export_card`.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, ConfigDict, Field

from shopbench.archive.layout import RECORD_COLUMNS, SCHEMA

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


def archive_notes(schema: pa.Schema) -> dict[str, str]:
    """Schema-table notes for the archive's columns: which are derived copies."""
    return {n: "derived: a copy for filtering" for n in schema.names
            if n in SCHEMA.names and n not in RECORD_COLUMNS}  # fmt: skip
