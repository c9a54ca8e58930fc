"""`shopbench bench archive` measures the figures asked for and only those."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from shopbench.cli import app


def test_bench_archive_ingest_figures_alone(tmp_path: Path) -> None:
    args = ["bench", "archive", "--figures", "ingest", "--ingest", "200", "--work",
            str(tmp_path), "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ingest_episodes"] == 200
    acked, sealed = report["ingest_group_commit_per_s"], report["ingest_group_commit_sealed_per_s"]
    # sealing every episode into a shard comes after acknowledging it, never before
    assert 0 < sealed <= acked and report["ingest_per_episode_fsync_per_s"] > 0
    assert report["query_s"] is None and report["peak_rss_mib"] is None


def test_bench_archive_names_the_figures_it_knows(tmp_path: Path) -> None:
    args = ["bench", "archive", "--figures", "ingest,speed", "--work", str(tmp_path)]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 2
    assert "--figures" in result.output and "'ingest', 'query' or 'rss'" in result.output
