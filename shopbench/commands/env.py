"""`shopbench play` (an episode by hand) and `shopbench bench env` (tool-call throughput)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

HISTORY_NAME = ".shopbench_play_history"


def _enable_history() -> None:
    """Line editing and history at the prompt, kept across sessions on a terminal."""
    import sys

    if not sys.stdin.isatty():  # piped input: nothing to edit, and no history to keep
        return
    try:
        import readline
    except ImportError:  # no readline on this platform: plain input() still works
        return
    import atexit
    import contextlib

    history = Path.home() / HISTORY_NAME
    with contextlib.suppress(OSError):  # no history file yet
        readline.read_history_file(history)
    readline.set_history_length(1000)
    atexit.register(readline.write_history_file, history)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `play` to the root app and `env` to the bench group."""

    @app.command("play")
    def play_command(
        catalog: Path = typer.Option(..., "--catalog", help="catalog directory"),
        task: str | None = typer.Option(
            None, "--task", help="FILE:N — line N (from 1) of a JSONL task file"
        ),
        query: str | None = typer.Option(
            None, "--query", help="without --task: the request to shop for (else asked for)"
        ),
        seed: int | None = typer.Option(
            None, "--seed", help="fix the episode key, so the same ids come back (else random)"
        ),
    ) -> None:
        """Play an episode at a prompt, seeing exactly what an agent would see."""
        from shopbench.env.env import ShoppingEnv
        from shopbench.env.play import (
            EXAMPLE_QUERY,
            free_task,
            load_task,
            outcome_line,
            play,
            play_key,
        )

        env = ShoppingEnv.open(catalog)
        _enable_history()
        if task is not None:
            chosen = load_task(task)
        else:
            if query is None:
                try:
                    query = input(f"What are you shopping for? [{EXAMPLE_QUERY}] ")
                except EOFError:
                    query = ""
            chosen = free_task(query)
        episode = env.new_episode(chosen, key=None if seed is None else play_key(seed))

        def describe(catalog_id: str) -> str | None:
            product = env.catalog.get([catalog_id])[0]
            return f"{product.title} ({product.price:g} pesos)" if product else None

        # A task from a file has a known answer: grade the recommendation at the end.
        verdict = (lambda ep: outcome_line(chosen, ep, env.catalog.get)) if task else None
        play(episode, input, print, describe=describe, verdict=verdict)

    @bench_app.command("env")
    def bench_env(
        catalog: Path = typer.Option(..., "--catalog", help="catalog directory"),
        episodes: int = typer.Option(200, "--episodes", min=1, help="episodes to play"),
        seed: int = typer.Option(0, "--seed", help="seed of the queries and the call mix"),
        as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
    ) -> None:
        """Tool calls per second and per-tool latency on a realistic call mix."""
        from shopbench.bench.env import run

        result = run(catalog, episodes=episodes, seed=seed)
        print(json.dumps(result, sort_keys=True) if as_json else json.dumps(result, indent=2))
