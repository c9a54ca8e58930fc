"""The evaluation harness: runs, reports, bad policies, the `eval` command and its bench."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from shopbench.agents.errors import PolicySpecError
from shopbench.agents.registry import make_policy
from shopbench.chat import AssistantMessage, FunctionCall, ToolCall
from shopbench.commands.evaluate import register
from shopbench.env.env import ShoppingEnv
from shopbench.evaluate.errors import EvalError
from shopbench.evaluate.report import (
    REPORT_JSON,
    REPORT_MD,
    TRAJECTORIES_FILE,
    build_report,
    write_outputs,
)
from shopbench.evaluate.runner import EvalConfig, episode_key, run_evaluation
from shopbench.records.trajectory import TerminationReason, Trajectory
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import RunLimits


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(catalog=catalog_dir, intents=["product", "shop", "voucher"], n=3, seed=8)
    out = build_tasks(cfg).tasks
    assert len(out) >= 8
    return out



@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory, tasks: list[Task]) -> Path:
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    write_tasks(path, tasks)
    return path


def test_an_evaluation_reports_asr_pass_at_k_and_writes_its_files(
    env: ShoppingEnv, tasks: list[Task], tmp_path: Path
) -> None:
    done: list[str] = []
    ts, seconds = run_evaluation(
        env, tasks, lambda k: make_policy("careful", seed=k),
        EvalConfig(samples=2, concurrency=3, seed=4), on_done=lambda t: done.append(t.task_id),
    )
    assert [t.task_id for t in ts] == [t.id for t in tasks for _ in range(2)]
    assert sorted(done) == sorted(t.task_id for t in ts)
    report = build_report(ts, policy="careful", samples=2, seconds=seconds)
    assert report.episodes == 2 * len(tasks) and report.tasks == len(tasks)
    assert report.asr == sum(t.success for t in ts) / len(ts) > 0.5
    assert set(report.asr_by_intent) == {"product", "shop", "voucher"}
    assert report.pass_at_k["1"] == pytest.approx(report.asr)
    # careful decides the same way whatever its seed: every task passes twice or never.
    assert report.pass_hat_k["2"] == pytest.approx(report.pass_at_k["2"])
    assert report.errors["episodes_ended_by_policy"] == 0
    assert report.mean_turns >= 4 and report.mean_tool_calls >= report.mean_turns

    out = write_outputs(tmp_path / "run", ts, report)
    data = json.loads((out / REPORT_JSON).read_text())
    for key in ("asr", "asr_by_intent", "pass_at_k", "pass_hat_k", "episodes", "errors"):
        assert key in data
    lines = (out / TRAJECTORIES_FILE).read_text().splitlines()
    assert [Trajectory.model_validate_json(x) for x in lines] == ts
    md = (out / REPORT_MD).read_text()
    assert "| intent | tasks | episodes | ASR |" in md and f"{report.asr:.3f}" in md


def test_the_same_seed_shows_the_same_ids(env: ShoppingEnv, tasks: list[Task]) -> None:
    run = [
        run_evaluation(env, tasks[:3], lambda k: make_policy("greedy", seed=k),
                       EvalConfig(seed=9))[0]
        for _ in range(2)
    ]
    assert [t.messages for t in run[0]] == [t.messages for t in run[1]]
    assert episode_key(9, "a", 0) != episode_key(9, "a", 1) != episode_key(10, "a", 0)


class Flaky:
    """Raises on one task, hangs on another, replies garbage on a third, else terminates."""

    name = "flaky"

    async def act(self, messages: list[Any], tools: list[Any]) -> Any:
        query = messages[1].content or ""
        kind = sum(map(ord, query)) % 4
        if kind == 0:
            raise ConnectionRefusedError("refused")
        if kind == 1:
            await asyncio.sleep(5)
        if kind == 2:
            return "garbage"
        return AssistantMessage(tool_calls=[ToolCall(
            id="c", function=FunctionCall(name="terminate", arguments='{"status": "failure"}'),
        )])


def test_failing_policies_are_counted_and_the_run_completes(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    config = EvalConfig(concurrency=4, limits=RunLimits(turn_timeout_s=0.1))
    ts, seconds = run_evaluation(env, tasks, lambda k: Flaky(), config)
    assert len(ts) == len(tasks)
    report = build_report(ts, policy="flaky", samples=1, seconds=seconds)
    ended = {r: sum(t.termination is r for t in ts) for r in TerminationReason}
    assert report.errors["ended_policy_error"] == ended[TerminationReason.policy_error]
    assert report.errors["ended_policy_timeout"] == ended[TerminationReason.policy_timeout]
    assert report.errors["ended_invalid_reply"] == ended[TerminationReason.invalid_reply]
    by_policy = len(ts) - ended[TerminationReason.terminated]
    assert report.errors["episodes_ended_by_policy"] == by_policy
    assert report.errors["episodes_ended_by_policy"] >= 1 and report.asr == 0.0


def test_bad_evaluations_are_refused_with_the_reason(env: ShoppingEnv, tasks: list[Task]) -> None:
    with pytest.raises(EvalError, match="no tasks"):
        run_evaluation(env, [], lambda k: make_policy("careful"))
    with pytest.raises(EvalError, match="appears more than once"):
        run_evaluation(env, [tasks[0], tasks[0]], lambda k: make_policy("careful"))
    with pytest.raises(EvalError, match="nothing to report"):
        build_report([], policy="x", samples=1, seconds=1.0)


def _app() -> typer.Typer:
    app = typer.Typer()
    bench = typer.Typer()
    register(app, bench)
    app.add_typer(bench, name="bench")
    return app


def test_the_eval_command_writes_the_reports(
    catalog_dir: Path, task_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    result = CliRunner().invoke(_app(), [
        "eval", "--catalog", str(catalog_dir), "--tasks", str(task_file), "--policy", "greedy",
        "--samples", "2", "--concurrency", "2", "--limit", "4", "--out", str(out), "--quiet",
    ])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("greedy: ASR ") and "pass@2" in result.output
    report = json.loads((out / REPORT_JSON).read_text())
    assert report["episodes"] == 8 and report["samples"] == 2
    assert set(report["pass_at_k"]) == {"1", "2"}
    assert len((out / TRAJECTORIES_FILE).read_text().splitlines()) == 8

    bad = CliRunner().invoke(_app(), [
        "eval", "--catalog", str(catalog_dir), "--tasks", str(task_file), "--policy", "smart",
        "--out", str(out),
    ])
    assert isinstance(bad.exception, PolicySpecError)
    assert "unknown policy 'smart'; allowed: careful" in str(bad.exception)


def test_the_eval_bench_prints_one_json_object(catalog_dir: Path, task_file: Path) -> None:
    result = CliRunner().invoke(_app(), [
        "bench", "eval", "--catalog", str(catalog_dir), "--tasks", str(task_file),
        "--episodes", "12", "--concurrency", "4",
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["episodes"] == 12 and data["policy"] == "careful"
    assert data["episodes_per_s"] > 0 and data["catalog_products"] == 2000
    assert 0 < data["policy_share"] < 1 and 0 < data["env_share"] < 1


def test_an_interrupted_evaluation_keeps_what_it_played(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    config = EvalConfig(samples=2, concurrency=4, seed=3)
    whole, _ = run_evaluation(env, tasks[:4], lambda k: make_policy("greedy", seed=k), config)
    finished: list[Trajectory] = []
    again, _ = run_evaluation(
        env, tasks[:4], lambda k: make_policy("greedy", seed=k), config,
        on_done=finished.append, played=whole[:5],
    )  # fmt: skip
    # the five played before are kept as they were; only the other three are played again
    assert [t.episode_id for t in again] == [t.episode_id for t in whole]
    assert again[:5] == whole[:5] and len(finished) == 3
    assert {t.episode_id for t in finished} == {t.episode_id for t in whole[5:]}
    assert [t.outcome for t in again[5:]] == [t.outcome for t in whole[5:]]
