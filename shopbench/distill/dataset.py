"""`shopbench distill build`: a curated set → an SFT dataset folder (Parquet).

The folder holds ``train.parquet`` and ``validation.parquet`` (``datasets.load_dataset(OUT)``
or :func:`load_sft` reads them as two splits), ``build.json``: the config, the observation
view's id (:mod:`shopbench.agents.format.views`), the counts, every left-out row by reason,
and which clusters went to which split; and ``README.md``, its dataset card
(:mod:`shopbench.distill.card`).

Curation's weights carry through by repetition (:func:`~shopbench.distill.split.copies_of`);
its turn masks through ``train_turns``, which the trainer turns into per-token loss masks.
Validation rows are never repeated (validation loss stays a plain mean over episodes); an
episode of weight 0 is left out of both splits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.format.views import ObservationView, PromptName, ViewName
from shopbench.curation.curated import CuratedEpisode, read_curated
from shopbench.distill.card import write_sft_card
from shopbench.distill.errors import DistillError, NoSamplesError
from shopbench.distill.rows import RowFormat, rows_of
from shopbench.distill.split import copies_of, split_of
from shopbench.records.task import Intent

SPLITS = ("train", "validation")
REPORT = "build.json"

_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
_MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("reasoning_content", pa.string()),
        ("tool_calls", pa.list_(_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
SFT_SCHEMA = pa.schema(
    [
        ("messages", pa.list_(_MESSAGE)),
        ("tools", pa.json_()),
        ("train_turns", pa.list_(pa.bool_())),
        ("episode_id", pa.string()),
        ("task_id", pa.string()),
        ("cluster", pa.string()),
        ("intent", pa.string()),
        ("segment", pa.int32()),
        ("step", pa.int32()),
        ("weight", pa.float64()),
    ]
)
"""The SFT dataset's columns: TRL's ``messages`` and ``tools``, then ours. ``tools`` is an
Arrow JSON column: pyarrow and DuckDB read the schemas' JSON text, ``datasets`` decodes it to
the list of function schemas (however their parameters differ) that ``apply_chat_template``
and TRL take."""


_VIEW_FIELDS: dict[str, Any] = dict(ObservationView.model_fields)  # Any, as Field() returns


class BuildConfig(BaseModel):
    """How a curated set becomes SFT rows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: RowFormat = Field(
        default=RowFormat.episode,
        description="episode: one row per episode (per user turn); step: one row per "
        "assistant turn with its history",
    )
    validation_fraction: float = Field(
        default=0.1, ge=0.0, le=0.9, description="share of clusters held out for validation"
    )
    seed: int = Field(default=0, description="seed of the cluster split and weight repetition")
    batch_rows: int = Field(default=1024, ge=1, description="rows per Parquet write")
    # The observation view's fields as ObservationView declares them (default, bounds, help),
    # flat here so `distill build` keeps its --view, --history and --prompt.
    view: ViewName = _VIEW_FIELDS["name"]
    history: int | None = _VIEW_FIELDS["history"]
    prompt: PromptName = _VIEW_FIELDS["prompt"]

    intents: list[Intent] | None = Field(
        default=None, description="keep only the episodes of these intents (None: every one)"
    )

    @property
    def observation_view(self) -> ObservationView:
        """The observation view the rows are written in."""
        return ObservationView(name=self.view, history=self.history, prompt=self.prompt)


class BuildReport(BaseModel):
    """What the build read, wrote and left out."""

    config: BuildConfig
    view: str = Field(description="the observation view's id (a policy must read the same)")
    episodes: int = Field(description="curated episodes read")
    rows: dict[str, int] = Field(description="split → rows written (repeats counted)")
    repeats: int = Field(description="extra train rows from weights above 1")
    dropped: dict[str, int] = Field(description="reason → rows left out")
    clusters: dict[str, list[str]] = Field(description="split → its clusters, sorted")


class EpisodeRows(BaseModel):
    """What one curated episode gives a build (:func:`episode_rows`): its split, cluster,
    copies and rows, and what was left out of it."""

    counted: bool = Field(description="False: left out before counting (another intent)")
    side: str = "train"
    cluster: str = ""
    copies: int = 0
    rows: list[dict[str, Any]] = Field(default_factory=list, description="SftRow dumps")
    dropped: dict[str, int] = Field(default_factory=dict)


def episode_rows(episode: CuratedEpisode, config: BuildConfig) -> EpisodeRows:
    """One curated episode's part of a build: the stage any engine runs per episode (its
    rows, its split by cluster, its copies by weight; all deterministic by the config's
    seed and the episode's own ids)."""
    t = episode.trajectory
    if config.intents is not None and t.intent not in config.intents:
        return EpisodeRows(counted=False, dropped={"another intent": 1})
    made = rows_of(episode, config.format, config.observation_view)
    dropped = dict(made.dropped)
    cluster = t.cluster or t.task_id
    side = split_of(cluster, seed=config.seed, validation_fraction=config.validation_fraction)
    copies = 1 if episode.weight > 0 else 0
    if side == "train":
        copies = copies_of(episode.weight, seed=config.seed, episode_id=t.episode_id)
    if copies == 0:
        dropped["weight 0"] = dropped.get("weight 0", 0) + len(made.rows)
        return EpisodeRows(counted=True, side=side, cluster=cluster, dropped=dropped)
    rows = [r.model_dump() for r in made.rows]
    return EpisodeRows(counted=True, side=side, cluster=cluster, copies=copies, rows=rows,
                       dropped=dropped)  # fmt: skip


def local_episode_rows(curated: Path, config: BuildConfig) -> Iterator[EpisodeRows]:
    """:func:`episode_rows` of every episode of the curated set, in order, here."""
    for episode in read_curated(curated):
        yield episode_rows(episode, config)


class _Writer:
    """One split's Parquet file, written in batches."""

    def __init__(self, path: Path, batch_rows: int) -> None:
        self.path = path
        self.batch_rows = batch_rows
        self.pending: list[dict[str, Any]] = []
        self.writer: pq.ParquetWriter | None = None
        self.count = 0

    def add(self, row: dict[str, Any]) -> None:
        self.pending.append(row)
        self.count += 1
        if len(self.pending) >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, SFT_SCHEMA, compression="zstd")
        self.writer.write_table(pa.Table.from_pylist(self.pending, schema=SFT_SCHEMA))
        self.pending.clear()

    def close(self) -> None:
        self.flush()
        if self.writer is None:  # an empty split is still a readable file
            pq.write_table(SFT_SCHEMA.empty_table(), self.path, compression="zstd")
        else:
            self.writer.close()


def build_sft(
    curated: Path, out: Path, config: BuildConfig | None = None, *,
    source: Callable[[Path, BuildConfig], Iterable[EpisodeRows]] | None = None,
) -> BuildReport:  # fmt: skip
    """Write the SFT dataset of the curated set at `curated` to `out` and return the report
    (also written as ``out/build.json``). NoSamplesError when no row is left to train (then
    only ``build.json`` is left in `out`). `source` gives each episode's
    :func:`episode_rows`, in order (default: :func:`local_episode_rows`, here; the Ray
    engine's runs them on a cluster): the dataset is the same whatever gives them."""
    config = config or BuildConfig()
    out = Path(out)
    if any((out / f"{s}.parquet").exists() for s in SPLITS):
        raise DistillError(f"{out} already holds an SFT dataset")
    out.mkdir(parents=True, exist_ok=True)
    writers = {s: _Writer(out / f"{s}.parquet", config.batch_rows) for s in SPLITS}
    clusters: dict[str, set[str]] = {s: set() for s in SPLITS}
    dropped: dict[str, int] = {}
    episodes = repeats = 0
    try:
        made = source(curated, config) if source is not None else local_episode_rows(
            curated, config
        )  # fmt: skip
        for part in made:
            for reason, n in part.dropped.items():
                dropped[reason] = dropped.get(reason, 0) + n
            if not part.counted:
                continue
            episodes += 1
            if part.copies == 0:
                continue
            if part.rows:
                clusters[part.side].add(part.cluster)
            for row in part.rows:
                for _ in range(part.copies):
                    writers[part.side].add(row)
                repeats += part.copies - 1
    finally:
        for w in writers.values():
            w.close()
    report = BuildReport(
        config=config, view=config.observation_view.id, episodes=episodes,
        rows={s: w.count for s, w in writers.items()}, repeats=repeats, dropped=dropped,
        clusters={s: sorted(c) for s, c in clusters.items()},
    )  # fmt: skip
    (out / REPORT).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if report.rows["train"] == 0:
        for s in SPLITS:  # nothing to train on: leave only the report, so a rerun can write
            (out / f"{s}.parquet").unlink(missing_ok=True)
        why = ", ".join(f"{n} {r}" for r, n in sorted(dropped.items())) or "nothing to read"
        raise NoSamplesError(
            f"{curated}: no usable training sample in {episodes} curated episodes ({why})"
        )
    write_sft_card(out, curated, report.model_dump(mode="json"))
    return report


def load_sft(data: Path) -> dict[str, list[dict[str, Any]]]:
    """The rows of the SFT dataset at `data`, by split (``validation`` may be empty);
    DistillError when `data` is not one, NoSamplesError when its train split is empty."""
    data = Path(data)
    splits: dict[str, list[dict[str, Any]]] = {}
    for s in SPLITS:
        path = data / f"{s}.parquet"
        if not path.is_file():
            raise DistillError(f"{data}: not an SFT dataset (no {s}.parquet; build one with "
                               "shopbench distill build)")  # fmt: skip
        table = pq.read_table(path)
        missing = [n for n in ("messages", "tools", "train_turns") if n not in table.column_names]
        if missing:
            raise DistillError(f"{path}: not an SFT split (missing {', '.join(missing)})")
        splits[s] = table.to_pylist()
    if not splits["train"]:
        raise NoSamplesError(f"{data}: the train split has no rows")
    return splits


def read_report(data: Path) -> dict[str, Any]:
    """The build report of the SFT dataset at `data` (empty when it has none)."""
    path = Path(data) / REPORT
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
