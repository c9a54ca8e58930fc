"""ATIF readers see the reward: `atif-scan`, the check of record, finds an export's documents
by default and reads every one as rewarded, with its task."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.registry import make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.score import with_judgement
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.traces.atif import write_atif
from shopbench.trajectory.loop import run_episode

# The environment's own script first: the tests may run without its bin/ on PATH.
SCAN = next(
    (str(p) for p in [Path(sys.executable).parent / "atif-scan"] if p.is_file()),
    shutil.which("atif-scan"),
)


@pytest.fixture(scope="module")
def played(catalog: Any, catalog_dir: Path) -> list[Trajectory]:
    """Judged episodes of two intents, some succeeding and some not."""
    tasks = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product", "shop"], n=3,
                                    seed=11)).tasks  # fmt: skip
    env, judge = ShoppingEnv(catalog), RubricJudge()

    async def go() -> list[Trajectory]:
        out = []
        for i, task in enumerate(tasks):
            name = "careful" if i % 2 == 0 else "greedy"
            t = await run_episode(env, task, make_policy(name, seed=1), key=bytes([i]) * 32)
            out.append(with_judgement(t, judge.judge(t)))
        return out

    return asyncio.run(go())


@pytest.mark.skipif(SCAN is None, reason="atif-scan is not installed (pip install atif-scan)")
def test_atif_scan_reads_every_exported_episode_as_rewarded(
    played: list[Trajectory], tmp_path: Path
) -> None:
    out = tmp_path / "atif"
    write_atif(played, out)
    assert SCAN is not None
    done = subprocess.run(
        [SCAN, str(out), "--format", "json", "--overview", "--no-cache"],  # no --pattern
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    overview = json.loads(done.stdout)
    trials = overview["trials"]
    assert trials["present"] == len(played) and trials["without_trajectory"] == 0
    assert trials["reward_unknown"] == 0  # the reward of every document is found
    assert overview["tasks"]["count"] == len({t.task_id for t in played})
    rewards = [1.0 if t.outcome.success else 0.0 for t in played]
    assert 0 < sum(rewards) < len(rewards)  # both kinds, so the accuracy says something
    assert overview["accuracy"][0] == pytest.approx(100 * sum(rewards) / len(rewards), abs=0.1)
    assert overview["walltime"]["agent"]["recorded_trials"] == len(played)
