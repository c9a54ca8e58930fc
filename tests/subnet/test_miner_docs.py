"""docs/miner.md's "Test it before you register" runs as written after the quick start: a
hotkey made first, the miner in local mode, a fresh arena that adds it, and a miner that
plays a policy none of the arena's own miners play, so it is scored, not a copy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shopbench.arena.config import ArenaConfig
from shopbench.catalog.store import build_catalog
from shopbench.trajectory.loop import DEFAULT_TURN_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "miner.md"
HEADING = "## 2. Test it before you register"


def local_test_block() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, f"{DOC}: no bash block under {HEADING!r}"
    return block.group(1)


def test_the_block_makes_its_wallet_first_and_uses_the_projects_commands() -> None:
    block = local_test_block()
    lines = [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert "btcli wallet new-hotkey" in lines[0]  # the wallet before the miner needs it
    commands = [ln.split()[0] for ln in lines if not ln.startswith((" ", "MINER=", "until"))]
    assert {c for c in commands if not c.startswith(("HOTKEY=", "kill"))} <= {
        ".venv/bin/btcli", ".venv/bin/python", ".venv/bin/shopbench"
    }  # fmt: skip
    arena = block[block.index(".venv/bin/shopbench arena --out") :]
    assert "--out arena-mine" in arena  # not the quick start's arena/
    policies = re.search(r"--policies (\S+)", arena)
    assert policies is not None and "careful" not in policies.group(1).split(",")
    # the arena gives a turn the validators' time, as the section says
    assert ArenaConfig.model_fields["turn_timeout_s"].default == DEFAULT_TURN_TIMEOUT_S == 60
    assert "validators' 60 s" in DOC.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_local_test_runs_as_written_and_scores_the_miner(tmp_path: Path) -> None:
    # What the quick start leaves: the project's environment and arena/'s catalog (smaller).
    (tmp_path / ".venv").symlink_to(sys.prefix)
    (tmp_path / "neurons").symlink_to(ROOT / "neurons")
    build_catalog(tmp_path / "arena" / "catalog-50000-s1", 2000, seed=1, chunk_size=500,
                  workers=1)  # fmt: skip
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", local_test_block()],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    report = json.loads((tmp_path / "arena-mine" / "arena.json").read_text())
    mine = next(r for r in report["miners"] if r["policy"].startswith("external:"))
    assert mine["policy"] == "external:reference/careful" and mine["episodes"] == 24
    assert mine["copy_of"] is None and mine["asr"] > 0.5 and mine["weight"] > 0
    assert mine["weight"] == max(r["weight"] for r in report["miners"])
    log = (tmp_path / "my-miner-episodes.jsonl").read_text().splitlines()
    assert len(log) >= 24 and all(json.loads(x)["ended"] for x in log)
