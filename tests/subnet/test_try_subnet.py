"""Try it before you register: the real validator and two real miners, as separate
processes, on a served development chain, until the validator's weights are on chain.

Runs ``scripts/try-subnet.sh``, the script docs/validator.md walks through.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_real_neurons_set_weights_on_a_served_chain(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SHOPBENCH_TRY_DIR": str(tmp_path / "try"),
        "SHOPBENCH_TRY_NO_INSTALL": "1",
        "SHOPBENCH_TRY_WAIT_S": "240",
        "VIRTUAL_ENV": sys.prefix,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "try-subnet.sh")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    out = tmp_path / "try"
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    assert "weights are on chain" in done.stdout
    subnet = json.loads((out / "subnet.json").read_text())
    validator, *miners = subnet["neurons"]
    assert validator["validator_permit"] and validator["stake"] == 1000.0
    assert [m["uid"] for m in miners] == [1, 2]
    assert all(m["axon"] and m["axon"].startswith("127.0.0.1:") for m in miners)
    # the validator's own row of weights, set through the SDK's SetWeights by its process
    assert set(subnet["weights"]) == {"0"} and set(subnet["weights"]["0"]) <= {"1", "2"}
    log = (out / "validator.log").read_text()
    assert "weights set (direct)" in log
    archive = out / "validator" / "archive" / f"validator={validator['hotkey']}"
    assert archive.is_dir()  # the round's trajectories, signed by the validator's hotkey
    # every process was stopped, the validator between rounds
    assert "stopping between rounds" in log
