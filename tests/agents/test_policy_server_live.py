"""Opt-in: the same weights through an OpenAI-compatible server play the same episodes.

Skipped unless ``SHOPBENCH_POLICY_SERVER`` is the API root of a server (e.g.
``http://127.0.0.1:8000/v1``) and ``SHOPBENCH_POLICY_MODEL`` the local model directory it
serves. ``SHOPBENCH_POLICY_MODEL_NAME`` is the name the server knows it by (default: the
path), ``SHOPBENCH_POLICY_MAX_TOKENS`` the tokens a turn (default 64),
``SHOPBENCH_POLICY_TASKS`` how many tasks (default 2, at most 4) and
``SHOPBENCH_POLICY_TEMPLATE_ARGS`` chat-template arguments (``KEY=VALUE`` separated by
spaces). The servers it is meant for (docs/distill.md, "The same weights through a
server")::

    vllm serve PATH --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3
    transformers serve PATH --host 127.0.0.1 --port 8000 --device cpu

One ``shopbench distill eval`` plays the tasks greedily with ``hf:PATH`` and with
``openai:NAME@URL`` (same episode keys, tokens a turn and template arguments); every
episode's assistant turns (content, reasoning, each call's name and arguments), tool
results, tool log and outcome must be the same, turn for turn. A difference names the task
and the first turn where the two part.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.registry import make_policy
from shopbench.cli import main
from shopbench.env.env import ShoppingEnv
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task

URL = os.environ.get("SHOPBENCH_POLICY_SERVER", "")
MODEL = os.environ.get("SHOPBENCH_POLICY_MODEL", "")
live = pytest.mark.skipif(
    not (URL and MODEL),
    reason="set SHOPBENCH_POLICY_SERVER (the server's API root) and SHOPBENCH_POLICY_MODEL "
    "(the model directory it serves) to run",
)
NAME = os.environ.get("SHOPBENCH_POLICY_MODEL_NAME") or MODEL
MAX_TOKENS = int(os.environ.get("SHOPBENCH_POLICY_MAX_TOKENS", "64"))
TASKS = min(4, int(os.environ.get("SHOPBENCH_POLICY_TASKS", "2")))
TEMPLATE_ARGS = os.environ.get("SHOPBENCH_POLICY_TEMPLATE_ARGS", "").split()


def _turns(t: Trajectory) -> list[dict[str, Any]]:
    """The episode turn by turn: each assistant message with what answered it (the tool
    results or the environment's nudge) and the tool log of that turn."""
    turns: list[dict[str, Any]] = []
    for m in t.messages[2:]:
        if m.role == "assistant":
            turns.append({
                "content": m.content,
                "reasoning": m.reasoning_content,
                "calls": [(c.function.name, c.function.arguments) for c in m.tool_calls or []],
                "answers": [],
                "tool_log": [],
            })  # fmt: skip
        elif turns:
            turns[-1]["answers"].append((m.role, m.content))
    for entry in t.tool_log:
        if 0 < entry.turn <= len(turns):
            turns[entry.turn - 1]["tool_log"].append(
                (entry.name, entry.arguments, entry.result_digest, entry.error)
            )
    return turns


def _ending(t: Trajectory) -> dict[str, Any]:
    return {
        "termination": t.termination,
        "turns": t.turns,
        "failures": [(f.turn, f.kind) for f in t.failures],
        "recommended_ids": t.recommended_ids,
        "outcome": t.outcome.model_dump(),
    }


def first_difference(local: Trajectory, served: Trajectory) -> str | None:
    """Where two plays of one task part: the first differing turn (and what differs in
    it), or how they ended; None when they are the same."""
    a, b = _turns(local), _turns(served)
    for i, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            parts = [
                f"  {key}:\n    hf:     {x[key]!r}\n    server: {y[key]!r}"
                for key in x if x[key] != y[key]
            ]  # fmt: skip
            return f"task {local.task_id}, turn {i} of {len(a)} (hf:) / {len(b)} (server):\n" + (
                "\n".join(parts)
            )
    if len(a) != len(b):
        n = min(len(a), len(b))

        def side(turns: list[dict[str, Any]], t: Trajectory) -> str:
            if len(turns) > n:
                return repr(turns[n])
            return f"no turn ({t.termination.value}: {[f.detail for f in t.failures]})"

        return (
            f"task {local.task_id}, turn {n + 1} of {len(a)} (hf:) / {len(b)} (server):\n"
            f"    hf:     {side(a, local)}\n    server: {side(b, served)}"
        )
    if _ending(local) != _ending(served):
        return (
            f"task {local.task_id}: same turns, different ending:\n    hf:     "
            f"{_ending(local)}\n    server: {_ending(served)}"
        )
    return None


def test_the_comparison_names_the_first_turn_where_two_plays_part(
    env: ShoppingEnv, catalog_dir: Path
) -> None:
    from shopbench.evaluate.runner import run_evaluation

    tasks = _tasks(catalog_dir)[:1]
    plays = {
        name: run_evaluation(env, tasks, lambda k, n=name: make_policy(n, seed=k))[0][0]
        for name in ("careful", "careful_terse")
    }  # fmt: skip
    again = run_evaluation(env, tasks, lambda k: make_policy("careful", seed=k))[0][0]
    assert first_difference(plays["careful"], again) is None
    said = first_difference(plays["careful"], plays["careful_terse"])
    assert said is not None and said.startswith(f"task {tasks[0].id}, turn 1 of ")
    assert "reasoning:" in said and "hf:     " in said and "server: " in said


def _tasks(catalog_dir: Path) -> list[Task]:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(catalog=catalog_dir, intents=["product", "shop"], n=2, seed=8)
    return build_tasks(cfg).tasks


@live
def test_the_server_plays_the_same_episodes_as_the_local_weights(
    catalog_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Greedy, the same tokens a turn and template arguments: the same episodes."""
    tasks = _tasks(catalog_dir)[:TASKS]
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks)
    out = tmp_path / "run"
    spec = f"openai:{NAME}@{URL}"
    args = [
        "distill", "eval", "--model", f"hf:{MODEL}", "--baseline", spec,
        "--tasks", str(task_file), "--catalog", str(catalog_dir), "--out", str(out),
        "--samples", "1", "--max-tokens", str(MAX_TOKENS), "--max-idle-turns", "2",
        "--concurrency", "1", "--turn-timeout", "900", "--quiet",
    ]  # fmt: skip
    for pair in TEMPLATE_ARGS:
        args += ["--template-arg", pair]
    main(args)  # refuses a server that lists other models than NAME
    print(capsys.readouterr().err)
    local = [Trajectory.model_validate_json(x) for x in
             (out / "trajectories.jsonl").read_text().splitlines()]  # fmt: skip
    served = [Trajectory.model_validate_json(x) for x in
              (out / "baseline_trajectories.jsonl").read_text().splitlines()]  # fmt: skip
    assert [t.task_id for t in local] == [t.task_id for t in served] == [t.id for t in tasks]
    assert {t.agent for t in local} == {f"hf:{MODEL}"}
    assert {t.agent for t in served} == {f"openai:{NAME}"}
    for x, y in zip(local, served, strict=True):
        print(f"{x.task_id}: hf: {x.turns} turns, {len(x.tool_log)} tool calls, "
              f"{x.termination.value}; server: {y.turns}, {len(y.tool_log)}, "
              f"{y.termination.value}")  # fmt: skip
    differences = [d for x, y in zip(local, served, strict=True)
                   if (d := first_difference(x, y)) is not None]  # fmt: skip
    assert not differences, "\n\n".join(differences)
