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

The group overlap says how many of the evaluation's product groups the training data has
touched: every product id an assistant tool call of a training row names (an argument
``product_id`` or ``product_ids``, comma-separated, of any tool) is looked up in the
catalog. An SFT row stores the ids the agent saw, which are episode tokens
(:mod:`shopbench.env.tokens`), not catalog ids; a record that carries its ``token_map`` (a
trajectory) has them translated, and ids the catalog does not know are counted as unplaced,
their groups unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.curation.contamination import ContaminationParams, TestSet
from shopbench.evaluate.errors import TrainingSetError

if TYPE_CHECKING:
    from shopbench.catalog.store import Catalog

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


def _data_files(path: Path) -> list[Path]:
    if path.is_dir():
        # In a folder only the data files: a .json beside them is metadata (distill build's
        # build.json), not a training set.
        return sorted(p for p in path.rglob("*") if p.suffix in _DATA_SUFFIXES and p.is_file())
    if path.is_file():
        return [path]
    raise TrainingSetError(f"{path}: no such training set")


def training_queries(path: Path) -> list[str]:
    """Every query of the training set at `path` (a file or a folder of files)."""
    files = _data_files(path)
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


PRODUCT_ID_ARGUMENTS = ("product_id", "product_ids")
"""Tool-call arguments that name products (comma-separated ids), whatever the tool."""
SHARED_LISTED = 20
"""Shared groups listed by name in a :class:`GroupOverlap`; the rest are counted."""


class GroupOverlap(BaseModel):
    """How many of an evaluation's product groups the training data touched."""

    model_config = ConfigDict(frozen=True)

    eval_groups: int = Field(description="product groups of the evaluation's targets")
    train_groups: int = Field(description="product groups of the products training calls name")
    shared: list[str] = Field(description=f"shared groups, sorted, at most {SHARED_LISTED}")
    shared_count: int = Field(description="all shared groups")
    unplaced: int = Field(
        default=0, description="ids training calls name that are not catalog ids (episode "
        "tokens without their map): their groups are unchecked",
    )  # fmt: skip

    def line(self) -> str:
        """The report's one line."""
        said = (
            f"{self.shared_count} of {self.eval_groups} evaluation product groups are among "
            f"the {self.train_groups} groups of the products the training calls name"
        )
        if self.shared:
            more = self.shared_count - len(self.shared)
            said += ": " + ", ".join(self.shared) + (f" and {more} more" if more else "")
        if self.unplaced:
            said += f" ({self.unplaced} named ids are not catalog ids; their groups unchecked)"
        return said


def _arguments(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def named_product_ids(messages: Any, token_map: Any = None) -> Iterator[str]:
    """The product ids the assistant tool calls of `messages` name, through `token_map`."""
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError:
            return
    tokens = token_map if isinstance(token_map, dict) else {}
    for m in messages or []:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            arguments = _arguments(function.get("arguments"))
            for name in PRODUCT_ID_ARGUMENTS:
                value = arguments.get(name)
                for pid in str(value).split(",") if isinstance(value, str | int) else []:
                    if pid.strip():
                        yield str(tokens.get(pid.strip(), pid.strip()))


def _ids_jsonl(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise TrainingSetError(f"{path}:{n}: not JSON ({e.msg})") from None
            if isinstance(record, dict):
                yield from named_product_ids(record.get("messages"), record.get("token_map"))


def _ids_parquet(path: Path) -> Iterator[str]:
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise TrainingSetError(f"{path}: not a Parquet file ({e})") from None
    if "messages" not in names:
        return  # a query-only file names no product
    for batch in pq.ParquetFile(path).iter_batches(columns=["messages"]):
        for value in batch.column(0).to_pylist():
            yield from named_product_ids(value)


def training_product_ids(path: Path) -> set[str]:
    """Every product id an assistant tool call of the training set at `path` names (SFT
    Parquet with a ``messages`` column, or JSONL records with ``messages``; a file or a
    folder of them), translated to catalog ids where a record carries its ``token_map``."""
    ids: set[str] = set()
    try:
        for f in _data_files(path):
            ids.update(_ids_parquet(f) if f.suffix == ".parquet" else _ids_jsonl(f))
    except OSError as e:
        raise TrainingSetError(f"{path}: cannot read it ({e.strerror})") from None
    return ids


def group_overlap(
    eval_groups: set[str], train_product_ids: Iterable[str], catalog: Catalog
) -> GroupOverlap:
    """The product groups of `eval_groups` that the training products are in (each id
    looked up in `catalog`; ids it does not know are counted as unplaced)."""
    ids = sorted(set(train_product_ids))
    products = catalog.get(ids) if ids else []
    train = {p.group_key for p in products if p is not None}
    shared = sorted(eval_groups & train)
    return GroupOverlap(
        eval_groups=len(eval_groups),
        train_groups=len(train),
        shared=shared[:SHARED_LISTED],
        shared_count=len(shared),
        unplaced=sum(p is None for p in products),
    )
