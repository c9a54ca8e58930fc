"""From a signed archive to a trained model, every step through the CLI: `curate` →
`distill build` → `distill prepare tiny` → `distill train` (CPU, tiny random Qwen3)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.registry import make_policy
from shopbench.archive.shards import write_shard
from shopbench.archive.signing import sign_trajectory
from shopbench.cli import main
from shopbench.distill.dataset import read_report
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.score import with_judgement
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from template.signing import HotkeySigner, LocalWallet

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

SIGNER = HotkeySigner.from_wallet(LocalWallet.derive("distill-test"))
POLICIES = ("careful", "trial_and_error", "narrator", "guesser")


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(catalog=catalog_dir, intents=["product", "voucher"], n=3, seed=5)
    return build_tasks(cfg).tasks[:6]


def _played(env: ShoppingEnv, catalog: Any, tasks: list[Task]) -> list[Trajectory]:
    judge = RubricJudge()

    async def go(uid: int, policy: str) -> list[Trajectory]:
        agent = make_policy(policy, catalog=catalog, seed=uid)
        return list(await asyncio.gather(*(
            run_episode(env, t, agent, key=bytes([uid + 1, i + 1]) * 16, miner_uid=uid,
                        miner_hotkey=f"5Miner{uid:02d}" + "x" * 40, block=100 + i)
            for i, t in enumerate(tasks)
        )))  # fmt: skip

    out = []
    for uid, policy in enumerate(POLICIES):
        for t in asyncio.run(go(uid, policy)):
            judged = with_judgement(t.model_copy(update={"validator_hotkey": SIGNER.hotkey}),
                                    judge.judge(t))  # fmt: skip
            out.append(sign_trajectory(judged, SIGNER))
    return out


def _run(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_archive_to_trained_model_from_the_command_line(
    env: ShoppingEnv, catalog: Any, tasks: list[Task], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    played = _played(env, catalog, tasks)
    by_intent: dict[str, list[Trajectory]] = {}
    for t in played:
        by_intent.setdefault(str(t.intent), []).append(t)
    for group in by_intent.values():
        write_shard(group, str(tmp_path / "archive"), signer=SIGNER)

    curated, sft, model, run = (tmp_path / n for n in ("curated", "sft", "tiny", "run"))
    assert _run("curate", "--archive", str(tmp_path / "archive"), "--out", str(curated)) == 0
    kept = json.loads((curated / "report.json").read_text())["kept"]
    assert 0 < kept < len(played)
    args = ["--validation-fraction", "0.3", "--seed", "1"]
    assert _run("distill", "build", "--curated", str(curated), "--out", str(sft), *args) == 0
    built = read_report(sft)
    assert built["episodes"] == kept and built["rows"]["train"] > 0
    assert _run("distill", "prepare", "tiny", "--out", str(model)) == 0
    config = tmp_path / "train.toml"
    config.write_text(
        "max_steps = 6\nlearning_rate = 1e-3\nwarmup_ratio = 0.0\n"
        "gradient_accumulation_steps = 1\nlogging_steps = 1\nmax_length = 1400\n"
        'overlong = "cut"\n'
    )
    capsys.readouterr()
    code = _run("distill", "train", "--model", str(model), "--data", str(sft), "--out", str(run),
                "--config", str(config))  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((run / "train_report.json").read_text())
    assert report["train_loss"][-1]["loss"] < report["train_loss"][0]["loss"]
    assert (run / "model" / "model.safetensors").is_file()
    assert "6 steps on cpu" in capsys.readouterr().out
