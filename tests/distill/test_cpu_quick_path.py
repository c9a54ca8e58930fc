"""docs/distill.md's "On a CPU, after the quick start" runs as written: its commands, in
order, from an arena's archive to a trained tiny model whose loss falls."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.api_archives import run_arena

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "distill.md"
HEADING = "### On a CPU, after the quick start"
SHOPBENCH = ".venv/bin/shopbench "


def cpu_path_commands() -> list[str]:
    """The shell lines of the section's first bash block."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, f"{DOC}: no bash block under {HEADING!r}"
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_block_installs_the_training_extras_then_runs_shopbench_from_the_venv() -> None:
    lines = cpu_path_commands()
    assert lines[0] == ".venv/bin/pip install -e '.[distill,smollm2]'"
    assert lines[1:] and all(ln.startswith(SHOPBENCH) for ln in lines[1:])
    build = next(ln for ln in lines if " distill build " in ln)
    assert "--format step" in build and "--view compact" in build  # rows that fit 2,048


@pytest.mark.slow
def test_the_cpu_path_runs_as_written_and_the_loss_falls(
    catalog_dir: Path, tmp_path: Path
) -> None:
    run_arena(catalog_dir, tmp_path / "arena")  # the quick start's arena/, smaller
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    said = ""
    for line in cpu_path_commands()[1:]:  # the install is this environment's already
        args = shlex.split(line.removeprefix(SHOPBENCH))
        done = subprocess.run(
            [sys.executable, "-m", "shopbench.cli", *args],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        said = done.stdout + done.stderr
    trained = re.search(r"(\d+) steps on cpu: train loss ([\d.]+) → ([\d.]+)", said)
    assert trained is not None, said
    steps, first, last = int(trained.group(1)), float(trained.group(2)), float(trained.group(3))
    assert steps == 30 and last < first - 0.5, said
    assert (tmp_path / "run" / "model" / "config.json").is_file()
