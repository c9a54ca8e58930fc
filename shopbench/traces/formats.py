"""The export formats: one registry that ``shopbench traces export``, the trace API's
``format=`` parameter, the dataset cards and the browser's download links all read.

One name per shape of the data:

- ``jsonl``: the signed records, one per line;
- ``parquet``: the archive layout's columns (a folder ``traces export`` writes as
  ``data/*.parquet`` with its card, which ``datasets.load_dataset(folder)`` loads; one
  Parquet file from the API);
- ``chat``: one conversational row per episode (``messages`` and ``tools``), what
  ``apply_chat_template`` and TRL read;
- ``shoppingbench``: ShoppingBench's rollout traces;
- ``atif``: ATIF v1.7 documents (a folder of one Harbor trial folder per episode with a
  table of them; one document per line from the API);
- ``eval``: one Inspect AI log, built whole (the API caps its episodes).

The names these had before (``datasets`` for ``parquet``, ``trl`` for ``chat``) are still
read, as aliases. :data:`FORMATS` is the one registry idiom
(:class:`shopbench.registry.Registry`): a new format is one :class:`ExportFormat` with its
writer and its stream, registered there (``FORMATS.register(fmt, after="chat")``); the CLI,
the API, the cards and the links follow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from shopbench.archive.errors import SinkError
from shopbench.archive.layout import from_table
from shopbench.records.trajectory import Trajectory
from shopbench.registry import Registry
from shopbench.traces import export as files
from shopbench.traces import streams
from shopbench.traces.atif import atif_lines, export_atif
from shopbench.traces.export import shoppingbench_steps


@dataclass(frozen=True)
class ExportFormat:
    """One export format: its name, what one entry is, and how each reader gets it."""

    name: str
    shape: str
    """What one row, line or file is (a card's first paragraph, ``--help``)."""
    media_type: str
    suffix: str
    """A download's (and a file export's) name suffix; a folder export has none."""
    folder: bool
    """``traces export`` writes a folder (else one file)."""
    write: Callable[[pa.Table, Path], Path]
    """``traces export``: the table at a path; what was written."""
    render: Callable[[list[Trajectory]], bytes] | None
    """A few episodes' bytes (one episode's download; the whole of a format built whole);
    None: not offered per episode."""
    stream: Callable[[Iterable[pa.Table]], Iterator[bytes]] | None = None
    """The API's stream over every match; None: built whole by `render`, capped."""
    label: str = ""
    """The browser's link text (none: not linked from an episode's page)."""
    card_depth: int | None = None
    """For a JSON-lines file: how deep its card lists the keys (None: not JSON lines)."""
    table: bool = False
    """Its card names a ``datasets`` config (the written file or folder loads as a table)."""
    loading: str = ""
    """A file export's card: how to read the file."""
    aliases: tuple[str, ...] = ()


def _lines(rows: Iterable[object]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _write_lines(render: Callable[[list[Trajectory]], bytes]) -> Callable[[pa.Table, Path], Path]:
    def write(table: pa.Table, out: Path) -> Path:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(render(from_table(table)))
        return out

    return write


def _records(ts: list[Trajectory]) -> bytes:
    return "".join(t.model_dump_json() + "\n" for t in ts).encode("utf-8")


def _chat(ts: list[Trajectory]) -> bytes:
    return _lines(streams.chat_row(t) for t in ts)


def _shoppingbench(ts: list[Trajectory]) -> bytes:
    return _lines(shoppingbench_steps(t) for t in ts)


def _format_name(fmt: ExportFormat) -> str:
    return fmt.name


def _format_aliases(fmt: ExportFormat) -> tuple[str, ...]:
    return fmt.aliases


FORMATS: Registry[ExportFormat] = Registry(
    "export format", key=_format_name, aliases_of=_format_aliases, error=SinkError
)
"""Every export format, in the order they are listed; their older names as aliases."""
for _format in (
    ExportFormat(
        name="jsonl", media_type="application/x-ndjson", suffix=".jsonl", folder=False,
        shape="One signed `Trajectory` record per line: the task's query, the full "
        "conversation, the validator's tool log, the outcome grade and the judge's verdict.",
        write=files.export_jsonl, render=_records, stream=streams.record_lines,
        label="JSONL", card_depth=1, table=True,
        loading="One `Trajectory` JSON object per line: `shopbench.archive.jsonl."
        "read_trajectories(path)` reads it back; `datasets` reads it with this card as the "
        "folder's `README.md`.",
    ),
    ExportFormat(
        name="parquet", media_type="application/vnd.apache.parquet", suffix=".parquet",
        folder=True, aliases=("datasets",),
        shape="One row per episode: the task's query, the full conversation, the "
        "validator's tool log, the outcome grade, the judge's verdict and the record's "
        "signature.",
        write=files.export_datasets, render=None, stream=streams.parquet_chunks, table=True,
    ),
    ExportFormat(
        name="chat", media_type="application/x-ndjson", suffix=".chat.jsonl", folder=False,
        aliases=("trl",),
        shape="One conversational row per episode: `messages` (the OpenAI chat list, "
        "reasoning in `reasoning_content`, tool calls with their arguments as JSON text) and "
        "`tools` (the function schemas offered), as `apply_chat_template` and TRL read them.",
        write=_write_lines(_chat), render=_chat, stream=streams.chat_lines,
        label="chat row", card_depth=1, table=True,
        loading="One JSON object per line (`messages`, `tools`): `datasets` reads it with "
        "this card as the folder's `README.md`; `tokenizer.apply_chat_template(row[\"messages\"], "
        "tools=row[\"tools\"])` renders a row, and TRL's `SFTTrainer` trains on it as it stands.",
    ),
    ExportFormat(
        name="shoppingbench", media_type="application/x-ndjson", suffix=".shoppingbench.jsonl",
        folder=False,
        shape="One line per episode: its rollout steps in ShoppingBench's trace format, one "
        "step per assistant turn.",
        write=files.export_shoppingbench, render=_shoppingbench,
        stream=lambda tables: (_shoppingbench(from_table(t)) for t in tables),
        label="ShoppingBench", card_depth=4,
        loading="One JSON array of rollout steps per line (ShoppingBench's trace format, read "
        "by its `run_evaluate.py`); not a table, so this card names no `datasets` config.",
    ),
    ExportFormat(
        name="atif", media_type="application/x-ndjson", suffix=".atif.jsonl", folder=True,
        shape="One trial folder per episode in Harbor's layout: `<episode_id>/agent/"
        "trajectory.json`, an ATIF v1.7 document (its steps, tool calls and observations, the "
        "reward in `final_metrics.extra.reward`, the grade, the diagnosis and the signature "
        "digest in `extra.shopbench`), `<episode_id>/verifier/reward.json` (the reward) and "
        "`<episode_id>/result.json` (the task, the times); docs/archive.md, ATIF export. "
        "`data/` holds one row per document for `datasets`.",
        write=export_atif, render=atif_lines, stream=streams.atif_chunks, label="ATIF",
        table=True,
    ),
    ExportFormat(
        name="eval", media_type="application/zip", suffix=".eval", folder=False,
        shape="One Inspect AI log: a sample per episode, scored `outcome`, `rule`, `judge` "
        "and `score`, the log's results their means (success rate the headline).",
        write=_write_lines(streams.eval_log), render=streams.eval_log, label="Inspect .eval",
        loading="One Inspect AI log: `inspect_ai.log.read_eval_log(path)` reads it and "
        "`inspect view` shows it; not a table, so this card names no `datasets` config.",
    ),
):  # fmt: skip
    FORMATS.register(_format)

ALIASES: dict[str, str] = FORMATS.aliases()
"""Each older name with the format it stands for."""


def format_names() -> list[str]:
    """The formats' names, in order (aliases left out)."""
    return list(FORMATS.names())


def export_format(name: str) -> ExportFormat:
    """The format called `name` (or by an old name); SinkError naming the allowed ones."""
    return FORMATS.lookup(name)


def export(table: pa.Table, name: str, out: str | Path) -> Path:
    """Write `table` in the format `name` at `out` (a folder or a file, as the format
    writes); what was written. SinkError for an unknown format or on I/O failure."""
    fmt = export_format(name)
    target = Path(out)
    try:
        return fmt.write(table, target)
    except OSError as e:
        raise SinkError(f"{target}: cannot write the export ({e.strerror or e})") from None
