"""`shopbench distill build --engine ray`: each curated row group's episodes turned into
their SFT rows on a Ray cluster's workers (:func:`~shopbench.distill.dataset.episode_rows`,
the stage the local build runs), handed back in order to the one writer of
:func:`~shopbench.distill.dataset.build_sft`, so the dataset is the local build's.

The workers read the curated files at the driver's paths (a filesystem every node mounts).
Ray is imported only through the curation's Ray engine, when this is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from shopbench.curation.curated import curated_groups, read_curated_group
from shopbench.distill.dataset import BuildConfig, EpisodeRows, episode_rows

if TYPE_CHECKING:
    from shopbench.curation.ray_engine import RayEngine


class BuildRows:
    """A Ray Data actor: each row of its batch one row group of a curated file, its output
    one row per episode (its :class:`EpisodeRows` as JSON)."""

    def __init__(self, config_json: str) -> None:
        from shopbench.curation.ray_engine import worker_id

        self.config = BuildConfig.model_validate_json(config_json)
        self.worker = worker_id()

    def __call__(self, batch: pa.Table) -> pa.Table:
        from shopbench.curation.ray_engine import with_stats

        out = []
        for item in batch.to_pylist():
            parts = [
                episode_rows(e, self.config).model_dump_json()
                for e in read_curated_group(Path(item["file"]), int(item["group"]))
            ]
            table = pa.table({"part": pa.array(parts, pa.string())})
            out.append(with_stats(table, int(item["unit"]), 0, self.worker))
        return pa.concat_tables(out)


def ray_episode_rows(engine: RayEngine) -> Callable[[Path, BuildConfig], Iterator[EpisodeRows]]:
    """A `source` for :func:`~shopbench.distill.dataset.build_sft` that runs
    :func:`~shopbench.distill.dataset.episode_rows` on `engine`'s workers, one curated row
    group per call, in the curated set's order."""

    def source(curated: Path, config: BuildConfig) -> Iterator[EpisodeRows]:
        units = [(f, g) for f, groups in curated_groups(curated) for g in range(groups)]
        items = [{"unit": i, "file": str(f), "group": g} for i, (f, g) in enumerate(units)]
        kwargs = {"config_json": config.model_dump_json()}
        for table in engine.map_units("build", items, BuildRows, kwargs):
            for text in table.column("part").to_pylist():
                yield EpisodeRows.model_validate_json(text)

    return source
