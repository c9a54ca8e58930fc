"""`shopbench distill build`: curated episodes → TRL conversational Parquet that `datasets`
loads as two splits, split by cluster, weights as repeats, turn masks as train flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from datasets import Json, Value, load_dataset
from support.distill_data import assistant_turns, curated_set, play

from shopbench.cli import main
from shopbench.curation.curated import CuratedEpisode
from shopbench.distill.dataset import read_report
from shopbench.distill.split import split_of
from shopbench.records.trajectory import Trajectory


@pytest.fixture(scope="module")
def played(env: Any, catalog: Any) -> list[Trajectory]:
    return play(env, catalog, 6)


def _build(*args: str) -> int:
    try:
        main(["distill", "build", *args])
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_build_writes_two_splits_that_datasets_loads(
    played: list[Trajectory], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mask = [k != 0 for k in range(assistant_turns(played[0]))]
    curated = curated_set(tmp_path / "cur", [
        CuratedEpisode(trajectory=played[0], weight=3.0, turn_mask=mask),
        CuratedEpisode(trajectory=played[1], weight=0.0),
        *(CuratedEpisode(trajectory=t) for t in played[2:]),
    ])  # fmt: skip
    # A seed that trains c0 and holds out at least one other cluster.
    seed = next(
        s for s in range(100)
        if split_of("c0", seed=s, validation_fraction=0.5) == "train"
        and split_of("c1", seed=s, validation_fraction=0.5) == "validation"
    )  # fmt: skip
    out = tmp_path / "sft"
    args = ["--validation-fraction", "0.5", "--seed", str(seed)]
    code = _build("--curated", str(curated), "--out", str(out), *args)
    assert code == 0
    report = read_report(out)
    assert report["episodes"] == 6 and report["dropped"] == {"weight 0": 1}
    train_clusters = set(report["clusters"]["train"])
    valid_clusters = set(report["clusters"]["validation"])
    assert train_clusters and valid_clusters and not train_clusters & valid_clusters
    assert "validation rows" in capsys.readouterr().out

    ds = load_dataset("parquet", data_dir=str(out))
    assert set(ds) == {"train", "validation"}
    # the schemas decode to the list apply_chat_template takes, whatever their parameters
    assert ds["train"].features["tools"] == Json()
    assert all(isinstance(r["tools"], list) for r in ds["train"])
    call = ds["train"].features["messages"].feature["tool_calls"].feature["function"]
    assert call["arguments"] == Value("string")
    for split, clusters in (("train", train_clusters), ("validation", valid_clusters)):
        assert {r["cluster"] for r in ds[split]} == clusters
    rows = {r["episode_id"]: r for split in ds.values() for r in split}
    assert played[1].episode_id not in rows
    first = [r for r in ds["train"] if r["episode_id"] == played[0].episode_id]
    assert len(first) == 3 and report["repeats"] == 2
    assert first[0]["train_turns"] == mask
    assert report["rows"] == {split: rows.num_rows for split, rows in ds.items()}


def test_the_split_is_the_same_for_the_same_seed(played: list[Trajectory], tmp_path: Path) -> None:
    curated = curated_set(tmp_path / "cur", [CuratedEpisode(trajectory=t) for t in played])
    splits = []
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        args = ["--validation-fraction", "0.5", "--seed", seed]
        assert _build("--curated", str(curated), "--out", str(tmp_path / name), *args) == 0
        splits.append(read_report(tmp_path / name)["clusters"])
    assert splits[0] == splits[1]
    assert splits[0] != splits[2]


def test_the_step_layout_has_one_row_per_trained_turn(
    played: list[Trajectory], tmp_path: Path
) -> None:
    curated = curated_set(tmp_path / "cur", [CuratedEpisode(trajectory=played[2])])
    out = tmp_path / "sft"
    args = ["--format", "step", "--validation-fraction", "0"]
    assert _build("--curated", str(curated), "--out", str(out), *args) == 0
    table = pq.read_table(out / "train.parquet")
    assert table.column("step").to_pylist() == list(range(assistant_turns(played[2])))


def test_no_usable_sample_is_one_line_and_exit_2(
    played: list[Trajectory], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    none_trained = [False] * assistant_turns(played[0])
    curated = curated_set(tmp_path / "cur", [
        CuratedEpisode(trajectory=played[0], turn_mask=none_trained),
        CuratedEpisode(trajectory=played[1], weight=0.0),
    ])  # fmt: skip
    args = ["--validation-fraction", "0"]
    assert _build("--curated", str(curated), "--out", str(tmp_path / "sft"), *args) == 2
    err = capsys.readouterr().err
    assert "no usable training sample in 2 curated episodes" in err
    assert "1 no trained step" in err and "1 weight 0" in err
    assert sorted(p.name for p in (tmp_path / "sft").iterdir()) == ["build.json"]
    assert _build("--curated", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")) == 2
    assert "no curated set here" in capsys.readouterr().err
