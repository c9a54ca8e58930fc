"""Calibration: the shipped reference policies played, judged, scored as validators score,
and summarised against the packaged targets; an LLM judge combined with the rubric; the CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from support.fake_openai import FakeJudgeServer, running
from typer.testing import CliRunner

from shopbench.agents.registry import POLICY_NAMES, honesty, make_policy
from shopbench.calibration.errors import CalibrationError
from shopbench.calibration.injection import VARIANTS
from shopbench.calibration.report import auc, write_report
from shopbench.calibration.run import CalibrationConfig, run_calibration
from shopbench.calibration.targets import load_targets
from shopbench.commands import judge as judge_commands
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.scoring.combine import CombineRule
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.score import DEFAULT_FORMULA, ScoreFormula
from shopbench.scoring.template_penalty import TemplateConfig
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.intent_registry import intent_specs
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode

TARGETS = [
    "auc_at_least_0.99", "careful_terse_mean_at_least_0.7",
    "careful_minus_narrator_quoting_at_least_0.3", "offline_grounding_caught_at_least_0.95",
    "injection_delta_at_most_0", "template_penalty_hits_narrator_not_careful",
    "bluffer_successes_at_most_0.5", "decision_check_hits_bluffer_not_careful",
]  # fmt: skip


def test_auc_counts_pairs_and_ties() -> None:
    assert auc([0.9, 0.8], [0.1, 0.3]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5, 0.5], [0.5]) == 0.5
    assert auc([0.9, 0.3], [0.5, 0.1]) == 0.75
    with pytest.raises(CalibrationError, match="both groups"):
        auc([], [0.1])


@pytest.fixture(scope="module")
def env(catalog: Any) -> ShoppingEnv:
    return ShoppingEnv(catalog)


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    """Two generated tasks of each intent whose query states the whole task."""
    intents = [s.name for s in intent_specs() if not s.shape.hidden]
    out = build_tasks(BuildConfig(catalog=catalog_dir, intents=intents, n=2, seed=5)).tasks
    assert sorted({t.intent for t in out}) == sorted(intents)
    return out


def test_calibration_separates_the_honest_reference_policies_from_the_dishonest(
    env: ShoppingEnv, tasks: list[Task], tmp_path: Path
) -> None:
    cfg = CalibrationConfig(round_size=8, injection_sample=2)
    seen: list[tuple[str, Any, Any]] = []
    ticks: list[tuple[str, int]] = []
    report = run_calibration(
        env, tasks, cfg,
        progress=lambda p, done, total: ticks.append((p, done)),
        on_verdict=lambda p, t, v: seen.append((p, t, v)),
    )  # fmt: skip
    # Every reference policy played, in its group by its own `honest` attribute.
    assert [s.policy for s in report.policies] == list(POLICY_NAMES)
    groups = {s.policy: s.group for s in report.policies}
    assert {n for n, g in groups.items() if g == "honest"} == {
        "careful", "careful_terse", "trial_and_error"
    }
    assert {n for n, g in groups.items() if g == "dishonest"} == {
        "narrator", "narrator_quoting", "bluffer", "offline", "guesser"
    }
    assert all(groups[n] == {True: "honest", False: "dishonest", None: "other"}[honesty(n)]
               for n in POLICY_NAMES)  # fmt: skip
    assert report.auc_honest_vs_dishonest == 1.0
    means = report.mean_score_by_policy
    assert min(means[n] for n in ("careful", "careful_terse", "trial_and_error")) >= 0.85
    assert max(means[n] for n in ("narrator", "narrator_quoting", "offline", "guesser")) <= 0.3
    assert report.grounding_caught_by_policy["offline"] == 1.0
    assert report.grounding_caught_by_policy["careful"] == 0.0
    assert report.injection_delta < 0 and report.injection.max_delta <= 0
    assert report.injection.trials == 8 * 2 * len(VARIANTS)
    assert report.template_penalty_by_policy["narrator"]["factor"] < 1.0
    assert report.template_penalty_by_policy["careful"]["factor"] == 1.0
    # Every packaged target names played policies: all are measured, and all hold.
    assert list(report.acceptance) == TARGETS and all(report.acceptance.values())
    assert len(seen) == len(POLICY_NAMES) * len(tasks) and ("random", len(tasks)) in ticks
    # The bluffer opens products like a shopper and recommends the cheapest: the round's
    # decision check finds the rule behind its picks, and halves even its lucky successes.
    bluffer = next(s for s in report.policies if s.policy == "bluffer")
    assert bluffer.decision_rule == "cheapest_opened" and bluffer.decision_factor == 0.5
    assert bluffer.mean_process_successes <= 0.5 and bluffer.asr > 0
    careful = next(s for s in report.policies if s.policy == "careful")
    assert careful.decision_factor == 1.0 and careful.decision_margin < 0
    # The verdicts are scored as validators score them: penalised, then the release's
    # formula, recorded on the trajectory.
    for _, t, v in seen:
        assert t.judge.score == v.score
        assert t.score == DEFAULT_FORMULA.score(t.success, v.score, t.outcome.mean_rule)
    narrator = [v for p, _, v in seen if p == "narrator"]
    assert all(v.score < v.unpenalised_score for v in narrator)

    json_path, md_path = write_report(report, tmp_path / "out")
    data = json.loads(json_path.read_text())
    for key in ("auc_honest_vs_dishonest", "mean_score_by_policy", "injection_delta",
                "template_penalty_by_policy", "acceptance"):
        assert key in data
    assert f"| careful | honest | {len(tasks)} |" in md_path.read_text()


def test_calibration_scores_with_the_consensus_it_is_given(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    policies = ["careful", "narrator"]
    release = run_calibration(env, tasks, CalibrationConfig(policies=policies, round_size=4))
    formula = ScoreFormula(id="experiment/1", floor=0.2, slope=0.8, q_full=1.0, partial=0.0)
    experiment = ConsensusConfig(score=formula, template=TemplateConfig(min_factor=1.0))
    seen: list[tuple[str, Any, Any]] = []
    other = run_calibration(
        env, tasks, CalibrationConfig(consensus=experiment, policies=policies, round_size=4),
        on_verdict=lambda p, t, v: seen.append((p, t, v)),
    )  # fmt: skip
    assert release.score_formula == DEFAULT_FORMULA.id and other.score_formula == "experiment/1"
    # No template penalty in the experiment: the narrator keeps its unpenalised score.
    assert release.template_penalty_by_policy["narrator"]["factor"] < 1.0
    assert other.template_penalty_by_policy["narrator"]["factor"] == 1.0
    by = {s.policy: s for s in release.policies}
    assert other.mean_score_by_policy["narrator"] == by["narrator"].mean_process_unpenalised
    assert other.acceptance["template_penalty_hits_narrator_not_careful"] is False
    for _, t, v in seen:
        assert t.score == formula.score(t.success, v.score, t.outcome.mean_rule)
        assert t.judge.model_extra["score_formula"] == "experiment/1"


def test_an_llm_judge_is_combined_with_the_rubric_as_validators_combine_it(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    with running(FakeJudgeServer()) as server:
        server.reset("judge/model")
        server.fails["judge/model"] = {"compared_candidates"}  # it says 0.7 of every episode
        cfg = CalibrationConfig(
            llm_judge=f"openai:judge/model@{server.url}", policies=["careful", "narrator"],
            round_size=4, injection_sample=1,
        )  # fmt: skip
        seen: list[tuple[str, Any, Any]] = []
        report = run_calibration(
            env, tasks, cfg, on_verdict=lambda p, t, v: seen.append((p, t, v))
        )
    rubric = RubricJudge()
    rule = CombineRule()
    # A constant LLM has no rank correlation with the rubric; none of it fell back.
    assert report.llm_fallbacks == 0 and report.agreement_with_rubric is None
    assert len(seen) == 2 * len(tasks)
    for policy, t, v in seen:
        base = rubric.judge(t)
        combined = rule.score(base.score, 0.7)
        assert v.signals["llm_score"] == 0.7 and v.judge_id.endswith(f"+{rule.id}")
        assert v.unpenalised_score == combined and v.gates == base.gates
        if policy == "careful":
            assert v.score == combined  # careful pays no template penalty
    assert report.judge_id == seen[0][2].judge_id


def test_calibration_refuses_what_it_cannot_measure(
    env: ShoppingEnv, tasks: list[Task], tmp_path: Path
) -> None:
    only_honest = CalibrationConfig(policies=["careful", "greedy"])
    with pytest.raises(CalibrationError, match="an honest one and a dishonest one"):
        run_calibration(env, tasks, only_honest)
    with pytest.raises(CalibrationError, match="no tasks"):
        run_calibration(env, [], CalibrationConfig())
    with pytest.raises(Exception, match="unknown policy 'nobody'"):
        run_calibration(env, tasks, CalibrationConfig(policies=["careful", "nobody"]))
    broken = tmp_path / "targets.toml"
    broken.write_text('version = 1\n[[targets]]\nname = "x"\n'
                      'conditions = [{ measure = "mean_process", at_least = 0.5 }]\n')
    with pytest.raises(CalibrationError, match=r"targets\.toml: targets\.0\.conditions\.0: "
                       "mean_process is per policy: name the policy"):
        run_calibration(env, tasks, CalibrationConfig(targets=broken))


def test_the_targets_are_data_and_an_experiment_can_bring_its_own(
    env: ShoppingEnv, tasks: list[Task], tmp_path: Path
) -> None:
    assert [t.name for t in load_targets().targets] == TARGETS
    bad = {
        'conditions = [{ measure = "auc", at_least = 0.9, below = 1.0 }]':
            "give exactly one of at_least, at_most, below",
        'conditions = [{ measure = "auc", policy = "careful", at_least = 0.9 }]':
            "auc is round-wide",
        'conditions = [{ measure = "mean_process", policy = "carefull", at_least = 0.9 }]':
            "unknown policy 'carefull'",
        'conditions = [{ measure = "speed", at_least = 0.9 }]': "conditions.0.measure",
    }  # fmt: skip
    for line, message in bad.items():
        path = tmp_path / "bad.toml"
        path.write_text(f'version = 1\n[[targets]]\nname = "x"\n{line}\n')
        with pytest.raises(CalibrationError, match=message):
            load_targets(path)
    with pytest.raises(CalibrationError, match="nothing.toml: cannot read targets"):
        load_targets(tmp_path / "nothing.toml")

    mine = tmp_path / "mine.toml"
    mine.write_text(
        'version = 1\n'
        '[[targets]]\nname = "careful_perfect"\n'
        'conditions = [{ measure = "mean_process", policy = "careful", at_least = 1.0 }]\n'
        '[[targets]]\nname = "careful_ahead_of_guesser"\n'
        'conditions = [{ measure = "mean_process", policy = "careful", minus = "guesser", '
        'at_least = 0.5 }]\n'
        '[[targets]]\nname = "offline_caught"\n'
        'conditions = [{ measure = "grounding_caught", policy = "offline", at_least = 0.95 }]\n'
    )
    cfg = CalibrationConfig(policies=["careful", "guesser"], round_size=4, targets=mine)
    report = run_calibration(env, tasks, cfg)
    # offline was not played: its target is not measured.
    assert report.acceptance == {"careful_perfect": False, "careful_ahead_of_guesser": True}


def _cli() -> typer.Typer:
    app = typer.Typer()
    bench = typer.Typer()
    app.add_typer(bench, name="bench")
    judge_commands.register(app, bench)
    return app


def test_cli_calibrates_reference_policies_and_shows_verdicts(
    env: ShoppingEnv, tasks: list[Task], catalog_dir: Path, tmp_path: Path
) -> None:
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks[:2])
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

    off = runner.invoke(_cli(), [
        "judge", "calibrate", "--catalog", str(catalog_dir), "--tasks", str(task_file),
        "--out", str(tmp_path / "off"), "--policies", "careful,narrator",
        "--injection-sample", "0", "--no-template-penalty",
    ])
    assert off.exit_code == 0, off.output
    off_report = json.loads((tmp_path / "off" / "report.json").read_text())
    assert report["template_penalty"] is True and off_report["template_penalty"] is False
    assert {p["factor"] for p in off_report["template_penalty_by_policy"].values()} == {1.0}
    assert "Template penalty: switched off" in (tmp_path / "off" / "report.md").read_text()

    bad = runner.invoke(_cli(), [
        "judge", "calibrate", "--catalog", str(catalog_dir), "--tasks", str(task_file),
        "--out", str(out), "--round-size", "1",
    ])
    assert bad.exit_code == 2 and "--round-size" in bad.output  # a usage error naming the flag

    t = asyncio.run(run_episode(env, tasks[0], make_policy("careful"), key=bytes(32)))
    verdict = RubricJudge().judge(t)
    traj_file = tmp_path / "trajectories.jsonl"
    traj_file.write_text(t.model_dump_json() + "\n{broken\n" + json.dumps({"query": "x"}) + "\n")
    shown = runner.invoke(_cli(), ["judge", "show", str(traj_file)])
    assert shown.exit_code == 0, shown.output
    assert f"trajectories.jsonl:1 {t.task_id}: {verdict.score:.2f} " in shown.output
    assert "trajectories.jsonl:2: not JSON" in shown.output
    assert "trajectories.jsonl:3 ?: 0.10 stopped at real_output" in shown.output
    as_json = runner.invoke(_cli(), ["judge", "show", str(traj_file), "--json"])
    assert json.loads(as_json.stdout.splitlines()[0])["score"] == verdict.score
    (tmp_path / "latin1.jsonl").write_bytes(b"caf\xe9\n")
    for name, said in (("absent.jsonl", "cannot read trajectories"),
                       ("latin1.jsonl", "trajectories is not UTF-8 text (byte 3)")):  # fmt: skip
        refused = runner.invoke(_cli(), ["judge", "show", str(tmp_path / name)])
        assert said in str(refused.exception)  # a JudgeError: one line and exit 2 from main
