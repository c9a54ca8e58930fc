"""`shopbench bench transport`: signed validator → miner round trips on loopback.

The subnet plumbing (``template``, and through it bittensor) is imported only inside the
run; the command reads its flags from the benchmark's light config module.
"""

from __future__ import annotations

from typing import Any

import typer

from shopbench.commands.bench import bench_command
from template.bench.config import TransportBenchConfig


def _run_bench(config: TransportBenchConfig) -> dict[str, Any]:
    """Signed round trips per second and p50/p99 latency, client and miner in two processes."""
    from template.bench.transport import run

    return run(
        requests_c1=config.requests_c1, requests_c64=config.requests_c64, seed=config.seed
    )


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `transport` to the bench group."""
    bench_app.command("transport")(bench_command(TransportBenchConfig, _run_bench))
