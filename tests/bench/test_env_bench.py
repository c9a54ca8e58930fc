"""`shopbench bench env` plays scripted episodes and reports throughput and latency."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from shopbench.commands import env as env_commands


def test_bench_env_reports_every_tool_and_the_token_overhead(catalog_dir: Path) -> None:
    app = typer.Typer()
    bench_app = typer.Typer()
    app.add_typer(bench_app, name="bench")
    env_commands.register(app, bench_app)
    args = ["bench", "env", "--catalog", str(catalog_dir), "--episodes", "12", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["products"] == 2000 and report["episodes"] == 12
    assert report["internal_errors"] == 0
    # every episode recommends once and terminates once; searches outnumber episodes
    tools = report["tools"]
    assert tools["terminate"]["calls"] == 12
    assert tools["find_product"]["calls"] >= 12
    assert report["calls"] == sum(t["calls"] for t in tools.values())
    for t in tools.values():
        assert 0 <= t["p50_ms"] <= t["p99_ms"]
    assert report["calls_per_s"] > 0 and report["token_overhead_pct"] > 0
