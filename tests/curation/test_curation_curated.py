"""The curated set's files: written, read back exactly, read by DuckDB as archive rows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from shopbench.agents.reference import CarefulPolicy, TrialAndErrorPolicy
from shopbench.archive.layout import SCHEMA
from shopbench.curation.curated import CuratedEpisode, read_curated, write_curated
from shopbench.curation.errors import CuratedSetError
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import Slot
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode


@pytest.fixture(scope="module")
def played(env: ShoppingEnv, catalog: Any) -> list[Trajectory]:
    products = next(iter(catalog.iter_products(batch_size=20)))[:3]
    out = []
    for i, p in enumerate(products):
        task = Task(
            id=f"t-{i}", intent="product", query=f"I'm looking for {p.title}.",
            reward=[Slot(product_id=p.product_id, title=[p.title])], cluster=f"c{i}",
        )  # fmt: skip
        policy = CarefulPolicy(seed=i) if i else TrialAndErrorPolicy(seed=i)
        out.append(asyncio.run(run_episode(env, task, policy, key=bytes([i + 1]) * 32)))
    return out


def _assistant_turns(t: Trajectory) -> int:
    return sum(1 for m in t.messages if m.role == "assistant")


def test_curated_episodes_round_trip_across_files(played: list[Trajectory], tmp_path: Path) -> None:
    episodes = [
        CuratedEpisode(trajectory=played[0], weight=2.0, tags=["recovery", "recovery:search_retry"],
                       turn_mask=[k != 0 for k in range(_assistant_turns(played[0]))]),
        CuratedEpisode(trajectory=played[1]),
        CuratedEpisode(trajectory=played[2], weight=0.5, tags=["x"]),
    ]  # fmt: skip
    files = write_curated(iter(episodes), tmp_path / "cur", rows_per_file=2)
    assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet"]
    back = list(read_curated(tmp_path / "cur"))
    assert back == episodes
    schema = pq.read_schema(files[0])
    assert schema.names == [*SCHEMA.names, "curation_weight", "curation_tags", "turn_mask"]
    rows = duckdb.sql(
        f"SELECT episode_id, curation_weight, turn_mask IS NULL AS all_turns "
        f"FROM read_parquet('{tmp_path}/cur/data/*.parquet') ORDER BY curation_weight"
    ).fetchall()
    assert rows == [
        (played[2].episode_id, 0.5, True),
        (played[1].episode_id, 1.0, True),
        (played[0].episode_id, 2.0, False),
    ]


def test_no_curated_files_is_a_named_error(tmp_path: Path) -> None:
    with pytest.raises(CuratedSetError, match="no curated set"):
        list(read_curated(tmp_path))


def test_a_mask_of_the_wrong_length_is_refused(played: list[Trajectory]) -> None:
    with pytest.raises(ValueError, match="assistant messages"):
        CuratedEpisode(trajectory=played[1], turn_mask=[True])
