"""`shopbench bench api` serves a synthetic archive with `shopbench traces serve` and
reports latency and streaming figures (their values are measured, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from shopbench.cli import app
from shopbench.records.task import INTENTS


def test_bench_api_reports_every_figure_over_the_archive_it_built(tmp_path: Path) -> None:
    args = ["bench", "api", "--episodes", "1000", "--requests", "10", "--stream", "300",
            "--work", str(tmp_path), "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["episodes"] == 1000 and report["shards"] == len(INTENTS)  # one per intent
    assert report["jsonl_episodes"] == 300
    assert report["list_page_mean_rows"] > 0
    for name in ("list_page_p50_ms", "list_page_p99_ms", "trajectory_p50_ms",
                 "text_search_p50_ms", "jsonl_episodes_per_s", "server_peak_rss_mib"):  # fmt: skip
        assert report[name] > 0, name
    assert report["list_page_p50_ms"] <= report["list_page_p99_ms"]
