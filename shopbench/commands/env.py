"""`shopbench play` (an episode by hand) and `shopbench bench env` (tool-call throughput)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from shopbench.bench.env import EnvBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import catalog_option

if TYPE_CHECKING:
    from shopbench.records.trajectory import Trajectory
    from shopbench.tasks.model import Task

HISTORY_NAME = ".shopbench_play_history"
EXAMPLE_QUERY = "I need a stainless steel water bottle under 500 pesos."


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


def play_key(seed: int) -> bytes:
    """The episode key of `shopbench play --seed N`: the same seed replays the same ids."""
    return hashlib.sha256(f"shopbench-play:{seed}".encode()).digest()


def free_task(query: str) -> Task:
    """A product task made from a typed query (no known target; nothing to grade)."""
    from shopbench.outcome.spec import Slot
    from shopbench.tasks.model import Task

    q = query.strip() or EXAMPLE_QUERY
    digest = hashlib.sha256(q.encode("utf-8")).hexdigest()[:12]
    return Task(id=f"play-{digest}", intent="product", query=q, reward=[Slot(title=[q])])


def task_from_spec(spec: str) -> Task:
    """The task named by ``FILE:N`` (line N, from 1, of a task file) or ``FILE`` (line 1)."""
    from shopbench.tasks.io import read_task_at

    path_text, sep, line_text = spec.rpartition(":")
    if not sep or not line_text.isdigit():
        path_text, line_text = spec, "1"
    return read_task_at(path_text, int(line_text))


def summary(
    trajectory: Trajectory,
    describe: Callable[[str], str | None],
    *,
    stopped: bool = False,
    graded: bool = False,
) -> str:
    """The closing report of a played episode, from its record: how it ended, what the
    recommended tokens stand for, and with `graded` the outcome's verdict."""
    reason = "stopped by the player" if stopped else trajectory.termination.value
    played = sum(1 for m in trajectory.messages if m.role == "assistant")
    lines = [f"episode over: {reason}; {played} turns, {trajectory.tool_calls} calls"]
    if not trajectory.recommended:
        lines.append("nothing was recommended")
    for token, catalog_id in zip(
        trajectory.recommended, trajectory.recommended_ids, strict=True
    ):
        name = describe(catalog_id) if catalog_id else None
        lines.append(
            f"recommended {token} = catalog product {catalog_id}" + (f": {name}" if name else "")
        )
    if graded:
        outcome = trajectory.outcome
        scores = ", ".join(f"{s:.2f}" for s in outcome.rule_scores)
        verdict = "success" if outcome.success else f"failure ({outcome.reason})"
        lines.append(f"graded: {verdict}; rule scores [{scores}]")
    return "\n".join(lines)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `play` to the root app and `env` to the bench group."""

    @app.command("play")
    def play_command(
        catalog: Path = catalog_option(),
        task: str | None = typer.Option(
            None, "--task", help="FILE:N — line N (from 1) of a JSONL task file"
        ),
        query: str | None = typer.Option(
            None, "--query", help="without --task: the request to shop for (else asked for)"
        ),
        seed: int | None = typer.Option(
            None, "--seed", help="fix the episode key, so the same ids come back (else random)"
        ),
        out: Path | None = typer.Option(
            None, "--out", help="append the episode's trajectory to this JSONL file "
            "(read by `shopbench judge show`)"
        ),
    ) -> None:
        """Play an episode at a prompt, seeing exactly what an agent would see."""
        import asyncio

        from shopbench.agents.human import HUMAN_TURN_TIMEOUT_S, HumanPolicy
        from shopbench.env.env import ShoppingEnv
        from shopbench.trajectory.loop import RunLimits, run_episode

        env = ShoppingEnv.open(catalog)
        _enable_history()
        if task is not None:
            chosen = task_from_spec(task)
        else:
            if query is None:
                try:
                    query = input(f"What are you shopping for? [{EXAMPLE_QUERY}] ")
                except EOFError:
                    query = ""
            chosen = free_task(query)
        policy = HumanPolicy(
            input, print, intent=chosen.intent, prompt_version=env.prompt_version,
            max_turns=env.limits.max_turns,
        )
        trajectory = asyncio.run(
            run_episode(
                env, chosen, policy, RunLimits(turn_timeout_s=HUMAN_TURN_TIMEOUT_S),
                key=None if seed is None else play_key(seed),
            )
        )
        policy.show(trajectory.messages)  # what the last turn's calls answered

        def describe(catalog_id: str) -> str | None:
            product = env.catalog.get([catalog_id])[0]
            return f"{product.title} ({product.price:g} pesos)" if product else None

        # A task from a file has a known answer: its verdict closes the report.
        print(summary(trajectory, describe, stopped=policy.quit, graded=task is not None))
        if out is not None:
            _append(out, trajectory)
            print(f"wrote the trajectory to {out}")

    bench_app.command("env")(bench_command(EnvBenchConfig, _run_bench))


def _run_bench(config: EnvBenchConfig) -> dict[str, Any]:
    """Tool calls per second and per-tool latency on a realistic call mix."""
    from shopbench.bench.env import run

    return run(config.catalog, episodes=config.episodes, seed=config.seed)


def _append(path: Path, trajectory: Trajectory) -> None:
    """Add `trajectory` as one JSON line to `path`, the line format `read_trajectories`
    reads; ShopbenchError naming the file when it cannot be written."""
    from shopbench.errors import ShopbenchError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8", newline="\n") as f:
            f.write(trajectory.model_dump_json() + "\n")
    except OSError as e:
        raise ShopbenchError(f"{path}: cannot write the trajectory ({e.strerror or e})") from None
