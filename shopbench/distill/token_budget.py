"""An SFT dataset cut to a budget of tokens, distinct tasks first.

Arms of an experiment compared "at equal cost" must train on the same number of tokens: on a
CPU the tokens a step reads are what the step costs. :func:`sample_to_tokens` takes the rows
of a built dataset (curation's weights already in it as repeats) in rounds over its tasks —
every task's first row before any task's second, the tasks in a seeded order, each task's
rows in a seeded order — and keeps them while they fit the budget, so a pool with more tasks
than the budget holds gives distinct tasks, and only a pool with fewer gives repeats. Rows
longer than `max_length` are never taken (the trainer would drop them). The validation split
and the build report are kept as they are, so the result trains and reads like the dataset it
came from.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from shopbench.distill.dataset import REPORT, SFT_SCHEMA, load_sft
from shopbench.distill.errors import DistillError
from shopbench.distill.masks import IGNORE, encode_row

SAMPLE_REPORT = "tokens.json"
"""The sample's report, beside its rows."""


class TokenSample(BaseModel):
    """What a token-budget sample took from its pool."""

    budget: int = Field(description="tokens asked for")
    tokens: int = Field(description="tokens of the rows taken (what training reads)")
    trained_tokens: int = Field(description="of those, tokens that take loss")
    rows: int = Field(description="rows taken")
    tasks: int = Field(description="distinct tasks of the rows taken")
    episodes: int = Field(description="distinct episodes of the rows taken")
    pool_rows: int = Field(description="train rows in the pool (repeats counted)")
    pool_tasks: int = Field(description="distinct tasks in the pool")
    pool_tokens: int = Field(description="tokens of the pool's rows that fit max_length")
    too_long: int = Field(description="pool rows over max_length, never taken")
    max_length: int = Field(description="the trainer's max length the rows were held to")
    seed: int


def _rank(seed: int, *parts: str) -> str:
    return hashlib.sha256("\x1f".join([str(seed), *parts]).encode()).hexdigest()


def round_robin(rows: list[dict[str, Any]], seed: int) -> list[int]:
    """The indices of `rows` in the order a budget takes them: round r holds every task's
    r-th row (a task's rows in a seeded order), each round's tasks in one seeded order."""
    by_task: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_task.setdefault(str(row.get("task_id") or row.get("episode_id")), []).append(i)
    keyed: list[tuple[int, str, int]] = []
    for task, indices in by_task.items():
        ordered = sorted(
            indices, key=lambda i: _rank(seed, task, str(rows[i].get("episode_id")), str(i))
        )
        keyed += [(r, _rank(seed, task), i) for r, i in enumerate(ordered)]
    return [i for _, _, i in sorted(keyed)]


def sample_to_tokens(
    data: Path, out: Path, *, tokenizer: Any, template: str, budget: int, max_length: int,
    seed: int = 0,
) -> TokenSample:  # fmt: skip
    """Write to `out` the rows of the SFT dataset at `data` that a budget of `budget` tokens
    takes (:func:`round_robin` order; a row that does not fit is passed over for a shorter
    one), with its validation split and build report; the report also goes to
    ``out/tokens.json``. DistillError when no row fits."""
    data, out = Path(data), Path(out)
    splits = load_sft(data)
    rows = splits["train"]
    encoded = [encode_row(tokenizer, template, r) for r in rows]
    lengths = [len(e.input_ids) for e in encoded]
    trained = [sum(1 for x in e.labels if x != IGNORE) for e in encoded]
    fits = [n <= max_length and t > 0 for n, t in zip(lengths, trained, strict=True)]
    taken: list[int] = []
    total = 0
    for i in round_robin(rows, seed):
        if fits[i] and total + lengths[i] <= budget:
            taken.append(i)
            total += lengths[i]
    if not taken:
        raise DistillError(
            f"{data}: no train row of at most {max_length} tokens fits a budget of {budget}"
        )
    taken.sort()  # the trainer shuffles; the file keeps the pool's order
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(_table([rows[i] for i in taken]), out / "train.parquet")
    pq.write_table(_table(splits["validation"]), out / "validation.parquet")
    shutil.copyfile(data / REPORT, out / REPORT)
    report = TokenSample(
        budget=budget, tokens=total, trained_tokens=sum(trained[i] for i in taken),
        rows=len(taken), tasks=len({rows[i].get("task_id") for i in taken}),
        episodes=len({rows[i].get("episode_id") for i in taken}), pool_rows=len(rows),
        pool_tasks=len({r.get("task_id") for r in rows}),
        pool_tokens=sum(n for n, ok in zip(lengths, fits, strict=True) if ok),
        too_long=sum(1 for n in lengths if n > max_length), max_length=max_length, seed=seed,
    )  # fmt: skip
    (out / SAMPLE_REPORT).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return report


def _table(rows: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    fixed = [
        {**r, "tools": r["tools"] if isinstance(r.get("tools"), str) or r.get("tools") is None
         else json.dumps(r["tools"])}
        for r in rows
    ]  # fmt: skip
    return pa.Table.from_pylist(fixed, schema=SFT_SCHEMA)


def read_token_sample(folder: Path) -> TokenSample | None:
    """The report of the token sample at `folder` (None when there is none)."""
    path = Path(folder) / SAMPLE_REPORT
    if not path.is_file():
        return None
    return TokenSample.model_validate_json(path.read_text(encoding="utf-8"))
