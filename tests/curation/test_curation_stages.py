"""Curation's engine-free stages over one shard (what every engine runs): pass one numbers
rows across shards as the local run does, a worker's read refuses bytes that changed after
the listing verified them, and pass two hands back exactly the kept rows, batch by batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.object_store import VERIFIER, make_archive, play_episodes

from shopbench.curation.config import load_config
from shopbench.curation.curator import Curator
from shopbench.curation.engine import LocalEngine
from shopbench.curation.errors import CurationError
from shopbench.curation.source import list_shards
from shopbench.curation.stages import kept_by_shard, plan_shards, shard_kept, shard_ledger


@pytest.fixture(scope="module")
def archive(env: Any, catalog: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four signed shards of six episodes each."""
    root = tmp_path_factory.mktemp("stages") / "archive"
    make_archive(root, play_episodes(env, catalog))
    return root


def test_pass_one_numbers_rows_across_shards_in_path_order(archive: Path) -> None:
    curator = Curator(load_config(), VERIFIER, None)
    plan = plan_shards(list_shards(archive, VERIFIER).shards)
    assert [w.first_seq for w in plan] == [0, 6, 12, 18]
    tables = [pa.concat_tables(list(shard_ledger(curator, w, check=True))) for w in plan]
    assert [t.column("seq").to_pylist() for t in tables] == [
        list(range(w.first_seq, w.end)) for w in plan
    ]
    whole = pa.concat_tables(list(LocalEngine().ledger_tables(curator, plan)))
    assert whole.equals(pa.concat_tables(tables))  # checked or not, the same rows
    assert whole.schema.equals(curator.schema)


def test_a_worker_refuses_a_shard_whose_bytes_changed_after_the_listing(
    archive: Path, tmp_path: Path
) -> None:
    import shutil

    root = tmp_path / "archive"
    shutil.copytree(archive, root)
    curator = Curator(load_config(), VERIFIER, None)
    plan = plan_shards(list_shards(root, VERIFIER).shards)
    plan[1].shard.file.write_bytes(plan[1].shard.file.read_bytes() + b"\0")  # after listing
    with pytest.raises(CurationError, match="no longer match its verified manifest's sha256"):
        list(shard_ledger(curator, plan[1], check=True))
    [(work, rows)] = kept_by_shard([(7, 1.0, None, None)], plan)
    assert work == plan[1]
    with pytest.raises(CurationError, match="no longer match"):
        list(shard_kept(work, rows, check=True))
    assert sum(t.num_rows for t in shard_ledger(curator, plan[0], check=True)) == 6


def test_pass_two_hands_back_exactly_the_kept_rows_with_their_columns(archive: Path) -> None:
    plan = plan_shards(list_shards(archive, VERIFIER).shards)
    kept = [(1, 1.5, ["recovery"], [True, False]), (7, 1.0, None, None), (23, 0.5, [], None)]
    grouped = list(kept_by_shard(kept, plan))
    assert [(w.first_seq, t.column("seq").to_pylist()) for w, t in grouped] == [
        (0, [1]), (6, [7]), (18, [23])
    ]
    tables = [t for w, rows in grouped for t in shard_kept(w, rows)]
    assert [t.num_rows for t in tables] == [1, 1, 1]
    assert [t.column("curation_weight")[0].as_py() for t in tables] == [1.5, 1.0, 0.5]
    assert [t.column("curation_tags")[0].as_py() for t in tables] == [["recovery"], [], []]
    ids = [t.column("episode_id")[0].as_py() for t in tables]
    assert ids == ["ep-001", "ep-007", "ep-023"]  # make_archive: shard i holds ep 6i..6i+5
    with pytest.raises(CurationError, match="kept row 24 is in no shard read"):
        list(kept_by_shard([(24, 1.0, None, None)], plan))
