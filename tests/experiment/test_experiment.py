"""`shopbench distill experiment` end to end on a real signed archive of reference-policy
episodes and a tiny Qwen3: every arm curated, built, trained and evaluated on the same
held-out tasks, the report traceable to its files, a rerun that redoes nothing; every bad
config, too few rows and a held-out set too small to be clean are one line before training."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from shopbench.agents.format.views import VIEW_FILE
from shopbench.agents.registry import make_policy
from shopbench.archive.shards import write_shard
from shopbench.archive.signing import sign_trajectory
from shopbench.arena.config import ArenaConfig
from shopbench.cli import main
from shopbench.distill.tiny_model import TinyModelConfig, tiny_qwen3
from shopbench.env.env import ShoppingEnv
from shopbench.experiment.arms import curation_of
from shopbench.experiment.config import load_experiment
from shopbench.experiment.errors import ExperimentError
from shopbench.experiment.report import render_markdown
from shopbench.experiment.results import ExperimentReport
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.score import with_judgement
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from template.signing import HotkeySigner, LocalWallet

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

SIGNER = HotkeySigner.from_wallet(LocalWallet.derive("experiment-test"))
POLICIES = ("careful", "greedy", "trial_and_error", "narrator")
TRAIN = {
    "learning_rate": 1.0e-3, "warmup_ratio": 0.0, "max_steps": 2, "logging_steps": 1,
    "save_steps": 2, "max_length": 1400, "overlong": "cut", "lora": True, "lora_r": 4,
    "lora_alpha": 8, "lora_target_modules": "all-linear",
}  # fmt: skip


def _miner(uid: int) -> str:
    return f"5Miner{uid:02d}" + "x" * 40


def _signed_archive(env: ShoppingEnv, catalog: Any, tasks: list[Task], root: Path,
                    policies: tuple[str, ...]) -> Path:  # fmt: skip
    judge = RubricJudge()

    async def go(policy: str, uid: int) -> list[Trajectory]:
        agent = make_policy(policy, catalog=catalog, seed=uid)
        return list(await asyncio.gather(*(
            run_episode(env, t, agent, key=bytes([uid + 1, i + 1]) * 16, miner_uid=uid,
                        miner_hotkey=_miner(uid), block=100 + i)
            for i, t in enumerate(tasks)
        )))  # fmt: skip

    for uid, policy in enumerate(policies):
        played = [
            sign_trajectory(with_judgement(
                t.model_copy(update={"validator_hotkey": SIGNER.hotkey}), judge.judge(t)
            ), SIGNER)
            for t in asyncio.run(go(policy, uid))
        ]  # fmt: skip
        write_shard(played, str(root), signer=SIGNER)
    return root


@pytest.fixture(scope="module")
def archive(env: ShoppingEnv, catalog: Any, catalog_dir: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Path:  # fmt: skip
    """Four reference miners' signed episodes of eight live product tasks."""
    from shopbench.tasks.generate import BuildConfig, build_tasks

    tasks = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product"], n=8, seed=5)).tasks
    return _signed_archive(env, catalog, tasks, tmp_path_factory.mktemp("archive"), POLICIES)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model", TinyModelConfig.trainable(0))


def _config(tmp_path: Path, where: Path, catalog_dir: Path, tiny: Path, **over: Any) -> Path:
    data: dict[str, Any] = {
        "seed": 0, "model": str(tiny),
        "archive": {"path": str(where), "catalog": str(catalog_dir)},
        "view": "compact/h1/brief", "format": "step", "train_intents": ["product"],
        "arms": ["base", "curated", "unfiltered", "successes"], "min_rows": 2,
        "train": {"config": "smollm2-lora", "overrides": TRAIN},
        "eval": {"tasks": 3, "intents": ["product"], "max_turns": 3, "max_idle_turns": 1,
                 "concurrency": 3, "step_tasks": 2},
    }  # fmt: skip
    for key, value in over.items():
        if value is None:
            data.pop(key, None)
        elif isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(*args: str) -> int:
    try:
        main(["distill", "experiment", *args])
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_the_experiment_runs_every_arm_and_a_rerun_redoes_nothing(
    archive: Path, catalog_dir: Path, tiny: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    config = _config(tmp_path, archive, catalog_dir, tiny)
    out = tmp_path / "run"
    assert _run("--config", str(config), "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert "held-out: 3 tasks" in said
    report = json.loads((out / "report.json").read_text())
    arms = {a["arm"]: a for a in report["arms"]}
    assert list(arms) == ["base", "curated", "unfiltered", "successes"]
    assert report["view"] == "compact/h1/brief"
    for name in ("curated", "unfiltered", "successes"):
        arm = arms[name]
        assert arm["steps"] == 2 and arm["train_rows"] > 0 and arm["train_loss"]
        assert json.loads((out / arm["model"] / VIEW_FILE).read_text())["view"] == (
            "compact/h1/brief"
        )
        build = json.loads((out / arm["files"]["build"]).read_text())
        assert build["rows"]["train"] == arm["train_rows"]
        assert arm["minus_base"]["asr"] is not None
        assert arm["table"]["tasks"] == 3
    # The arms differ in their data alone: unfiltered keeps every episode, successes fewer.
    assert arms["unfiltered"]["curated_episodes"] == 8 * len(POLICIES)
    assert arms["successes"]["curated_episodes"] < arms["unfiltered"]["curated_episodes"]
    assert arms["base"]["model"] == str(tiny) and arms["base"]["steps"] is None
    assert set(report["differences"]) == {"curated − unfiltered", "curated − successes"}
    assert "steps.parses" in report["differences"]["curated − unfiltered"]
    # The turn budget is the trained turns' p95, and cuts at most 5% of them.
    budget = report["budget"]
    assert budget["budget"] >= budget["p95"] and budget["cut_share"] <= 0.05
    assert budget == json.loads((out / "budget.json").read_text()) and report["pending"] == []
    # Step accuracy per arm, on the reference episodes of the first two held-out tasks.
    for name in ("base", "curated"):
        steps = arms[name]["step_accuracy"]
        assert steps["episodes"] == 2 and steps["steps"] >= 2
        assert set(steps["metrics"]) >= {"parses", "right_tool"}
    assert "parses" in arms["curated"]["steps_minus_base"]
    assert set(report["stages_at"]) == set(report["stages_s"])
    # Each evaluation journals its episodes as they finish and drops the journal when done.
    assert not list((out / "eval").glob("*.played.jsonl"))
    # Every arm's ASR comes before any step accuracy: the steps cost more and answer less.
    order = list(json.loads((out / "stages.json").read_text())["finished"])
    evals = [order.index(f"eval {a}") for a in arms]
    assert max(evals) < min(order.index(f"steps {a}") for a in arms)
    held = report["heldout"]
    assert held["kept"] == 3 and held["shared"] == 0
    tasks = [json.loads(line) for line in (out / "heldout.jsonl").read_text().splitlines()]
    assert {t["split"] for t in tasks} == {"heldout"}
    md = (out / "report.md").read_text()
    assert "| curated |" in md and "curated − unfiltered" in md and "plot.svg" in md
    svg = ET.fromstring((out / "plot.svg").read_text())
    assert svg.tag.endswith("svg") and len(list(svg.iter())) > 20
    # A folder started before a key existed ran as its default: the same config.
    started = json.loads((out / "config.json").read_text())
    assert started.pop("mask_refused") is False
    (out / "config.json").write_text(json.dumps(started))
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()
              and p.name not in ("report.json", "report.md", "plot.svg")}  # fmt: skip
    assert _run("--config", str(config), "--out", str(out)) == 0
    again = capsys.readouterr().out
    # curate, build, train each arm; 4 evaluations and 4 step measures; the references
    assert again.count("done already") == 3 * 3 + 4 + 4 + 1
    assert {p: p.stat().st_mtime_ns for p in before} == before
    assert json.loads((out / "report.json").read_text())["arms"] == report["arms"]
    # Fewer tasks: the held-out draw and the evaluations are redone, nothing else.
    fewer = _config(tmp_path, archive, catalog_dir, tiny, eval={"tasks": 2})
    assert _run("--config", str(fewer), "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert "the config's eval changed" in said and said.count("done already") == 3 * 3
    assert "held-out: 2 tasks" in said
    trained = {p: before[p] for p in before if "/train/" in str(p)}
    assert {p: p.stat().st_mtime_ns for p in trained} == trained
    assert json.loads((out / "report.json").read_text())["arms"][1]["table"]["tasks"] == 2
    # How many episodes play at once changes the speed, not the measure: nothing is redone.
    faster = _config(tmp_path, archive, catalog_dir, tiny, eval={"tasks": 2, "concurrency": 1})
    kept = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()
            and p.name not in ("report.json", "report.md", "plot.svg", "config.json")}  # fmt: skip
    assert _run("--config", str(faster), "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert "the config's eval.concurrency changed: kept" in said
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    assert json.loads((out / "config.json").read_text())["eval"]["concurrency"] == 1
    # The arms in another order say which runs first, not what is measured: nothing is redone.
    reordered = _config(tmp_path, archive, catalog_dir, tiny, eval={"tasks": 2, "concurrency": 1},
                        arms=["successes", "base", "unfiltered", "curated"])  # fmt: skip
    assert _run("--config", str(reordered), "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert "the config's arms reordered: kept" in said and "drawn again" not in said
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    assert [a["arm"] for a in json.loads((out / "report.json").read_text())["arms"]] == [
        "successes", "base", "unfiltered", "curated"
    ]
    changed = _config(tmp_path, archive, catalog_dir, tiny, seed=1, eval={"tasks": 2})
    assert _run("--config", str(changed), "--out", str(out)) == 2
    assert "holds an experiment of another config (differs in: seed)" in capsys.readouterr().err


def test_a_turn_budget_that_cuts_the_trained_turns_stops_before_training(
    archive: Path, catalog_dir: Path, tiny: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    config = _config(tmp_path, archive, catalog_dir, tiny, eval={"max_tokens": 8})
    out = tmp_path / "run"
    assert _run("--config", str(config), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "eval.max_tokens: arm curated: a budget of 8 tokens a turn cuts" in err
    assert "give at least" in err
    assert not (out / "arms" / "curated" / "train").exists()


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"arms": ["base", "curated", "distilled"]}, "arms.2: Input should be 'base'"),
        ({"arms": ["curated"]}, "the arms must include base"),
        ({"view": "tiny"}, "view: 'tiny' is not a view id"),
        ({"epochs": 3}, "epochs: Extra inputs are not permitted"),
        ({"model": "no/such/model"}, "model: no/such/model: no such model directory"),
        ({"arena": {"products": 500}}, "give an arena (to play) or an archive"),
        ({"archive": None}, "give an arena (to play) or an archive"),
        ({"train": {"config": "nonesuch.yaml"}}, "train.config: nonesuch.yaml is neither"),
    ],
)
def test_a_bad_config_is_one_line_before_any_work(
    archive: Path, catalog_dir: Path, tiny: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], over: dict[str, Any], message: str,
) -> None:  # fmt: skip
    config = _config(tmp_path, archive, catalog_dir, tiny, **over)
    assert _run("--config", str(config), "--out", str(tmp_path / "run")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_an_arena_option_is_refused_before_the_arena_plays(
    catalog_dir: Path, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    config = _config(tmp_path, tmp_path, catalog_dir, tiny, archive=None,
                     arena={"products": 10, "rounds": 1})  # fmt: skip
    assert _run("--config", str(config), "--out", str(tmp_path / "run")) == 2
    err = capsys.readouterr().err
    assert "arena.products: Input should be greater than or equal to 500" in err
    assert not (tmp_path / "run").exists()


def test_arms_at_equal_tokens_each_decoding_and_the_scripted_baselines(
    archive: Path, catalog_dir: Path, tiny: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The third design: every trained arm reads the same token budget of its own pool
    (distinct tasks first), curated-2 trains curated's rows under the next seed, each arm is
    evaluated constrained and then free, and the scripted baselines play the same tasks
    first; the report has a row for each and each arm's difference to each baseline."""
    from shopbench.agents.local.grammar import GRAMMAR_VERSION

    config = _config(
        tmp_path, archive, catalog_dir, tiny, arms=["curated", "base", "curated-2", "prompted"],
        train={"config": "smollm2-lora", "overrides": TRAIN, "tokens": 3000},
        eval={"step_tasks": 0, "decoding": ["constrained", "free"],
              "baselines": ["first_hit", "greedy"]},
    )  # fmt: skip
    out = tmp_path / "run"
    assert _run("--config", str(config), "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert "sample curated: " in said and "sample curated-2" not in said
    sample = json.loads((out / "arms" / "curated" / "sampled" / "tokens.json").read_text())
    assert 0 < sample["tokens"] <= 3000 and sample["tasks"] == sample["rows"]
    order = list(json.loads((out / "stages.json").read_text())["finished"])
    assert order.index("eval baselines/first_hit") < order.index("train curated")
    assert order.index("eval curated-2") < order.index("eval curated@free")
    report = json.loads((out / "report.json").read_text())
    rows = [(a["arm"], a["decoding"]) for a in report["arms"]]
    arms = ["curated", "base", "curated-2", "prompted"]
    assert rows == [(a, d) for d in ("constrained", "free") for a in arms]
    # The prompted base reads one curated episode before each task: no system prompt in it.
    example = json.loads((out / "arms" / "prompted" / "example.json").read_text())
    assert example[0]["role"] == "user" and "system" not in {m["role"] for m in example}
    assert sum(m["role"] == "assistant" for m in example) >= 1
    assert [b["policy"] for b in report["baselines"]] == ["first_hit", "greedy"]
    first = report["arms"][0]
    assert first["sample"] == sample and first["train_rows"] == sample["rows"]
    assert set(first["minus_baselines"]) == {"first_hit", "greedy"}
    assert set(first["table"]["metrics"]) >= {"completion", "accepted_calls", "shown_ids"}
    # Constrained, every call the models made ran; the same seed's rows, another seed's model.
    constrained = [json.loads(line) for line in
                   (out / "eval" / "base" / "trajectories.jsonl").read_text().splitlines()]
    assert all(e["error"] is None for t in constrained for e in t["tool_log"])
    assert first["table"]["metrics"]["accepted_calls"]["value"] == 1.0
    said = {d: json.loads((out / "eval" / k / "report.json").read_text())
            for d, k in (("constrained", "base"), ("free", "base@free"))}  # fmt: skip
    assert (said["constrained"]["decoding"], said["constrained"]["grammar"]) == (
        "constrained", GRAMMAR_VERSION)  # fmt: skip
    assert (said["free"]["decoding"], said["free"]["grammar"]) == (None, None)
    trained = {a["arm"]: a for a in report["arms"] if a["decoding"] == "constrained"}
    assert trained["curated-2"]["files"]["sample"] == trained["curated"]["files"]["sample"]
    assert {"curated-2 − curated (constrained)", "curated − prompted (free)"} <= set(
        report["differences"])  # fmt: skip
    md = (out / "report.md").read_text()
    assert "| first_hit |" in md and "− first_hit |" in md and report["pending"] == []


def test_the_arms_run_in_the_config_s_order_base_last_when_asked(
    archive: Path, catalog_dir: Path, tiny: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``base`` last: the trained arm's answer comes first, and the report after it holds
    that arm alone with the base pending; the base's comparison is filled in when it runs."""
    config = _config(tmp_path, archive, catalog_dir, tiny, arms=["curated", "base"],
                     eval={"step_tasks": 1})  # fmt: skip
    out = tmp_path / "run"
    assert _run("--config", str(config), "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert "(arms so far: curated last)" in said and "(arms so far: base last)" in said
    assert said.index("(arms so far: curated last)") < said.index("(arms so far: base last)")
    order = list(json.loads((out / "stages.json").read_text())["finished"])
    assert order.index("train curated") < order.index("eval curated") < order.index("eval base")
    report = json.loads((out / "report.json").read_text())
    assert [a["arm"] for a in report["arms"]] == ["curated", "base"]
    assert report["arms"][0]["minus_base"]["asr"] is not None and report["pending"] == []
    # The smallest detectable difference is the base's, whichever arm the table starts with.
    data = ExperimentReport.model_validate(report)
    base = data.arms[1].model_copy(update={
        "table": data.arms[1].table.model_copy(update={"mde": 0.0614})
    })  # fmt: skip
    shown = render_markdown(data.model_copy(update={"arms": [data.arms[0], base]}))
    assert "(80% power, at the base rate): 0.061." in shown


def test_too_few_rows_or_held_out_tasks_stop_before_training(
    archive: Path, catalog_dir: Path, tiny: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    config = _config(tmp_path, archive, catalog_dir, tiny, min_rows=10_000)
    out = tmp_path / "run"
    assert _run("--config", str(config), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "too few training rows for an arm (curated " in err and "min_rows 10000" in err
    assert not any((out / "arms").glob("*/train"))


def test_held_out_tasks_whose_groups_training_touched_stop_before_training(
    env: ShoppingEnv, catalog: Any, catalog_dir: Path, tiny: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """An archive of episodes played on the held-out tasks themselves: every task the
    evaluation draws is of a group a training episode called products of."""
    from shopbench.tasks.generate import BuildConfig, build_tasks

    held = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product"], n=8,
                                   split="heldout", seed=8)).tasks  # fmt: skip
    leaked = _signed_archive(env, catalog, held, tmp_path / "leaked", ("careful", "greedy"))
    config = _config(tmp_path, leaked, catalog_dir, tiny, arms=["base", "unfiltered"],
                     eval={"tasks": 4, "seed": 8})  # fmt: skip
    out = tmp_path / "run"
    assert _run("--config", str(config), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "held-out tasks are of product groups no training row touches" in err
    assert not any((out / "arms").glob("*/train"))


def test_the_arms_are_the_release_curation_and_its_variants() -> None:
    curated = curation_of("curated", recovery_weight=3.0)
    recovery = curation_of("recovery", recovery_weight=3.0)
    unfiltered = curation_of("unfiltered", recovery_weight=3.0)
    successes = curation_of("successes", recovery_weight=3.0)
    assert curation_of("base", recovery_weight=3.0) is None
    assert curated is not None and recovery is not None
    assert recovery.recovery.weight == 3.0 and curated.recovery.weight == 1.5
    assert recovery.model_copy(update={"recovery": curated.recovery}) == curated
    assert unfiltered is not None and successes is not None
    assert not any(getattr(unfiltered, r).enabled for r in ("validity", "narrator", "outcome"))
    assert successes.outcome.enabled and successes.outcome.rule_score_min == 1.0
    assert not successes.judge.enabled and not successes.narrator.enabled
    # Masking refused calls is one switch for every trained arm, nothing else changed.
    for arm, plain in (("curated", curated), ("unfiltered", unfiltered), ("successes", successes)):
        masked = curation_of(arm, recovery_weight=3.0, mask_refused=True)
        assert masked is not None and masked.recovery.mask_refused
        assert not plain.recovery.mask_refused
        assert masked.model_copy(update={"recovery": plain.recovery}) == plain
    assert curation_of("base", recovery_weight=3.0, mask_refused=True) is None


def test_the_shipped_configs_load(tiny: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "experiments"
    shipped = sorted(root.glob("*.yaml"))
    assert {p.name for p in shipped} >= {"smollm2-cpu.yaml", "qwen3-4b-gpu.yaml"}
    for path in shipped:
        config = load_experiment(path, model=tiny)
        assert isinstance(config.arena, ArenaConfig) and "base" in config.arms
        # config.json, which a rerun compares, holds the arena options as the file gave them
        given = yaml.safe_load(path.read_text(encoding="utf-8"))["arena"]
        assert config.model_dump(mode="json")["arena"] == given
        assert config.arena.products == given["products"]
    with pytest.raises(ExperimentError, match="no such model directory"):
        load_experiment(root / "qwen3-4b-gpu.yaml")


def test_an_evaluation_s_journal_keeps_every_whole_line_and_drops_a_torn_one(
    tmp_path: Path,
) -> None:
    from shopbench.archive.store import read_store
    from shopbench.evaluate.trained.journal import read_journal

    journal = tmp_path / "curated.played.jsonl"
    assert read_journal(journal) == []
    records = list(read_store(Path(__file__).resolve().parents[1] / "data" / "archive_v1" /
                              "archive"))  # fmt: skip
    lines = [t.model_dump_json() for t in records]
    journal.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:200], encoding="utf-8")
    assert read_journal(journal) == records[:2]  # the line the interruption cut is played again
