"""The experiment folder: which stages are done, and where each stage's files are.

A stage is done when its folder holds the marker file (written after the stage's last file):
a rerun skips it; a folder without the marker is what a stopped run left, removed and redone
(or, for training, resumed from its last checkpoint).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from shopbench.agents.local.grammar import Decoding
from shopbench.arena.config import ArenaConfig
from shopbench.experiment.arms import UNTRAINED, Arm
from shopbench.experiment.config import ExperimentConfig

ARENA_DIR = "arena"
MARKER = ".done"
PlayArena = Callable[[ArenaConfig, Path], None]
"""Plays the config's arena into the folder, its ``out`` (the subnet layer's to give)."""
Log = Callable[[str], None]


class HeldOut(BaseModel):
    """The held-out tasks' draw and its check against every arm's training rows."""

    drawn: int = Field(description="held-out tasks drawn")
    touched: int = Field(description="of those, left out: their product group is in training")
    kept: int = Field(description="tasks evaluated")
    groups: int = Field(description="product groups of the tasks evaluated")
    train_groups: int = Field(description="product groups the training rows name products of")
    shared: int = Field(description="product groups shared by the evaluated tasks and training")


class Stages:
    """The experiment folder `out`: which stages are done, and the paths of their files."""

    def __init__(self, out: Path, log: Log) -> None:
        self.out = out
        self.log = log
        self.timings: dict[str, float] = {}
        self.finished: dict[str, str] = {}
        path = out / "stages.json"
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            # {"seconds": {...}, "finished": {...}}; a folder of the release before: seconds only
            self.timings = data.get("seconds", data) if "seconds" in data else data
            self.finished = data.get("finished", {})

    def arm(self, arm: Arm) -> Path:
        """The folder of `arm`'s curation, rows and training."""
        return self.out / "arms" / arm

    def done(self, folder: Path) -> bool:
        """Whether the stage writing `folder` finished."""
        return (folder / MARKER).is_file()

    def run(self, name: str, folder: Path, work: Callable[[], None], *, keep: bool = False) -> None:
        """Run `work` into `folder` unless it is done; a folder left by a run that stopped is
        removed first (`keep`: left for `work` to resume from)."""
        if self.done(folder):
            self.log(f"{name}: done already ({folder})")
            return
        if folder.exists() and not keep:
            shutil.rmtree(folder)
        self.log(f"{name}: running")
        started = time.perf_counter()
        work()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MARKER).write_text("", encoding="utf-8")
        self.timings[name] = round(time.perf_counter() - started, 1)
        self.finished[name] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        (self.out / "stages.json").write_text(
            json.dumps({"seconds": self.timings, "finished": self.finished}, indent=2) + "\n"
        )
        self.log(f"{name}: {self.timings[name]:.0f} s")


def model_dir(stages: Stages, arm: Arm, config: ExperimentConfig) -> Path:
    """The model directory an arm is evaluated with (the base model for ``base``)."""
    if arm in UNTRAINED:
        return config.model
    train = stages.arm(arm) / "train"
    merged = train / "merged"
    return merged if merged.is_dir() else train / "model"


def eval_key(config: ExperimentConfig, arm: Arm, decoding: Decoding) -> str:
    """The name of `arm`'s evaluation under `decoding` (its folder under ``eval/``): the
    arm's own under the config's first decoding (so a folder of one decoding reads as
    before), ``arm@decoding`` else."""
    return arm if decoding == config.eval.decoding[0] else f"{arm}@{decoding}"


def baseline_key(policy: str) -> str:
    """The name of a baseline policy's evaluation (its folder under ``eval/``)."""
    return f"baselines/{policy}"


def train_data(config: ExperimentConfig, stages: Stages, arm: Arm) -> Path:
    """The SFT dataset the arm trains on: its token sample, or its whole build."""
    return stages.arm(arm) / ("sampled" if config.train.tokens is not None else "sft")
