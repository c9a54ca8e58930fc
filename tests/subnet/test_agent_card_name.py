"""A miner serving local weights (``hf:PATH``) never puts its filesystem path on its agent
card, which every validator signs into public records: the card names the model as the
operator chooses, else by the path's last component; a path given as the name is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from bittensor import http_auth

from shopbench.distill.tiny_model import TinyModelConfig, tiny_qwen3
from template.base.config import miner_config
from template.base.miner import Miner, make_agent
from template.serve import BackgroundServer
from template.signing import LocalWallet

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = LocalWallet.derive("card-name-validator")


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_qwen3(tmp_path_factory.mktemp("home") / "alice" / "runs" / "tuned-135m",
                      TinyModelConfig())  # fmt: skip


def served_card(args: list[str]) -> dict[str, str]:
    """The card a local-mode miner made of `args` serves to a validator, over signed HTTP."""
    cfg = miner_config(["--local", "--local.allow", VALIDATOR.hotkey_ss58, *args], env={})
    assert cfg.agent is not None
    policy, card = make_agent(cfg.agent)
    hotkey = LocalWallet.derive("card-name-miner").hotkey_ss58
    miner = Miner(cfg, hotkey, policy, card)
    with BackgroundServer(miner.app) as server:
        headers = http_auth.sign(VALIDATOR.hotkey, method="GET", path="/card", body=b"",
                                 receiver_ss58=hotkey)  # fmt: skip
        reply = httpx.get(f"{server.url}/card", headers=headers)
    assert reply.status_code == 200, reply.text
    served: dict[str, str] = reply.json()
    return served


def test_the_card_names_the_model_not_its_path(weights: Path) -> None:
    card = served_card(["--agent.policy", f"hf:{weights}"])
    assert card["model"] == "tuned-135m"
    assert str(weights.parent) not in str(card)
    named = served_card(["--agent.policy", f"hf:{weights}", "--agent.model", "shop-agent-v1",
                         "--agent.revision", "r2"])  # fmt: skip
    assert (named["model"], named["revision"]) == ("shop-agent-v1", "r2")


def test_a_path_given_as_the_cards_name_is_refused_in_one_line(weights: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "neurons" / "miner.py"), "--local", "--local.allow", "x",
         "--agent.policy", f"hf:{weights}", "--agent.model", str(weights)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("error: ") and "give a name, not a local path" in line
