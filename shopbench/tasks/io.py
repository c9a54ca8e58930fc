"""Task files: our JSONL and ShoppingBench's, read line by line, written back exactly.

Our format is one ``Task.model_dump_json()`` per line. ShoppingBench's is described in
:mod:`shopbench.tasks.shoppingbench_format`. A reader tells them apart per line (our
records carry ``id`` and ``intent``), so one file may mix them. A malformed line is
rejected with ``path:line: reason`` and the rest still loads, unless `strict`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.errors import ImportRecordError
from shopbench.records.task import Intent
from shopbench.tasks.errors import TaskError
from shopbench.tasks.model import Task
from shopbench.tasks.shoppingbench_format import (
    intent_name,
    task_from_record,
    task_to_record,
    validation_reason,
)

TaskFormat = Literal["shopbench", "shoppingbench"]
TASK_FORMATS: tuple[TaskFormat, ...] = ("shopbench", "shoppingbench")


class TaskLoad(BaseModel):
    """What reading a task file gave: the tasks, and every line it rejected with why."""

    model_config = ConfigDict(frozen=True)

    path: str
    lines_read: int = Field(description="non-blank lines")
    tasks: list[Task]
    rejected: list[str] = Field(default_factory=list, description='"path:line: reason" each')

    def counts(self) -> dict[str, int]:
        """Tasks per intent, in the order the intents first appear."""
        return dict(Counter(t.intent for t in self.tasks))


def is_shopbench_record(record: object) -> bool:
    """True for a line in our own format (it names its id and intent)."""
    return isinstance(record, dict) and "id" in record and "intent" in record


def parse_task_line(text: str, intent: Intent | str | None = None) -> Task:
    """One line of either format as a task; raise TaskError with the reason if it is bad.

    `intent` (ours or ShoppingBench's ``web``) is the intent the line must have; for a
    ShoppingBench record it replaces inferring the intent from the record's shape.
    """
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise TaskError(f"not JSON ({e.msg} at column {e.colno})") from None
    if not is_shopbench_record(record):
        return task_from_record(record, intent)
    try:
        task = Task.model_validate(record)
    except ValidationError as e:
        raise TaskError(validation_reason(e)) from None
    if intent is not None and intent_name(intent) != task.intent:
        raise TaskError(f"intent {intent_name(intent)!r} given, but the task is {task.intent!r}")
    return task


def read_tasks(
    path: str | Path, *, intent: Intent | str | None = None, strict: bool = False
) -> TaskLoad:
    """Read a task file in either format (mixed lines allowed).

    Bad lines are listed in `rejected` as ``path:line: reason``; with `strict` the first
    one raises ImportRecordError instead. A record repeated in the file is rejected the
    second time (same id). Raises TaskError if the file cannot be read.
    """
    p = Path(path)
    if intent is not None:
        intent = intent_name(intent)  # a bad --intent is the caller's error, not a line's
    try:
        handle = p.open("rb")
    except OSError as e:
        raise TaskError(f"{p}: cannot read task file ({e.strerror})") from None
    tasks: list[Task] = []
    rejected: list[str] = []
    seen: dict[str, int] = {}
    n_read = 0
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            n_read += 1
            try:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise TaskError(f"not UTF-8 text (byte {e.start})") from None
                task = parse_task_line(line, intent)
                if task.id in seen:
                    first = seen[task.id]
                    raise TaskError(f"duplicate task id {task.id!r} (first on line {first})")
            except TaskError as e:
                if strict:
                    raise ImportRecordError(str(p), lineno, str(e)) from None
                rejected.append(f"{p}:{lineno}: {e}")
                continue
            seen[task.id] = lineno
            tasks.append(task)
    return TaskLoad(path=str(p), lines_read=n_read, tasks=tasks, rejected=rejected)


def format_task(task: Task, fmt: TaskFormat = "shopbench") -> str:
    """One line (without newline) of `task` in our format or ShoppingBench's."""
    if fmt == "shopbench":
        return task.model_dump_json()
    if fmt == "shoppingbench":
        # ShoppingBench's files are json.dumps with default separators, UTF-8 unescaped.
        return json.dumps(task_to_record(task), ensure_ascii=False)
    raise TaskError(f"unknown task format {fmt!r} (allowed: {', '.join(TASK_FORMATS)})")


def write_tasks(path: str | Path, tasks: Iterable[Task], fmt: TaskFormat = "shopbench") -> int:
    """Write tasks one per line (temp file, then rename); return how many were written."""
    p = Path(path)
    lines = [format_task(t, fmt) for t in tasks]
    tmp = p.with_name(p.name + ".tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line + "\n")
        tmp.replace(p)
    except OSError as e:
        raise TaskError(f"{p}: cannot write task file ({e.strerror})") from None
    return len(lines)


def read_task_at(path: str | Path, line: int) -> Task:
    """The task on line `line` (from 1) of a task file in either format.

    TaskError names the file and line when the file is missing, the line is out of range,
    blank, or not a valid task.
    """
    p = Path(path)
    if not p.is_file():
        raise TaskError(f"{p}: task file not found")
    if line < 1:
        raise TaskError(f"{p}:{line}: line numbers start at 1")
    try:
        with p.open("rb") as handle:
            for lineno, raw in enumerate(handle, start=1):
                if lineno < line:
                    continue
                if not raw.strip():
                    raise TaskError(f"{p}:{line}: blank line, no task")
                try:
                    return parse_task_line(raw.decode("utf-8"))
                except UnicodeDecodeError as e:
                    raise TaskError(f"{p}:{line}: not UTF-8 text (byte {e.start})") from None
                except TaskError as e:
                    raise TaskError(f"{p}:{line}: not a task ({e})") from None
    except OSError as e:
        raise TaskError(f"{p}: cannot read task file ({e.strerror})") from None
    raise TaskError(f"{p}: has no line {line}")
