"""`shopbench bench distill` builds, tokenizes and trains, and reports each figure."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from shopbench.cli import app


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
