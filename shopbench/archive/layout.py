"""The Parquet layout of archived trajectories, derived from :class:`Trajectory`.

One row per episode. Every scalar an archive query filters on is a real column (ids, the
task, the miner and validator, block, epoch, bucket, success and the scores, turns, tool
calls, termination, the diagnosis of :mod:`shopbench.records.diagnosis`, timings); the
conversation (``messages``) and the validator's tool log (``tool_log``) are nested Arrow
lists of structs, so DuckDB unnests them and Hugging Face ``datasets`` returns them as lists
of dicts; the parts whose shape is open (the tool schemas, the outcome with its slots, the
judge verdict with a judge's own fields, the timings, the token map, a tool call's
arguments) are JSON text, which no reader can reshape. :func:`from_table` rebuilds every
record exactly from the columns it needs and ignores the derived ones, so
``from_table(to_table(ts)) == ts`` and each record's signing payload is unchanged.
``docs/archive.md`` says why this split and not one or the other.

The JSON Schema of the record (``docs/trajectory.schema.json``) is generated here:
``python -m shopbench.archive.layout docs/trajectory.schema.json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.bounds import oversized_rows
from shopbench.archive.errors import SinkError
from shopbench.errors import first_problem
from shopbench.records.trajectory import LATE_FIELDS, Trajectory

LAYOUT_VERSION = 2
"""Version of the column layout below; stored in every shard's metadata and manifest.
Layout 2 added the :data:`LATE_COLUMNS`; a layout 1 shard reads them as null."""

LAYOUT_METADATA_KEY = b"shopbench.layout_version"

SCHEMA_DOC = Path(__file__).resolve().parents[2] / "docs" / "trajectory.schema.json"
"""Where the generated JSON Schema of :class:`Trajectory` lives in the repository."""

_FUNCTION = pa.struct([("name", pa.string()), ("arguments", pa.string())])
_TOOL_CALL = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", _FUNCTION)])
MESSAGE_TYPE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("reasoning_content", pa.string()),
        ("tool_calls", pa.list_(_TOOL_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
TOOL_LOG_TYPE = pa.struct(
    [
        ("turn", pa.int32()),
        ("name", pa.string()),
        ("arguments", pa.string()),  # JSON text of the dict or the string the model sent
        ("result_digest", pa.string()),
        ("error", pa.string()),
        ("latency_ms", pa.float64()),
    ]
)
FAILURE_TYPE = pa.struct([("turn", pa.int32()), ("kind", pa.string()), ("detail", pa.string())])

SCHEMA = pa.schema(
    [
        # ids
        ("schema_version", pa.int32()),
        ("episode_id", pa.string()),
        ("task_id", pa.string()),
        ("cluster", pa.string()),
        ("validator_hotkey", pa.string()),
        ("miner_uid", pa.int64()),
        ("miner_hotkey", pa.string()),
        ("block", pa.int64()),
        ("epoch", pa.int64()),
        ("bucket", pa.int64()),
        # the task
        ("intent", pa.string()),
        ("query", pa.string()),
        ("split", pa.string()),
        # the agent
        ("agent", pa.string()),
        ("agent_model", pa.string()),
        ("agent_revision", pa.string()),
        ("system_prompt_version", pa.string()),
        # what came of it (success, the rule and judge scores, judge_id, tool_calls and
        # failure .. tool_errors are derived, for filtering)
        ("success", pa.bool_()),
        ("rule_score", pa.float64()),
        ("judge_score", pa.float64()),
        ("judge_id", pa.string()),
        ("score", pa.float64()),
        ("turns", pa.int32()),
        ("tool_calls", pa.int32()),
        ("termination", pa.string()),
        ("termination_detail", pa.string()),
        ("status", pa.string()),
        ("failure", pa.string()),
        ("failure_constraint", pa.string()),
        ("tool_errors", pa.int32()),
        # timings (started_at .. grade_ms are derived; the exact record is timings_json)
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("total_ms", pa.float64()),
        ("policy_ms", pa.float64()),
        ("env_ms", pa.float64()),
        ("grade_ms", pa.float64()),
        # the conversation
        ("messages", pa.list_(MESSAGE_TYPE)),
        ("tool_log", pa.list_(TOOL_LOG_TYPE)),
        ("failures", pa.list_(FAILURE_TYPE)),
        ("recommended", pa.list_(pa.string())),
        ("recommended_ids", pa.list_(pa.string())),
        # open shapes, as JSON text
        ("tools_json", pa.string()),
        ("token_map_json", pa.string()),
        ("outcome_json", pa.string()),
        ("judge_json", pa.string()),
        ("timings_json", pa.string()),
        # the record's own signature
        ("signer", pa.string()),
        ("signature", pa.string()),
    ],
    metadata={LAYOUT_METADATA_KEY: str(LAYOUT_VERSION).encode()},
)
"""The Arrow schema of a shard."""

FILTER_COLUMNS = tuple(
    f.name for f in SCHEMA if not pa.types.is_list(f.type) and not f.name.endswith("_json")
)
"""The scalar columns, in layout order (what queries filter on and tables show)."""

_DERIVED = frozenset(
    {"success", "rule_score", "judge_score", "judge_id", "tool_calls", "started_at",
     "total_ms", "policy_ms", "env_ms", "grade_ms", "failure", "failure_constraint",
     "tool_errors"}
)  # fmt: skip
_PLAIN = tuple(
    name
    for name in SCHEMA.names
    if name not in _DERIVED
    and name not in {"messages", "tool_log", "signer", "signature"}
    and not name.endswith("_json")
)

RECORD_COLUMNS = (
    *_PLAIN, "messages", "tool_log", "tools_json", "token_map_json", "outcome_json",
    "judge_json", "timings_json", "signer", "signature",
)  # fmt: skip
"""The columns a record is rebuilt from (the derived ones repeat what these hold)."""

LATE_COLUMNS = LATE_FIELDS
"""Record columns a shard written before them lacks (the record's late fields, one column
each); every reader reads them there as null, which is what such a record held."""


class Partition(BaseModel):
    """The hive partition a trajectory belongs to: ``validator=/date=/intent=``."""

    model_config = ConfigDict(frozen=True)

    validator: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="UTC day of the start")
    intent: str

    def path(self) -> str:
        """The relative directory, e.g. ``validator=5F…/date=2025-01-31/intent=shop``."""
        return f"validator={self.validator}/date={self.date}/intent={self.intent}"


UNKNOWN_VALIDATOR = "unknown"
"""The partition value of records that name no validator (local runs)."""


def partition_of(trajectory: Trajectory) -> Partition:
    """The partition of `trajectory`; a shard holds the rows of one partition only.

    SinkError when the validator hotkey cannot be a folder name (letters, digits, ``_.-``)
    or the start time is not a date."""
    try:
        day = datetime.fromtimestamp(trajectory.timings.started_at, UTC).strftime("%Y-%m-%d")
        return Partition(
            validator=trajectory.validator_hotkey or UNKNOWN_VALIDATOR,
            date=day,
            intent=str(trajectory.intent),
        )
    except (ValidationError, ValueError, OverflowError, OSError) as e:
        raise SinkError(
            f"episode {trajectory.episode_id}: no archive partition "
            f"(validator {trajectory.validator_hotkey!r}, started_at "
            f"{trajectory.timings.started_at}): {e}"
        ) from None


def _json(value: Any) -> str:
    # pydantic's serializer: compact UTF-8 JSON, floats in their shortest exact form, and
    # several times faster than the json module (this runs on the ingest path).
    return pydantic_core.to_json(value).decode("utf-8")


_AS_JSON = {"tools", "token_map", "outcome", "judge", "timings"}


def _row(t: Trajectory) -> dict[str, Any]:
    # The open shapes go straight from the models to JSON text (no Python dicts between).
    data = t.model_dump(mode="json", exclude=_AS_JSON)
    row = {name: data[name] for name in _PLAIN}
    row["messages"] = data["messages"]
    row["tool_log"] = [
        {**entry, "arguments": _json(entry["arguments"])} for entry in data["tool_log"]
    ]
    row["tools_json"] = _json(t.tools)
    row["token_map_json"] = _json(t.token_map)
    row["outcome_json"] = t.outcome.model_dump_json()
    row["judge_json"] = None if t.judge is None else t.judge.model_dump_json()
    row["timings_json"] = t.timings.model_dump_json()
    sig = data["signature"]
    row["signer"] = None if sig is None else sig["signer"]
    row["signature"] = None if sig is None else sig["signature"]
    timings = t.timings
    diagnosis = t.diagnosis
    row |= {
        "failure": diagnosis.kind,
        "failure_constraint": diagnosis.constraint,
        "tool_errors": sum(entry.error is not None for entry in t.tool_log),
        "success": t.outcome.success,
        "rule_score": t.outcome.mean_rule,
        "judge_score": None if t.judge is None else t.judge.score,
        "judge_id": None if t.judge is None else t.judge.judge_id,
        "tool_calls": t.tool_calls,
        "started_at": datetime.fromtimestamp(timings.started_at, UTC),
        "total_ms": timings.total_ms,
        "policy_ms": timings.policy_ms,
        "env_ms": timings.env_ms,
        "grade_ms": timings.grade_ms,
    }
    return row


def to_table(trajectories: Sequence[Trajectory]) -> pa.Table:
    """The trajectories as an Arrow table of :data:`SCHEMA`, one row each, in order."""
    return pa.Table.from_pylist([_row(t) for t in trajectories], schema=SCHEMA)


def _parse(text: str) -> Any:
    return pydantic_core.from_json(text)


IDENTITY_COLUMNS = ("episode_id", "task_id", "intent", "miner_uid", "miner_hotkey")
"""What :func:`table_rows` reads of a row it refuses to build, to name it."""
MAX_SHOWN_CHARS = 128
"""Characters of each identifying column read of a refused row."""
OVERSIZED = "__oversized__"
"""The key of :func:`table_rows`'s stand-in for a row over the record's limits: the reason."""


def _record(row: dict[str, Any]) -> dict[str, Any]:
    if OVERSIZED in row:
        raise SinkError(f"not read: {row[OVERSIZED]}")
    data = {name: row[name] for name in _PLAIN}
    data["messages"] = row["messages"]
    data["tool_log"] = [
        {**entry, "arguments": _parse(entry["arguments"])} for entry in row["tool_log"]
    ]
    data["tools"] = _parse(row["tools_json"])
    data["token_map"] = _parse(row["token_map_json"])
    data["outcome"] = _parse(row["outcome_json"])
    data["judge"] = None if row["judge_json"] is None else _parse(row["judge_json"])
    data["timings"] = _parse(row["timings_json"])
    data["signature"] = (
        None if row["signer"] is None else {"signer": row["signer"], "signature": row["signature"]}
    )
    return data


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of a table of :data:`SCHEMA` as Python dicts of the
    :data:`RECORD_COLUMNS` (derived and extra columns, such as hive partition columns, are
    left out); SinkError when one of those is missing. A row holding more than a record may
    (:func:`~shopbench.archive.bounds.oversized_rows`) is not read: it comes as its
    :data:`IDENTITY_COLUMNS`, cut short, and :data:`OVERSIZED` with the reason, on which
    :func:`record_of` raises."""
    missing = [name for name in RECORD_COLUMNS if name not in table.column_names]
    if [name for name in missing if name not in LATE_COLUMNS]:
        raise SinkError(f"not an archive table: missing columns {', '.join(missing)}")
    table = with_late_columns(table).select(list(RECORD_COLUMNS))
    over = oversized_rows(table, list(RECORD_COLUMNS))
    if not over:
        return table.to_pylist()
    # A row over the record's limits is never built: it stands as its identifying columns,
    # cut short, and the reason, which record_of raises (so it fails alone).
    keep = pa.array([i not in over for i in range(table.num_rows)])
    good = iter(table.filter(keep).to_pylist())
    named = table.filter(pc.invert(keep)).select(list(IDENTITY_COLUMNS))
    named = pa.table({
        name: pc.utf8_slice_codeunits(col, 0, MAX_SHOWN_CHARS)
        if pa.types.is_string(col.type) else col
        for name, col in zip(named.column_names, named.columns, strict=True)
    })  # fmt: skip
    stand_ins = iter(named.to_pylist())
    return [
        {**next(stand_ins), OVERSIZED: reason} if (reason := over.get(i)) else next(good)
        for i in range(table.num_rows)
    ]


def with_late_columns(table: pa.Table) -> pa.Table:
    """`table` with each of the :data:`LATE_COLUMNS` it lacks added as nulls."""
    for name in LATE_COLUMNS:
        if name not in table.column_names:
            field = SCHEMA.field(name)
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table


def scan_source_sql() -> str:
    """The DuckDB source over one ``?`` list of shard files, their columns read by name,
    in which every shard has the :data:`LATE_COLUMNS` (null where it was written before
    them; such columns come after the file's own). Filters and projections still reach
    each file's scan; a derived column a shard lacks is still missing, so a filter on it
    is refused rather than answered wrongly."""
    late = ", ".join(f'NULL::VARCHAR AS "{name}"' for name in LATE_COLUMNS)
    return (
        "(SELECT * FROM read_parquet(?, hive_partitioning=false, union_by_name=true) "
        f"UNION ALL BY NAME SELECT {late} WHERE false)"
    )


def rebuild(row: dict[str, Any]) -> Trajectory:
    """The trajectory of one row of :func:`table_rows`; SinkError saying why it is not one."""
    return validate_record(record_of(row))


def record_of(row: dict[str, Any]) -> dict[str, Any]:
    """The record of one row of :func:`table_rows` as the plain dict a trajectory validates
    from (for a valid record, equal to its ``model_dump(mode="json")``); SinkError when a
    JSON column does not parse."""
    try:
        return _record(row)
    except (ValueError, TypeError) as e:
        raise SinkError(str(e)) from None


def validate_record(record: dict[str, Any]) -> Trajectory:
    """The trajectory of a :func:`record_of` dict; SinkError saying why it is not one."""
    try:
        return Trajectory.model_validate(record)
    except (ValidationError, ValueError, TypeError) as e:
        why = first_problem(e) if isinstance(e, ValidationError) else str(e)
        raise SinkError(why) from None


def from_table(table: pa.Table) -> list[Trajectory]:
    """The trajectories of a table of :data:`SCHEMA` (extra columns, such as hive partition
    columns, are ignored). SinkError names the row that is not a valid trajectory."""
    out: list[Trajectory] = []
    for number, row in enumerate(table_rows(table)):
        try:
            out.append(rebuild(row))
        except SinkError as e:
            raise SinkError(f"row {number} is not a trajectory ({e})") from None
    return out


def record_dicts(table: pa.Table) -> list[dict[str, Any]]:
    """The records of a table of :data:`SCHEMA` as the plain dicts :func:`from_table`
    validates, without building the models: ``Trajectory.model_validate(d)`` of each is the
    record ``from_table`` returns. For bulk reads that only re-serialise (JSONL, TRL rows),
    where validation would cost more than everything else."""
    return [_record(row) for row in table_rows(table)]


_JSON_TEXT = (
    ("tools", "tools_json"), ("token_map", "token_map_json"), ("outcome", "outcome_json"),
    ("judge", "judge_json"), ("timings", "timings_json"),
)  # fmt: skip
_TOOL_LOG_FIELDS = ("turn", "name", "result_digest", "error", "latency_ms")


def record_json_sql() -> str:
    """A DuckDB expression over :data:`SCHEMA`'s columns whose value is each row's record as
    JSON text — the same mapping as :func:`record_dicts`, done by DuckDB, for bulk reads:
    ``Trajectory.model_validate_json`` of it is the record :func:`from_table` builds. The
    open shapes are spliced in as the JSON text they are stored as, never re-parsed."""
    plain = ", ".join(f"'{n}', \"{n}\"" for n in _PLAIN)
    log = ", ".join(f"'{n}', e.{n}" for n in _TOOL_LOG_FIELDS)
    opened = ", ".join(f"'{name}', json(\"{column}\")" for name, column in _JSON_TEXT)
    return (
        f"CAST(json_object({plain}, 'messages', \"messages\", "
        f"'tool_log', list_transform(\"tool_log\", lambda e: json_object({log}, "
        f"'arguments', json(e.arguments))), {opened}, "
        "'signature', CASE WHEN \"signer\" IS NULL THEN NULL ELSE "
        "json_object('signer', \"signer\", 'signature', \"signature\") END) AS VARCHAR)"
    )


def trajectory_json_schema() -> str:
    """The JSON Schema of :class:`Trajectory` as the text ``docs/trajectory.schema.json``
    holds (sorted keys, two-space indent, trailing newline)."""
    return json.dumps(Trajectory.model_json_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str]) -> int:
    """Write the JSON Schema of :class:`Trajectory` to the path given (default: the doc)."""
    target = Path(argv[0]) if argv else SCHEMA_DOC
    target.write_text(trajectory_json_schema(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
