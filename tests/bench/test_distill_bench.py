"""`shopbench bench distill` builds, tokenizes and trains, and reports each figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from shopbench.cli import app

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser


def test_bench_distill_reports_build_and_training_figures(catalog_dir: Path) -> None:
    args = ["bench", "distill", "--catalog", str(catalog_dir), "--episodes", "3",
            "--build-episodes", "9", "--steps", "2", "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # stdout alone: one JSON object
    assert report["episodes_played"] == 3 and report["build_episodes"] == 9
    assert report["build_rows"] == 9 and report["build_episodes_per_s"] > 0
    assert report["tokenize_samples_per_s"] > 0 and report["mean_sample_tokens"] > 1000
    for kind in ("full", "lora"):
        assert report[kind]["steps"] == 2 and report[kind]["tokens_per_s"] > 0


def test_bench_layouts_counts_what_each_layout_trains_on(
    env: Any, catalog: Any, tmp_path: Path, qwen3_tokenizer_dir: Path
) -> None:
    from support.distill_data import curated_set, play

    from shopbench.curation.curated import CuratedEpisode

    played = [t for t in play(env, catalog, 6) if t.turns >= 2]
    curated = curated_set(tmp_path / "curated", [CuratedEpisode(trajectory=t) for t in played])
    args = ["bench", "layouts", "--curated", str(curated), "--model", str(qwen3_tokenizer_dir),
            "--setting", "step:compact/h1/brief", "--setting", "episode:compact/tools",
            "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    step, episode = json.loads(result.stdout)["figures"]
    assert step["episodes"] == episode["episodes"] == len(played)
    assert step["rows"] > episode["rows"] == len(played)
    # The same assistant turns take loss in both; the step layout reads its context again
    # at every step, the append-only episode row once.
    assert step["trained_per_episode"] == episode["trained_per_episode"] > 0
    assert step["tokens_per_episode"] > 1.5 * episode["tokens_per_episode"]
    assert episode["trained_share"] > step["trained_share"]
    assert episode["prompt_share"] < step["prompt_share"]
