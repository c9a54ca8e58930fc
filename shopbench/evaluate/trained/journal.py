"""The journal of a long evaluation: every finished episode appended as one JSON line, so an
interrupted run resumes where it stopped instead of playing everything again.

A journal belongs to one evaluation: :func:`open_journal` keeps, beside it, what the run was
asked (its key: the model, the tasks, the limits, the decoding...) and refuses to resume a
journal of another; :func:`read_journal` reads back what was played, leaving out a line the
interruption cut (that episode is played again). The experiment keeps one per arm and
decoding; ``shopbench distill eval`` one in its ``--out`` folder.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from shopbench.evaluate.errors import ModelEvalError
from shopbench.records.trajectory import Trajectory

JOURNAL = "played.jsonl"
"""The journal's file name in an evaluation's folder."""
KEY = "played.key.json"
"""What the journal's run was asked, beside it."""


def read_journal(path: Path) -> list[Trajectory]:
    """The episodes an interrupted evaluation wrote to its journal, one JSON line each; a
    line cut by the interruption (or otherwise unreadable) is left out and played again."""
    if not path.is_file():
        return []
    # Not read_trajectories, which refuses a bad line: the run resumed appends after a torn
    # line, so one can sit mid-file, and its episode is simply played again.
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(Trajectory.model_validate_json(line))
        except ValueError:
            continue
    return out


def by_agent(played: list[Trajectory]) -> dict[str, list[Trajectory]]:
    """The journal's episodes by the policy spec that played them."""
    out: dict[str, list[Trajectory]] = defaultdict(list)
    for t in played:
        out[t.agent].append(t)
    return dict(out)


def open_journal(folder: Path, key: Mapping[str, Any]) -> tuple[list[Trajectory], Path]:
    """The episodes `folder`'s journal holds for the run asked `key` (none for a new one), and
    the journal's path; ModelEvalError when the folder's journal holds episodes of another
    run (one that stopped before any episode, a bad model path say, is simply replaced)."""
    path = folder / JOURNAL
    key_file = folder / KEY
    wanted = json.loads(json.dumps(key, sort_keys=True, default=str))
    earlier = read_journal(path)
    if earlier and key_file.is_file():
        try:
            kept = json.loads(key_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ModelEvalError(f"{key_file}: unreadable ({e})") from None
        if kept != wanted:
            changed = sorted(k for k in set(kept) | set(wanted) if kept.get(k) != wanted.get(k))
            raise ModelEvalError(
                f"{folder} holds the journal of another evaluation (differs in: "
                f"{', '.join(changed)}); give another --out, or the same options"
            )
        return earlier, path
    folder.mkdir(parents=True, exist_ok=True)
    key_file.write_text(json.dumps(wanted, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    path.unlink(missing_ok=True)  # a journal without its key: nothing says what it played
    return [], path


def appender(keep: IO[str]) -> Callable[[str, Trajectory], None]:
    """An ``on_done`` that appends each finished episode to the open journal `keep`."""

    def add(_spec: str, t: Trajectory) -> None:
        keep.write(t.model_dump_json() + "\n")
        keep.flush()

    return add


def close_journal(path: Path) -> None:
    """Remove a finished evaluation's journal and its key (its report holds the episodes)."""
    path.unlink(missing_ok=True)
    (path.parent / KEY).unlink(missing_ok=True)
