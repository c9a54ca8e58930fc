"""The contamination line of a model's evaluation: how many evaluation queries overlap the
queries the model was trained on.

The overlap test is curation's (:class:`shopbench.curation.contamination.TestSet`:
normalised words weighted by IDF, containment at or above a threshold or a training query
all but covered, with curation's defaults): here the training queries are the indexed set
and each evaluation query is looked up in it.

A training set is read from any of the files the pipeline writes: a task file; JSONL whose
records have a ``query`` (trajectories, tasks) or ``messages`` (SFT rows: the first user
message is the query); Parquet with a ``query`` column (the archive's shards, a curated set)
or a ``messages`` column (``shopbench distill build``'s train and validation files); or a
folder of such files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.curation.config import ContaminationParams
from shopbench.curation.contamination import TestSet
from shopbench.evaluate.errors import TrainingSetError

_DEFAULTS = ContaminationParams()
DEFAULT_THRESHOLD: float = _DEFAULTS.threshold
_DATA_SUFFIXES = (".jsonl", ".parquet")


class Contamination(BaseModel):
    """How many evaluation queries overlap a training set."""

    model_config = ConfigDict(frozen=True)

    training_set: str
    training_queries: int
    evaluation_queries: int
    overlapping: int = Field(description="evaluation queries at or above the threshold")
    threshold: float
    examples: list[str] = Field(description="up to five overlapping task ids")

    def line(self) -> str:
        """The report's one line."""
        return (
            f"{self.overlapping} of {self.evaluation_queries} evaluation queries overlap the "
            f"{self.training_queries} training queries of {self.training_set} "
            f"(weighted words, containment ≥ {self.threshold:g})"
        )


def _first_user(messages: Any) -> str | None:
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError:
            return None
    for m in messages or []:
        if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str):
            return str(m["content"])
    return None


def _from_record(record: Any) -> str | None:
    if not isinstance(record, dict):
        return None
    if isinstance(record.get("query"), str):
        return str(record["query"])
    return _first_user(record.get("messages"))


def _jsonl(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                query = _from_record(json.loads(line))
            except json.JSONDecodeError as e:
                raise TrainingSetError(f"{path}:{n}: not JSON ({e.msg})") from None
            if query:
                yield query


def _parquet(path: Path) -> Iterator[str]:
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise TrainingSetError(f"{path}: not a Parquet file ({e})") from None
    column = "query" if "query" in names else "messages" if "messages" in names else None
    if column is None:
        raise TrainingSetError(f"{path}: neither a query nor a messages column")
    for batch in pq.ParquetFile(path).iter_batches(columns=[column]):
        for value in batch.column(0).to_pylist():
            query = value if column == "query" else _first_user(value)
            if query:
                yield query


def training_queries(path: Path) -> list[str]:
    """Every query of the training set at `path` (a file or a folder of files)."""
    if path.is_dir():
        # In a folder only the data files: a .json beside them is metadata (distill build's
        # build.json), not a training set.
        files = sorted(p for p in path.rglob("*") if p.suffix in _DATA_SUFFIXES and p.is_file())
    elif path.is_file():
        files = [path]
    else:
        raise TrainingSetError(f"{path}: no such training set")
    queries: list[str] = []
    try:
        for f in files:
            queries.extend(_parquet(f) if f.suffix == ".parquet" else _jsonl(f))
    except OSError as e:
        raise TrainingSetError(f"{path}: cannot read it ({e.strerror})") from None
    if not queries:
        raise TrainingSetError(f"{path}: no queries in it")
    return queries


def contamination(
    evaluation: Sequence[tuple[str, str]],
    training_set: Path,
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> Contamination:
    """The overlap of the (task id, query) pairs of an evaluation with a training set."""
    queries = training_queries(training_set)
    params = _DEFAULTS.model_copy(update={"threshold": threshold})
    index = TestSet(str(training_set), queries, params)
    hits = [task_id for task_id, q in evaluation if index.match(q) is not None]
    return Contamination(
        training_set=str(training_set),
        training_queries=len(queries),
        evaluation_queries=len(evaluation),
        overlapping=len(hits),
        threshold=threshold,
        examples=hits[:5],
    )
