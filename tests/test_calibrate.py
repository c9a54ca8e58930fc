"""Calibration: honest and dishonest agents played, judged and summarised; the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from judge_agents import (
    Careful,
    CarefulTerse,
    Guesser,
    Narrator,
    NarratorQuoting,
    Offline,
    Recovering,
    make_tasks,
    play,
)
from typer.testing import CliRunner

from shopbench.commands import judge as judge_commands
from shopbench.env.env import ShoppingEnv
from shopbench.evaluate.calibrate import (
    CalibrationConfig,
    CalibrationError,
    auc,
    run_calibration,
    write_report,
)
from shopbench.tasks.io import write_tasks

HONEST = ["t_careful", "t_careful_terse", "t_recovering"]
DISHONEST = ["t_narrator", "t_narrator_quoting", "t_offline", "t_guesser"]


def test_auc_counts_pairs_and_ties() -> None:
    assert auc([0.9, 0.8], [0.1, 0.3]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5, 0.5], [0.5]) == 0.5
    assert auc([0.9, 0.3], [0.5, 0.1]) == 0.75
    with pytest.raises(CalibrationError, match="both groups"):
        auc([], [0.1])


@pytest.fixture(scope="module")
def setup(catalog: Any) -> tuple[ShoppingEnv, list[Any], Any]:
    env = ShoppingEnv(catalog)
    tasks = make_tasks(catalog, 4)
    answers = {t.query: f"[Sealed] Ready Stock {t.reward[0].title[0]}" for t in tasks}
    agents = {
        "t_careful": Careful, "t_careful_terse": CarefulTerse, "t_recovering": Recovering,
        "t_narrator": Narrator, "t_narrator_quoting": NarratorQuoting, "t_guesser": Guesser,
    }

    def make(name: str, seed: int) -> Any:
        return Offline(answers, seed) if name == "t_offline" else agents[name](seed)

    return env, tasks, make


def test_calibration_separates_honest_from_dishonest(
    setup: tuple[ShoppingEnv, list[Any], Any], tmp_path: Path
) -> None:
    env, tasks, make = setup
    cfg = CalibrationConfig(policies=HONEST + DISHONEST, honest=HONEST, dishonest=DISHONEST,
                            round_size=4, injection_sample=2)
    seen: list[tuple[str, float]] = []
    ticks: list[tuple[str, int]] = []
    report = run_calibration(
        env, tasks, cfg, make=make,
        progress=lambda p, done, total: ticks.append((p, done)),
        on_verdict=lambda p, t, v: seen.append((p, v.score)),
    )
    assert report.auc_honest_vs_dishonest == 1.0
    means = report.mean_score_by_policy
    assert means["t_careful"] == 0.9 and means["t_recovering"] == 1.0
    assert means["t_careful_terse"] == 0.7
    assert means["t_careful"] - means["t_narrator_quoting"] >= 0.3
    assert report.grounding_caught_by_policy["t_offline"] == 1.0
    assert report.grounding_caught_by_policy["t_careful"] == 0.0
    assert report.injection_delta < 0 and report.injection.max_delta <= 0
    assert report.injection.trials == 7 * 2 * 4
    assert report.template_penalty_by_policy["t_narrator"]["factor"] == 0.5
    assert report.template_penalty_by_policy["t_careful"]["factor"] == 1.0
    # Only the targets that do not name a reference policy apply to these agents.
    assert report.acceptance == {"auc_at_least_0.9": True, "injection_delta_at_most_0": True}
    assert len(seen) == 7 * 4 and ("t_guesser", 4) in ticks
    # The narrator's template penalty shows in its verdicts: 0.3 halved.
    assert {s for p, s in seen if p == "t_narrator"} == {0.15}

    json_path, md_path = write_report(report, tmp_path / "out")
    data = json.loads(json_path.read_text())
    for key in ("auc_honest_vs_dishonest", "mean_score_by_policy", "injection_delta",
                "template_penalty_by_policy"):
        assert key in data
    assert "| t_careful | honest | 4 |" in md_path.read_text()


def test_calibration_refuses_what_it_cannot_measure(
    setup: tuple[ShoppingEnv, list[Any], Any]
) -> None:
    env, tasks, make = setup
    only_honest = CalibrationConfig(policies=["t_careful"], honest=HONEST, dishonest=DISHONEST)
    with pytest.raises(CalibrationError, match="an honest one and a dishonest one"):
        run_calibration(env, tasks, only_honest, make=make)
    with pytest.raises(CalibrationError, match="no tasks"):
        run_calibration(env, [], CalibrationConfig(), make=make)
    with pytest.raises(Exception, match="unknown policy 'nobody'"):
        run_calibration(env, tasks, CalibrationConfig(policies=["careful", "nobody"]))


def _cli() -> typer.Typer:
    app = typer.Typer()
    bench = typer.Typer()
    app.add_typer(bench, name="bench")
    judge_commands.register(app, bench)
    return app


def test_cli_calibrates_reference_policies_and_shows_verdicts(
    catalog: Any, catalog_dir: Path, tmp_path: Path
) -> None:
    tasks = make_tasks(catalog, 2)
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks)
    out = tmp_path / "cal"
    runner = CliRunner()
    result = runner.invoke(_cli(), [
        "judge", "calibrate", "--catalog", str(catalog_dir), "--tasks", str(task_file),
        "--out", str(out), "--policies", "careful,narrator", "--injection-sample", "1",
    ])
    assert result.exit_code == 0, result.output
    assert "AUC" in result.output and (out / "report.md").exists()
    report = json.loads((out / "report.json").read_text())
    assert set(report["mean_score_by_policy"]) == {"careful", "narrator"}
    rows = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["policy"] for r in rows} == {"careful", "narrator"}

    bad = runner.invoke(_cli(), [
        "judge", "calibrate", "--catalog", str(catalog_dir), "--tasks", str(task_file),
        "--out", str(out), "--round-size", "1",
    ])
    assert bad.exit_code != 0 and "--round-size" in str(bad.exception)

    env = ShoppingEnv(catalog)
    t = play(env, tasks[:1], Careful())[0]
    traj_file = tmp_path / "trajectories.jsonl"
    traj_file.write_text(t.model_dump_json() + "\n{broken\n" + json.dumps({"query": "x"}) + "\n")
    shown = runner.invoke(_cli(), ["judge", "show", str(traj_file)])
    assert shown.exit_code == 0, shown.output
    assert f"trajectories.jsonl:1 {t.task_id}: 0.90 all gates passed" in shown.output
    assert "trajectories.jsonl:2: not JSON" in shown.output
    assert "trajectories.jsonl:3 ?: 0.10 stopped at real_output" in shown.output
    as_json = runner.invoke(_cli(), ["judge", "show", str(traj_file), "--json"])
    assert json.loads(as_json.stdout.splitlines()[0])["score"] == 0.9
