"""The file writers of exports of a query's result: a Parquet folder, JSONL records,
ShoppingBench traces (ATIF documents: :mod:`shopbench.traces.atif`; which format is which:
:mod:`shopbench.traces.formats`).

Each export takes the Arrow table :func:`shopbench.archive.query.query` returned, so the
filters and the store's embargo have already been applied; nothing here reads a shard.

ShoppingBench's trace format (its ``run_rollout.py`` writes it, ``run_evaluate.py`` reads
it) is one JSON line per episode holding the list of its steps; a step is ``{"prompt":
[system, user], "completion": {"reasoning_content", "content", "message": {"think",
"tool_call": [{"name", "parameters", "tool_call_id"}], "obs": [{"tool_call_id",
"results"}], "response"}}, "extra_info": {"step", "query", "timestamp"}}``. One of our
assistant turns is one step: ``think`` is its reasoning, ``tool_call`` its calls with the
arguments parsed, ``obs`` the tool messages answering them, ``response`` its content. The
``recommend_product`` call's ``product_ids`` carry the catalog ids (through the record's
token map), as ShoppingBench's evaluator looks them up in the catalog; every other id stays
the episode token the agent saw. ``prompt`` holds our system prompt and the user query
(ShoppingBench re-renders the whole history into each step's user prompt; we do not).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shopbench.archive.annotations.append import write_annotations
from shopbench.archive.annotations.read import AnnotationRead
from shopbench.archive.errors import SinkError
from shopbench.archive.layout import from_table
from shopbench.chat import read_arguments
from shopbench.records.tools import Tool
from shopbench.records.trajectory import Trajectory
from shopbench.traces.annotations import bound_all

DATASET_ROWS_PER_FILE = 100_000
"""Rows per Parquet file of a ``datasets`` export."""

def annotations_path(written: Path) -> Path:
    """Where an export's annotations go: ``annotations.jsonl`` in an exported folder (beside
    ``data/``, which ``load_dataset`` reads alone), ``<name>.annotations.jsonl`` beside an
    exported file."""
    if written.is_dir():
        return written / "annotations.jsonl"
    return written.with_name(f"{written.stem}.annotations.jsonl")


def export_annotations(table: pa.Table, read: AnnotationRead, path: Path) -> int:
    """Write at `path` the live annotations of the episodes in `table` that were made on
    exactly the records exported (:func:`~shopbench.traces.annotations.bound`), one signed
    line each, as the annotator's file holds it; returns how many. None: no file (an old
    one at `path` is removed, so it never describes another export)."""
    grouped = read.by_episode()
    ids = [i for i in table.column("episode_id").to_pylist() if i in grouped]
    kept: list[Any] = []
    if ids:
        picked = table.filter(pc.is_in(table.column("episode_id"), pa.array(ids)))
        for annotations in bound_all(grouped, from_table(picked)).values():
            kept.extend(annotations)
    try:
        if not kept:
            path.unlink(missing_ok=True)
            return 0
        write_annotations(path, sorted(kept, key=lambda a: (a.episode_id, a.created_at, a.id)))
    except OSError as e:
        raise SinkError(f"{path}: cannot write the annotations ({e.strerror or e})") from None
    return len(kept)


def export_datasets(table: pa.Table, out: Path) -> Path:
    """A folder ``datasets.load_dataset("parquet", data_dir=out)`` loads as one ``train``
    split: ``out/data/train-NNNNN-of-MMMMM.parquet``, zstd, the shard layout's columns."""
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    for old in data.glob("train-*.parquet"):
        old.unlink()
    n = max(1, -(-table.num_rows // DATASET_ROWS_PER_FILE))
    for i in range(n):
        part = table.slice(i * DATASET_ROWS_PER_FILE, DATASET_ROWS_PER_FILE)
        pq.write_table(part, data / f"train-{i:05d}-of-{n:05d}.parquet", compression="zstd")
    return out


def export_jsonl(table: pa.Table, out: Path) -> Path:
    """One :class:`Trajectory` JSON object per line (what ``read_trajectories`` reads)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for t in from_table(table):
            f.write(t.model_dump_json() + "\n")
    return out


def export_shoppingbench(table: pa.Table, out: Path) -> Path:
    """One ShoppingBench rollout line (the list of steps) per episode."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for t in from_table(table):
            f.write(json.dumps(shoppingbench_steps(t), ensure_ascii=False) + "\n")
    return out


def _parameters(arguments: str, name: str, token_map: dict[str, str]) -> Any:
    params, _ = read_arguments(arguments)
    if params is None:
        return arguments  # what the agent sent, as it sent it
    if name == Tool.RECOMMEND_PRODUCT and isinstance(params, dict):
        ids = params.get("product_ids")
        if isinstance(ids, str):
            tokens = [s.strip() for s in ids.split(",")]
            params = {**params, "product_ids": ",".join(token_map.get(s, s) for s in tokens)}
    return params


def shoppingbench_steps(t: Trajectory) -> list[dict[str, Any]]:
    """The episode as ShoppingBench's list of rollout steps (see the module docstring)."""
    system = next((m.content or "" for m in t.messages if m.role == "system"), "")
    prompt = [{"role": "system", "content": system}, {"role": "user", "content": t.query}]
    answers: dict[str, str] = {
        m.tool_call_id: m.content or "" for m in t.messages if m.role == "tool" and m.tool_call_id
    }
    steps: list[dict[str, Any]] = []
    started_ms = int(t.timings.started_at * 1000)
    elapsed = 0.0
    assistant = [m for m in t.messages if m.role == "assistant"]
    for number, m in enumerate(assistant, start=1):
        calls = m.tool_calls or []
        message: dict[str, Any] = {}
        if m.reasoning_content:
            message["think"] = m.reasoning_content
        if calls:
            message["tool_call"] = [
                {
                    "name": c.function.name,
                    "parameters": _parameters(c.function.arguments, c.function.name, t.token_map),
                    "tool_call_id": c.id,
                }
                for c in calls
            ]
            message["obs"] = [
                {"tool_call_id": c.id, "results": answers[c.id]} for c in calls if c.id in answers
            ]
        if m.content:
            message["response"] = m.content
        if number <= len(t.timings.turns):
            turn = t.timings.turns[number - 1]
            elapsed += turn.policy_ms + turn.env_ms
        steps.append({
            "prompt": prompt,
            "completion": {
                "reasoning_content": m.reasoning_content or "",
                "content": m.content or "",
                "message": message,
            },
            "extra_info": {
                "step": number, "query": t.query, "timestamp": started_ms + int(elapsed),
            },
        })  # fmt: skip
    return steps
