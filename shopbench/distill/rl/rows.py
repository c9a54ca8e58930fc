"""The GRPO dataset: one row per task, checked before any training starts.

A row is what TRL passes to :meth:`ShopbenchEnvironment.reset
<shopbench.distill.rl.environment.ShopbenchEnvironment.reset>`: the conversational prompt
(the arena's system prompt and an empty user message that ``reset`` fills with the query),
the task as JSON, the episode key every rollout of the row's group plays with, and the
environment that plays the task's intent. Keys derive from the seed and the task id, so a
run is reproducible and a task keeps its tokens across epochs.

Refused, naming the line or task: a row without a task, a task of the held-out split, a
task whose target is in a held-out product group (RL on held-out groups would leak them into
the weights evaluation measures).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shopbench.distill.errors import RLDataError
from shopbench.distill.rl.environment import environment_name, parse_row_task
from shopbench.errors import ShopbenchError
from shopbench.tasks.model import Task

if TYPE_CHECKING:
    from shopbench.env.env import ShoppingEnv


def episode_key(task_id: str, seed: int) -> bytes:
    """The 32-byte episode key of `task_id`'s group in a run seeded with `seed`."""
    return hashlib.sha256(f"shopbench-grpo:{seed}:{task_id}".encode()).digest()


def check_trainable(tasks: Sequence[Task], env: ShoppingEnv) -> None:
    """RLDataError for the first task that RL must not see: one of the held-out split, or
    one whose target lies in a held-out product group of the release's split."""
    from shopbench.tasks.split import SplitRule, target_groups

    rule = SplitRule()
    for task in tasks:
        if task.split == "heldout":
            raise RLDataError(
                f"task {task.id!r} is from the held-out split; RL on held-out tasks would "
                "leak them into the model that evaluation measures on them"
            )
        groups, _ = target_groups([task], env.catalog)
        held = sorted(g for g in groups if rule.is_heldout(g))
        if held:
            raise RLDataError(
                f"task {task.id!r} targets the held-out product group {held[0]!r}; RL on "
                "held-out groups would leak them"
            )


def read_rows(path: Path) -> list[Task]:
    """The tasks of a task file, or of a JSONL file of rows that carry a ``task`` field;
    RLDataError naming the first line without a task or with a bad one."""
    from shopbench.tasks.io import is_shopbench_record, parse_task_line

    tasks: list[Task] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise RLDataError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise RLDataError(f"{path}: not UTF-8 text") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise RLDataError(f"{path}:{lineno}: not JSON ({e.msg})") from None
        try:
            if isinstance(record, dict) and not is_shopbench_record(record) and (
                "task" in record or "prompt" in record
            ):
                tasks.append(parse_row_task(record.get("task")))
            else:
                tasks.append(parse_task_line(line))
        except ShopbenchError as e:  # the line's own reason: no task, a bad task
            raise RLDataError(f"{path}:{lineno}: {e}") from None
    if not tasks:
        raise RLDataError(f"{path}: no tasks")
    return tasks


def build_rows(tasks: Sequence[Task], env: ShoppingEnv, seed: int) -> list[dict[str, Any]]:
    """The dataset rows of `tasks` (checked with :func:`check_trainable` first)."""
    check_trainable(tasks, env)
    return [
        {
            "prompt": [
                {"role": "system", "content": env.system_prompt},
                {"role": "user", "content": ""},
            ],
            "task": task.model_dump_json(),
            "episode_key": episode_key(task.id, seed).hex(),
            "environment": environment_name(task),
        }
        for task in tasks
    ]
