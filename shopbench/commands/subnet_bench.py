"""`shopbench bench transport`: signed validator → miner round trips on loopback.

The subnet plumbing (``template``, and through it bittensor) is imported only inside the
command, so the rest of the CLI never pays for it.
"""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `transport` to the bench group."""

    @bench_app.command("transport")
    def bench_transport(
        requests_c1: int = typer.Option(
            300, "--requests-c1", min=1, help="round trips timed one at a time"
        ),
        requests_c64: int = typer.Option(
            2000, "--requests-c64", min=64, help="round trips timed with 64 in flight"
        ),
        seed: int = typer.Option(0, "--seed", help="seed of the synthetic 15-turn history"),
        as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
    ) -> None:
        """Signed round trips per second and p50/p99 latency, client and miner in two processes."""
        from template.bench.transport import run

        result = run(requests_c1=requests_c1, requests_c64=requests_c64, seed=seed)
        print(json.dumps(result, sort_keys=True) if as_json else json.dumps(result, indent=2))
