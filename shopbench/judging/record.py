"""Reading a trajectory for judging, leniently: what a judge can use, and what was wrong.

A judge must never crash on its input. A :class:`~shopbench.records.trajectory.Trajectory` is read
as it is; a raw record (a mapping, e.g. one JSON line of an archive) that does not validate
as a trajectory is read field by field, keeping every message and tool-log entry that
parses and noting the rest. Assistant text longer than the episode limit (in UTF-8 bytes) is
cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from shopbench.chat import MAX_TEXT_BYTES, ChatMessage, cut_utf8, utf8_size
from shopbench.errors import first_problem
from shopbench.records.outcome import Outcome
from shopbench.records.trajectory import ToolLogEntry, Trajectory

MAX_JUDGED_TEXT_BYTES = MAX_TEXT_BYTES
"""The judge reads at most this many UTF-8 bytes of each message's reasoning and content."""

_MAX_NOTED = 3  # unreadable items described one by one; more are counted

M = TypeVar("M", bound=BaseModel)


@dataclass(slots=True)
class JudgedRecord:
    """The parts of a trajectory a judge reads, and notes on what could not be read."""

    query: str
    task_id: str
    agent: str
    miner: str
    messages: list[ChatMessage]
    tool_log: list[ToolLogEntry]
    notes: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)  # graded target titles, hidden answers
    outcome: Outcome | None = None  # the grader's verdict: each graded slot's constraints
    token_map: dict[str, str] = field(default_factory=dict)  # episode token → catalog id


def _miner_key(uid: Any, hotkey: Any, agent: str) -> str:
    if hotkey:
        return str(hotkey)
    if uid is not None:
        return f"uid:{uid}"
    return f"agent:{agent}"


def read_record(record: Trajectory | Mapping[str, Any]) -> JudgedRecord:
    """The judgeable parts of `record`; never raises for a mapping of any shape."""
    if isinstance(record, Trajectory):
        agent = record.agent
        return JudgedRecord(
            query=record.query,
            task_id=record.task_id,
            agent=agent,
            miner=_miner_key(record.miner_uid, record.miner_hotkey, agent),
            messages=list(record.messages),
            tool_log=list(record.tool_log),
            secrets=secrets_of(record.outcome),
            outcome=record.outcome,
            token_map=record.token_map,
        )
    if not isinstance(record, Mapping):
        return JudgedRecord(
            query="", task_id="", agent="", miner="agent:", messages=[], tool_log=[],
            notes=[f"the record is a {type(record).__name__}, not a trajectory; nothing to judge"],
        )
    try:
        return read_record(Trajectory.model_validate(record))
    except ValidationError as e:
        note = (
            f"the record is not a valid trajectory ({first_problem(e, default='record')}); "
            "judged on the "
            "fields that could be read"
        )
    notes = [note]
    query = record.get("query")
    if not isinstance(query, str):
        notes.append("the record has no query")
        query = ""
    agent = str(record.get("agent") or "")
    return JudgedRecord(
        query=query,
        task_id=str(record.get("task_id") or ""),
        agent=agent,
        miner=_miner_key(record.get("miner_uid"), record.get("miner_hotkey"), agent),
        messages=_items(record.get("messages"), ChatMessage, "message", notes),
        tool_log=_items(record.get("tool_log"), ToolLogEntry, "tool-log entry", notes),
        notes=notes,
        secrets=_raw_secrets(record.get("outcome")),
        outcome=_raw_outcome(record.get("outcome")),
        token_map=_raw_token_map(record.get("token_map")),
    )


def secrets_of(outcome: Outcome) -> list[str]:
    """What the grader knew and the agent was not told: the target titles graded against
    and a knowledge task's key attribute (present for graded slots only)."""
    return [
        h.expected
        for slot in outcome.slots
        for h in slot.constraints
        if h.kind in ("title", "key_attribute")
    ]


def _raw_outcome(raw: Any) -> Outcome | None:
    try:
        return Outcome.model_validate(raw)
    except ValidationError:
        return None


def _raw_secrets(raw: Any) -> list[str]:
    outcome = _raw_outcome(raw)
    return secrets_of(outcome) if outcome is not None else []


def _raw_token_map(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items() if isinstance(v, str)}


def _items(raw: Any, model: type[M], what: str, notes: list[str]) -> list[M]:
    """The items of `raw` that validate as `model`, noting the ones that do not."""
    if raw is None:
        notes.append(f"the record has no {what}s")
        return []
    if not isinstance(raw, list):
        notes.append(f"the record's {what}s are not a list")
        return []
    out: list[M] = []
    bad: list[str] = []
    for i, item in enumerate(raw):
        try:
            out.append(model.model_validate(item))
        except ValidationError as e:
            bad.append(f"{what} {i} ({first_problem(e, default=what)})")
    if bad:
        shown = "; ".join(bad[:_MAX_NOTED])
        more = f" and {len(bad) - _MAX_NOTED} more" if len(bad) > _MAX_NOTED else ""
        notes.append(f"unreadable and skipped: {shown}{more}")
    return out


def turn_text(message: ChatMessage) -> tuple[str, bool]:
    """An assistant message's own words (reasoning, then content), cut to the judge's limit;
    the flag says whether anything was cut."""
    cut = False
    parts: list[str] = []
    for text in (message.reasoning_content, message.content):
        if not text:
            continue
        if utf8_size(text) > MAX_JUDGED_TEXT_BYTES:
            text, cut = cut_utf8(text, MAX_JUDGED_TEXT_BYTES), True
        parts.append(text)
    return "\n".join(parts), cut
