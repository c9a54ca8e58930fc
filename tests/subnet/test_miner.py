"""The miner: local mode as a process, standing checks on the local chain, a model proxy."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bittensor import http_auth
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from template.base.config import miner_config
from template.base.miner import Miner, make_agent
from template.base.neuron import NeuronError, write_local_wallet
from template.chain import LocalChain, MemorySubstrate, SubnetParams
from template.protocol import StepRequest
from template.serve import BackgroundServer
from template.signing import LocalWallet

ROOT = Path(__file__).resolve().parents[2]
NETUID = 4
VALIDATOR = LocalWallet.derive("miner-test-validator")
STRANGER = LocalWallet.derive("miner-test-stranger")


def step_body(query: str = "a ceramic mug under 300 pesos", turn: int = 1) -> bytes:
    from shopbench.env.tools import ShopTools

    tools = [spec.openai_schema() for spec in ShopTools.tool_specs().values()]
    req = StepRequest(
        episode_id="ep-test", turn=turn, deadline_ms=10_000,
        messages=[{"role": "system", "content": "You are a shopping agent."},
                  {"role": "user", "content": query}],
        tools=tools,
    )  # fmt: skip
    return req.model_dump_json(exclude_none=True).encode()


def signed(signer: Any, body: bytes, receiver: str, path: str = "/step") -> dict[str, str]:
    method = "POST" if path == "/step" else "GET"
    return http_auth.sign(signer.hotkey, method=method, path=path, body=body,
                          receiver_ss58=receiver)  # fmt: skip


def start_miner(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """neurons/miner.py as an operator runs it; its port from the 'serving' log line."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "neurons" / "miner.py"), *args],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if '"serving"' in line:
                return proc, int(json.loads(line)["port"])
        if proc.poll() is not None:
            raise AssertionError(f"the miner exited: {log.read_text()}")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the miner did not serve: {log.read_text()}")


@pytest.fixture(scope="module")
def local_miner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A local-mode miner process serving `careful` to VALIDATOR only: (url, its hotkey)."""
    tmp = tmp_path_factory.mktemp("local-miner")
    wallet = write_local_wallet(tmp / "wallets", "local-miner")
    proc, port = start_miner(
        ["--local", "--local.allow", VALIDATOR.hotkey_ss58, "--wallet.path", str(tmp / "wallets"),
         "--wallet.name", "local-miner", "--axon.ip", "127.0.0.1", "--axon.port", "0",
         "--agent.policy", "careful", "--neuron.clock.ntp_servers", ""],
        tmp / "miner.log",
    )  # fmt: skip
    yield f"http://127.0.0.1:{port}", wallet.hotkey.ss58_address
    proc.terminate()
    proc.wait(10)


def test_local_mode_serves_the_allowed_validator_and_refuses_the_rest(
    local_miner: tuple[str, str],
) -> None:
    url, hotkey = local_miner
    body = step_body()
    ok = httpx.post(f"{url}/step", content=body, headers=signed(VALIDATOR, body, hotkey))
    assert ok.status_code == 200, ok.text
    calls = ok.json()["message"]["tool_calls"]
    assert calls[0]["function"]["name"] == "find_product"
    assert "mug" in json.loads(calls[0]["function"]["arguments"])["q"]
    other = httpx.post(f"{url}/step", content=body, headers=signed(STRANGER, body, hotkey))
    assert other.status_code == 403 and "allow-list" in other.json()["detail"]
    unsigned = httpx.post(f"{url}/step", content=body)
    assert unsigned.status_code == 401
    card = httpx.get(f"{url}/card", headers=signed(VALIDATOR, b"", hotkey, "/card"))
    assert card.json()["model"] == "reference/careful"
    metrics = httpx.get(f"{url}/metrics").text
    assert "shopbench_miner_turns_total 1.0" in metrics
    assert "shopbench_miner_episodes_total 1.0" in metrics
    assert 'shopbench_miner_rejections_total{reason="forbidden"} 1.0' in metrics
    assert 'shopbench_miner_rejections_total{reason="MalformedAuth"} 1.0' in metrics


def test_start_up_errors_are_one_line(tmp_path: Path) -> None:
    cases = [
        (["--agent.policy", "careful"], "error: --netuid is required unless the miner runs "
         "with --local"),
        (["--local", "--local.allow", "x", "--agent.policy", "careful", "--wallet.path",
          str(tmp_path), "--neuron.clock.ntp_servers", ""], "no hotkey file at"),
    ]  # fmt: skip
    for args, expected in cases:
        run = subprocess.run(
            [sys.executable, str(ROOT / "neurons" / "miner.py"), *args],
            capture_output=True, text=True, cwd=ROOT, timeout=120,
        )  # fmt: skip
        assert run.returncode == 2, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]


def test_an_agent_must_be_named_and_known() -> None:
    from shopbench.agents.errors import PolicySpecError
    from template.base.options import ConfigError

    with pytest.raises(ConfigError, match="the miner needs an agent"):
        miner_config(["--local", "--local.allow", "x"], env={})
    with pytest.raises(ConfigError, match="not both"):
        miner_config(["--netuid", "1", "--agent.policy", "careful", "--agent.model", "m"], env={})
    cfg = miner_config(["--netuid", "1", "--agent.policy", "nope"], env={})
    assert cfg.agent is not None
    with pytest.raises(PolicySpecError, match="unknown policy 'nope'"):
        make_agent(cfg.agent)


# -- on a chain: publishing the address, serving by standing ------------------------------


def test_a_registered_miner_publishes_its_address_and_serves_by_standing() -> None:
    substrate = MemorySubstrate()
    owner, miner_wallet = LocalWallet.derive("mt-owner"), LocalWallet.derive("mt-miner")
    substrate.add_subnet(NETUID, owner.hotkey_ss58, owner.coldkey_ss58, SubnetParams(tempo=100))
    substrate.register(NETUID, VALIDATOR.hotkey_ss58, VALIDATOR.coldkey_ss58, 5000, True)
    substrate.register(NETUID, STRANGER.hotkey_ss58, STRANGER.coldkey_ss58, 5000, False)
    cfg = miner_config(
        ["--netuid", str(NETUID), "--agent.policy", "greedy", "--axon.ip", "127.0.0.1"], env={}
    )
    assert cfg.agent is not None
    policy, card = make_agent(cfg.agent)
    unregistered = Miner(cfg, miner_wallet.hotkey_ss58, policy, card,
                         LocalChain(substrate, miner_wallet, NETUID))  # fmt: skip
    with pytest.raises(NeuronError, match="is not registered on netuid 4"):
        asyncio.run(unregistered.announce(8091))
    substrate.register(NETUID, miner_wallet.hotkey_ss58, miner_wallet.coldkey_ss58)
    miner = Miner(cfg, miner_wallet.hotkey_ss58, policy, card,
                  LocalChain(substrate, miner_wallet, NETUID))  # fmt: skip
    with BackgroundServer(miner.app) as server:
        asyncio.run(miner.announce(server.port))
        graph = asyncio.run(LocalChain(substrate, VALIDATOR, NETUID).metagraph())
        neuron = graph.by_hotkey(miner_wallet.hotkey_ss58)
        assert neuron is not None and neuron.axon == f"127.0.0.1:{server.port}"
        body = step_body()
        hk = miner_wallet.hotkey_ss58
        ok = httpx.post(f"{server.url}/step", content=body, headers=signed(VALIDATOR, body, hk))
        assert ok.status_code == 200, ok.text
        refused = httpx.post(f"{server.url}/step", content=body, headers=signed(STRANGER, body, hk))
        assert refused.status_code == 403 and "validator permit" in refused.json()["detail"]


def test_an_unspecified_bind_address_needs_an_external_ip() -> None:
    cfg = miner_config(["--netuid", "1", "--agent.policy", "careful"], env={})
    assert cfg.agent is not None
    policy, card = make_agent(cfg.agent)
    substrate = MemorySubstrate()
    chain = LocalChain(substrate, LocalWallet.derive("mt-x"), 1)
    miner = Miner(cfg, "hk", policy, card, chain)
    with pytest.raises(NeuronError, match="--axon.external_ip"):
        miner.published_address(8091)
    cfg2 = miner_config(["--netuid", "1", "--agent.policy", "careful", "--axon.external_ip",
                         "203.0.113.5", "--axon.external_port", "443"], env={})  # fmt: skip
    assert Miner(cfg2, "hk", policy, card, chain).published_address(8091) == ("203.0.113.5", 443)


# -- a model behind an OpenAI-compatible URL ----------------------------------------------


class FakeModelServer:
    """A chat-completions endpoint (what `vllm serve` speaks) that always searches."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> dict[str, Any]:
            body = await request.json()
            self.requests.append(body)
            query = next(m["content"] for m in body["messages"] if m["role"] == "user")
            call = {"id": "call_1", "type": "function", "function": {
                "name": "find_product", "arguments": json.dumps({"q": query[:40]})}}  # fmt: skip
            message = {"role": "assistant", "content": None, "tool_calls": [call],
                       "reasoning_content": "The user wants a mug; search first."}  # fmt: skip
            return {
                "id": "c1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            }

        self.app = app


def test_a_miner_in_front_of_a_model_server_relays_its_turns() -> None:
    model = FakeModelServer()
    with BackgroundServer(model.app) as llm:
        cfg = miner_config(
            ["--local", "--local.allow", VALIDATOR.hotkey_ss58, "--agent.base_url",
             f"{llm.url}/v1", "--agent.model", "Qwen/Qwen3-4B", "--agent.revision", "r1"],
            env={},
        )  # fmt: skip
        assert cfg.agent is not None
        policy, card = make_agent(cfg.agent)
        assert card.model == "Qwen/Qwen3-4B" and card.revision == "r1"
        hotkey = LocalWallet.derive("mt-proxy").hotkey_ss58
        miner = Miner(cfg, hotkey, policy, card)
        with BackgroundServer(miner.app) as server:
            body = step_body("a ceramic mug")
            reply = httpx.post(f"{server.url}/step", content=body,
                               headers=signed(VALIDATOR, body, hotkey))  # fmt: skip
    assert reply.status_code == 200, reply.text
    message = reply.json()["message"]
    assert message["reasoning_content"] == "The user wants a mug; search first."
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"q": "a ceramic mug"}
    assert reply.json()["model"] == "Qwen/Qwen3-4B"
    sent = model.requests[0]
    assert sent["model"] == "Qwen/Qwen3-4B"
    assert {t["function"]["name"] for t in sent["tools"]} >= {"find_product", "terminate"}
    assert sent["messages"][-1] == {"role": "user", "content": "a ceramic mug"}


# -- the miner's own episode log ----------------------------------------------------------


class ScriptedModel:
    """A chat-completions endpoint that searches on the first turn, terminates on the
    next, and refuses (HTTP 400) a request whose query asks it to."""

    def __init__(self) -> None:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = await request.json()
            query = next(m["content"] for m in body["messages"] if m["role"] == "user")
            if "refuse" in query:
                return JSONResponse({"error": {"message": "no"}}, status_code=400)
            played = sum(m["role"] == "assistant" for m in body["messages"])
            name, args = ("terminate", {"status": "success"}) if played else (
                "find_product", {"q": query[:40]})  # fmt: skip
            call = {"id": f"call_{played}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return {"id": "c", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}

        self.app = app


def turn_body(episode: str, query: str, turn: int = 1, max_turns: int = 12) -> bytes:
    """A step request of `episode` at `turn`, the earlier turns each one search."""
    from shopbench.env.tools import ShopTools

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a shopping agent."},
        {"role": "user", "content": query},
    ]
    for n in range(1, turn):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{n}", "type": "function",
                "function": {"name": "find_product", "arguments": "{\"q\": \"mug\"}"}}]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": "[]"},
        ]  # fmt: skip
    tools = [spec.openai_schema() for spec in ShopTools.tool_specs().values()]
    req = StepRequest(episode_id=episode, turn=turn, max_turns=max_turns, deadline_ms=10_000,
                      messages=messages, tools=tools)  # fmt: skip
    return req.model_dump_json(exclude_none=True).encode()


def test_the_episode_log_writes_one_bounded_line_per_episode_played(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "episodes.jsonl"
    with BackgroundServer(ScriptedModel().app) as llm:
        cfg = miner_config(
            ["--local", "--local.allow", VALIDATOR.hotkey_ss58, "--agent.base_url",
             f"{llm.url}/v1", "--agent.model", "Qwen/Qwen3-4B"],
            env={"SHOPBENCH_NEURON_EPISODE_LOG": str(path),
                 "SHOPBENCH_NEURON_EPISODE_LOG_IDLE_S": "0.3"},
        )  # fmt: skip
        assert cfg.agent is not None and cfg.neuron.episode_log == path
        policy, card = make_agent(cfg.agent)
        hotkey = LocalWallet.derive("mt-episode-log").hotkey_ss58
        miner = Miner(cfg, hotkey, policy, card)
        assert path.exists() and path.read_text() == ""  # created at start

        def post(body: bytes, signer: Any = VALIDATOR) -> int:
            headers = signed(signer, body, hotkey)
            return httpx.post(f"{server.url}/step", content=body, headers=headers).status_code

        hostile = "a mug\n" + "\x1b[31m" * 2000 + "x" * 50_000
        with BackgroundServer(miner.app) as server:
            assert post(turn_body("ep-done", "a ceramic mug")) == 200
            assert post(turn_body("ep-done", "a ceramic mug", turn=2)) == 200  # terminates
            assert post(turn_body("ep-open", "a teapot")) == 200
            assert post(turn_body("ep-long", hostile, max_turns=1)) == 200  # its last turn
            assert post(turn_body("ep-stranger", "a mug"), STRANGER) == 403  # never logged
            time.sleep(0.4)  # ep-open goes quiet; the next request writes it
            assert post(turn_body("ep-refused", "refuse this")) == 500
        assert miner.episode_log is not None
        miner.episode_log.close()  # the miner stops: what is open is written
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    by_id = {line["episode_id"]: line for line in lines}
    assert [line["episode_id"] for line in lines] == [
        "ep-done", "ep-long", "ep-refused", "ep-open"
    ]
    assert len(lines) == 4  # the failed episode was written when its turn failed, not again
    done = by_id["ep-done"]
    assert done["validator"] == VALIDATOR.hotkey_ss58 and done["query"] == "a ceramic mug"
    assert (done["turns"], done["last_turn"], done["max_turns"], done["tool_calls"]) == (
        2, 2, 12, 2
    )
    assert (done["ended"], done["claimed_status"], done["failed"]) == ("terminated", "success", {})
    assert done["termination"] == "terminated" and "status" not in done
    assert done["first_seen"] <= done["last_seen"]
    assert (by_id["ep-open"]["ended"], by_id["ep-open"]["turns"]) == ("quiet", 1)
    assert by_id["ep-open"]["termination"] is None  # the validator's reason is not told
    long = by_id["ep-long"]
    assert long["ended"] == "turn_limit" and long["query"].startswith("a mug \x1b[31m")
    assert len(long["query"]) == 200 and long["query"].endswith("…")
    refused = by_id["ep-refused"]  # written when the turn failed, before the miner stopped
    assert (refused["ended"], refused["turns"], refused["failed"]) == (
        "failed", 0, {"policy_failed": 1}
    )
    assert refused["termination"] == "policy_error"
    text = path.read_text(encoding="utf-8")
    assert text.isascii() and "\x1b" not in text  # escaped, never a raw control character
    assert max(len(x) for x in text.splitlines()) < 2000  # 200 characters, even escaped


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stopped_miner_writes_its_open_episodes_and_a_stop_line(
    sig: str, tmp_path: Path
) -> None:
    import signal

    wallet = write_local_wallet(tmp_path / "wallets", "stopping-miner")
    episodes = tmp_path / "episodes.jsonl"
    proc, port = start_miner(
        ["--local", "--local.allow", VALIDATOR.hotkey_ss58, "--wallet.path",
         str(tmp_path / "wallets"), "--wallet.name", "stopping-miner", "--axon.ip", "127.0.0.1",
         "--axon.port", "0", "--agent.policy", "careful", "--neuron.clock.ntp_servers", "",
         "--neuron.episode_log", str(episodes)],
        tmp_path / "miner.log",
    )  # fmt: skip
    hotkey = wallet.hotkey.ss58_address
    try:
        for n in range(2):  # two episodes left open: a turn each, no terminate
            body = turn_body(f"ep-open-{n}", "a ceramic mug")
            reply = httpx.post(f"http://127.0.0.1:{port}/step", content=body,
                               headers=signed(VALIDATOR, body, hotkey))  # fmt: skip
            assert reply.status_code == 200, reply.text
    finally:
        proc.send_signal(getattr(signal, sig))
        code = proc.wait(30)
    assert code == 0
    lines = [json.loads(x) for x in episodes.read_text().splitlines()]
    assert [(x["episode_id"], x["ended"]) for x in lines] == [
        ("ep-open-0", "stopped"), ("ep-open-1", "stopped")
    ]
    logged = [json.loads(x) for x in (tmp_path / "miner.log").read_text().splitlines()
              if x.startswith("{")]  # fmt: skip
    stop = [x for x in logged if x.get("event") == "stopped"]
    assert len(stop) == 1 and stop[0]["signal"] == sig
    assert (stop[0]["served"], stop[0]["episodes_stopped"]) == (2, 2)


def test_an_episode_log_that_cannot_be_written_stops_the_miner_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    args = ["--local", "--local.allow", "x", "--agent.policy", "careful",
            "--neuron.episode_log", str(blocker / "episodes.jsonl")]  # fmt: skip
    cfg = miner_config(args, env={})
    assert cfg.agent is not None
    policy, card = make_agent(cfg.agent)
    with pytest.raises(NeuronError, match=r"--neuron.episode_log .*: cannot write"):
        Miner(cfg, "hk", policy, card)


def test_the_episode_log_keeps_a_bounded_number_of_episodes_open(tmp_path: Path) -> None:
    from shopbench.agents.registry import make_policy
    from template.base.episode_log import EpisodeLog
    from template.protocol import AgentCard
    from template.transport import CallerGate, create_miner_app

    path = tmp_path / "episodes.jsonl"
    episodes = EpisodeLog(path, idle_s=3600, max_open=2)
    hotkey = LocalWallet.derive("mt-bounded-log").hotkey_ss58
    app = create_miner_app(
        make_policy("careful", seed=1), AgentCard(model="reference/careful"), hotkey,
        CallerGate.allow({VALIDATOR.hotkey_ss58}), observer=episodes,
    )  # fmt: skip
    with BackgroundServer(app) as server:
        for n in range(5):  # a validator opening episode after episode, finishing none
            body = turn_body(f"ep-{n}", "a ceramic mug")
            reply = httpx.post(f"{server.url}/step", content=body,
                               headers=signed(VALIDATOR, body, hotkey))  # fmt: skip
            assert reply.status_code == 200, reply.text
            assert len(episodes.open) <= 2
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(x["episode_id"], x["ended"]) for x in lines] == [
        ("ep-0", "evicted"), ("ep-1", "evicted"), ("ep-2", "evicted")
    ]
    assert sorted(k[1] for k in episodes.open) == ["ep-3", "ep-4"]
