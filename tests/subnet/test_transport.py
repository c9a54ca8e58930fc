"""The miner app and the validator client over real loopback HTTP, signed with real hotkeys."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from bittensor import http_auth
from fastapi import FastAPI, Request, Response
from fastapi.responses import StreamingResponse

from shopbench.agents.reference import CarefulPolicy
from shopbench.chat import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import Slot
from shopbench.records.trajectory import Signature, Trajectory
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from template.errors import (
    BadStatus,
    ConnectionFailed,
    InvalidReply,
    InvalidRequest,
    OversizedReply,
    RequestTooLarge,
    TransportError,
    TransportTimeout,
)
from template.metagraph import MetagraphView, NeuronView
from template.protocol import AgentCard, StepRequest
from template.serve import BackgroundServer
from template.signing import HotkeySigner, HotkeyVerifier, LocalWallet
from template.transport import (
    CallerGate,
    ClientConfig,
    MinerAppConfig,
    MinerClient,
    MinerEndpoint,
    PriorityAdmission,
    RemotePolicy,
    StandingConfig,
    create_miner_app,
)

T = TypeVar("T")
CARD = AgentCard(model="test/scripted", revision="r1")
MINER = LocalWallet.derive("miner")
# name -> (stake, validator permit); registered in this order from uid 1
VALIDATORS = {
    "rich": (9000.0, True),
    "mid": (5000.0, True),
    "low": (2000.0, True),
    "lower": (1500.0, True),
    "poor": (10.0, True),
    "no-permit": (5000.0, False),
}
WALLETS = {name: LocalWallet.derive(f"validator-{name}") for name in VALIDATORS}
STRANGER = LocalWallet.derive("stranger")
TOOLS = [{"type": "function", "function": {"name": "find_product", "parameters": {}}}]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def metagraph() -> MetagraphView:
    neurons = [NeuronView(uid=0, hotkey=MINER.hotkey_ss58, stake=1.0)]
    for uid, (name, (stake, permit)) in enumerate(VALIDATORS.items(), start=1):
        neurons.append(
            NeuronView(
                uid=uid, hotkey=WALLETS[name].hotkey_ss58, stake=stake, validator_permit=permit
            )
        )
    return MetagraphView(netuid=7, block=100, neurons=neurons)


class ScriptedPolicy:
    """Acts on the last user message: a command for the test, else a search for it."""

    name = "scripted"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = threading.Event()
        self.in_flight = self.peak = 0

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        said = next(m.content or "" for m in reversed(messages) if m.role == "user")
        self.calls.append(said)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if said.startswith("sleep:"):
                await asyncio.sleep(float(said.removeprefix("sleep:")))
            elif said == "raise":
                raise RuntimeError("the model server is down")
            elif said == "meet":  # hold until two requests have been in the policy at once
                for _ in range(500):
                    if self.peak >= 2:
                        break
                    await asyncio.sleep(0.01)
            elif said.startswith("block"):
                while not self.release.is_set():
                    await asyncio.sleep(0.01)
            elif said == "oversized":
                return AssistantMessage.model_construct(content="€" * 6000)
            elif said == "not-a-message":
                return "I think the first one"  # type: ignore[return-value]
        finally:
            self.in_flight -= 1
        call = ToolCall(id="c1", function=FunctionCall(name="find_product", arguments="{}"))
        return AssistantMessage(reasoning_content=f"look for {said}", tool_calls=[call])


def step_body(said: str = "a mug", deadline_ms: int = 5000, turn: int = 1) -> bytes:
    req = StepRequest(
        episode_id="ep-1",
        turn=turn,
        deadline_ms=deadline_ms,
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": said}],
        tools=TOOLS,
    )
    return req.model_dump_json(exclude_none=True).encode()


@pytest.fixture(scope="module")
def policy() -> ScriptedPolicy:
    return ScriptedPolicy()


@pytest.fixture(scope="module")
def miner(policy: ScriptedPolicy) -> Iterator[tuple[str, FastAPI]]:
    gate = CallerGate(StandingConfig(min_stake=1000), metagraph())
    app = create_miner_app(policy, CARD, MINER.hotkey_ss58, gate)
    with BackgroundServer(app) as server:
        yield server.url, app


def endpoint(url: str) -> MinerEndpoint:
    return MinerEndpoint(uid=0, hotkey=MINER.hotkey_ss58, url=url)


def sign(
    body: bytes,
    signer: LocalWallet = WALLETS["mid"],
    receiver: str | None = MINER.hotkey_ss58,
    nonce_ns: int | None = None,
) -> dict[str, str]:
    """The btauth headers of a POST /step with `body`."""
    return http_auth.sign(
        signer.hotkey,
        method="POST",
        path="/step",
        body=body,
        receiver_ss58=receiver,
        nonce_ns=nonce_ns,
    )


def post(
    url: str,
    body: bytes,
    signer: LocalWallet | None = WALLETS["mid"],
    *,
    receiver: str | None = MINER.hotkey_ss58,
    nonce_ns: int | None = None,
) -> httpx.Response:
    headers = sign(body, signer, receiver, nonce_ns) if signer else {}
    return httpx.post(f"{url}/step", content=body, headers=headers)


def refused(reply: httpx.Response, status: int, reason: str) -> None:
    assert reply.status_code == status, reply.text
    assert reply.json()["error"] == reason, reply.text


# -- the miner app: what reaches the policy ------------------------------------------------


def test_a_signed_request_from_a_standing_validator_is_served(
    miner: tuple[str, FastAPI], policy: ScriptedPolicy
) -> None:
    url, _ = miner
    reply = post(url, step_body("red kettle"))
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["model"] == "test/scripted"
    assert body["message"]["reasoning_content"] == "look for red kettle"
    assert body["message"]["tool_calls"][0]["function"]["name"] == "find_product"
    assert policy.calls[-1] == "red kettle"


@pytest.mark.parametrize(
    ("tamper", "status", "reason"),
    [
        ("signature", 401, "BadSignature"),
        ("body", 401, "BadSignature"),
        ("receiver", 401, "WrongReceiver"),
        ("no_receiver", 401, "WrongReceiver"),
        ("stale", 401, "StaleRequest"),
        ("future", 401, "StaleRequest"),
        ("unsigned", 401, "MalformedAuth"),
        ("stranger", 403, "forbidden"),
        ("poor", 403, "forbidden"),
        ("no-permit", 403, "forbidden"),
    ],
)
def test_rejections_never_reach_the_policy(
    miner: tuple[str, FastAPI], policy: ScriptedPolicy, tamper: str, status: int, reason: str
) -> None:
    url, app = miner
    body = step_body("must not be seen")
    calls, rejected = len(policy.calls), app.state.rejections[reason]
    now = time.time_ns()
    if tamper == "signature":
        headers = sign(body)
        sig = headers["X-Bittensor-Signature"]
        headers["X-Bittensor-Signature"] = sig[:-1] + ("0" if sig[-1] != "0" else "1")
        reply = httpx.post(f"{url}/step", content=body, headers=headers)
    elif tamper == "body":
        headers = sign(step_body("signed"))
        reply = httpx.post(f"{url}/step", content=body, headers=headers)
    elif tamper == "receiver":
        reply = post(url, body, receiver=WALLETS["rich"].hotkey_ss58)
    elif tamper == "no_receiver":
        reply = post(url, body, receiver=None)
    elif tamper == "stale":
        reply = post(url, body, nonce_ns=now - 30 * 10**9)
    elif tamper == "future":
        reply = post(url, body, nonce_ns=now + 30 * 10**9)
    elif tamper == "unsigned":
        reply = post(url, body, signer=None)
    elif tamper == "stranger":
        reply = post(url, body, signer=STRANGER)
    else:
        reply = post(url, body, signer=WALLETS[tamper])
    refused(reply, status, reason)
    assert len(policy.calls) == calls
    assert app.state.rejections[reason] == rejected + 1
    if tamper == "poor":
        assert "stakes 10; this miner requires 1000" in reply.json()["detail"]
    if tamper == "no-permit":
        assert "no validator permit" in reply.json()["detail"]


def test_a_replayed_nonce_is_refused(miner: tuple[str, FastAPI], policy: ScriptedPolicy) -> None:
    url, _ = miner
    body = step_body("replay me")
    headers = sign(body)
    assert httpx.post(f"{url}/step", content=body, headers=headers).status_code == 200
    calls = len(policy.calls)
    refused(httpx.post(f"{url}/step", content=body, headers=headers), 401, "ReplayedRequest")
    assert len(policy.calls) == calls


@pytest.mark.parametrize("chunked", [False, True])
def test_an_oversized_body_is_413_before_anything_else(
    miner: tuple[str, FastAPI], policy: ScriptedPolicy, chunked: bool
) -> None:
    url, _ = miner
    calls = len(policy.calls)
    big = b"x" * (1024 * 1024 + 1)
    if chunked:  # no Content-Length: the cap is applied while streaming
        content: Any = (big[i : i + 65536] for i in range(0, len(big), 65536))
    else:
        content = big
    # Unsigned on purpose: the size check comes before the signature check.
    reply = httpx.post(f"{url}/step", content=content)
    refused(reply, 413, "too_large")
    assert len(policy.calls) == calls


def test_a_signed_but_malformed_request_is_422(
    miner: tuple[str, FastAPI], policy: ScriptedPolicy
) -> None:
    url, _ = miner
    calls = len(policy.calls)
    refused(post(url, b'{"episode_id": "ep"}'), 422, "invalid_request")
    bad_turn = json.loads(step_body())
    bad_turn["turn"] = 31
    reply = post(url, json.dumps(bad_turn).encode())
    refused(reply, 422, "invalid_request")
    assert "turn" in reply.json()["detail"]
    assert len(policy.calls) == calls


@pytest.mark.parametrize(
    ("said", "deadline_ms", "status", "reason"),
    [
        ("sleep:5", 300, 504, "deadline"),
        ("raise", 5000, 500, "policy_failed"),
        ("oversized", 5000, 500, "invalid_message"),
        ("not-a-message", 5000, 500, "invalid_message"),
    ],
)
def test_policy_failures_cost_one_reply_not_the_server(
    miner: tuple[str, FastAPI], said: str, deadline_ms: int, status: int, reason: str
) -> None:
    url, _ = miner
    refused(post(url, step_body(said, deadline_ms)), status, reason)
    assert post(url, step_body("still up")).status_code == 200


def test_card_is_signed_and_health_is_open(miner: tuple[str, FastAPI]) -> None:
    url, _ = miner
    assert httpx.get(f"{url}/health").json()["hotkey"] == MINER.hotkey_ss58
    refused(httpx.get(f"{url}/card"), 401, "MalformedAuth")
    card = run(_card(url))
    assert card == CARD


async def _card(url: str) -> AgentCard:
    async with MinerClient(WALLETS["mid"].hotkey) as client:
        return await client.card(endpoint(url))


# -- the validator client ------------------------------------------------------------------


def test_remote_policy_numbers_turns_and_records_the_model(miner: tuple[str, FastAPI]) -> None:
    url, _ = miner

    async def play() -> tuple[list[AssistantMessage], RemotePolicy]:
        async with MinerClient(WALLETS["rich"].hotkey) as client:
            remote = RemotePolicy(client, endpoint(url), "ep-remote", deadline_s=5)
            history = [
                ChatMessage(role="system", content="rules"),
                ChatMessage(role="user", content="blue towel"),
            ]
            first = await remote.act(history, TOOLS)
            history.append(ChatMessage(role="assistant", tool_calls=first.tool_calls))
            history.append(ChatMessage(role="tool", tool_call_id="c1", content="[]"))
            second = await remote.act(history, TOOLS)
            return [first, second], remote

    (first, second), remote = run(play())
    assert first.reasoning_content == second.reasoning_content == "look for blue towel"
    assert [t.turn for t in remote.turns] == [1, 2]
    assert {t.model for t in remote.turns} == {"test/scripted"}
    assert remote.name == "miner-0"


def test_the_client_reports_refusals_with_their_status(miner: tuple[str, FastAPI]) -> None:
    url, _ = miner
    req = StepRequest.model_validate_json(step_body())

    async def step(signer: LocalWallet, receiver: str) -> Any:
        async with MinerClient(signer.hotkey) as client:
            ep = MinerEndpoint(uid=0, hotkey=receiver, url=url)
            return await asyncio.gather(client.step(ep, req), return_exceptions=True)

    (stranger,) = run(step(STRANGER, MINER.hotkey_ss58))
    assert isinstance(stranger, BadStatus) and stranger.status_code == 403
    (misaddressed,) = run(step(WALLETS["mid"], WALLETS["rich"].hotkey_ss58))
    assert isinstance(misaddressed, BadStatus) and misaddressed.status_code == 401
    assert "WrongReceiver" in str(misaddressed)


def test_the_client_never_sends_a_request_over_1_mib(miner: tuple[str, FastAPI]) -> None:
    url, app = miner
    big = {"role": "tool", "tool_call_id": "c", "content": "x" * 200_000}
    messages = [{"role": "user", "content": "q"}] + [big] * 6
    req = StepRequest(episode_id="ep", turn=1, deadline_ms=5000, messages=messages)
    served = app.state.served
    with pytest.raises(RequestTooLarge, match="the limit is 1048576"):
        run(_step(url, req))
    assert app.state.served == served


async def _step(url: str, req: StepRequest) -> Any:
    async with MinerClient(WALLETS["mid"].hotkey) as client:
        return await client.step(endpoint(url), req)


def test_remote_policy_refuses_to_send_a_request_over_the_limits(
    miner: tuple[str, FastAPI],
) -> None:
    url, _ = miner

    async def act() -> None:
        async with MinerClient(WALLETS["rich"].hotkey) as client:
            remote = RemotePolicy(client, endpoint(url), "ep-x")
            history = [ChatMessage(role="user", content="q")]
            history += [ChatMessage(role="assistant", content="again")] * 30
            await remote.act(history, TOOLS)  # this would be turn 31

    with pytest.raises(InvalidRequest, match="turn"):
        run(act())


def test_the_client_bounds_its_concurrency(policy: ScriptedPolicy) -> None:
    gate = CallerGate(StandingConfig(min_stake=0), metagraph())
    app = create_miner_app(policy, CARD, MINER.hotkey_ss58, gate, MinerAppConfig(max_active=8))
    req = StepRequest.model_validate_json(step_body("meet"))

    async def burst(url: str) -> None:
        config = ClientConfig(max_concurrency=2)
        async with MinerClient(WALLETS["mid"].hotkey, config) as client:
            await asyncio.gather(*(client.step(endpoint(url), req) for _ in range(6)))

    policy.peak = 0
    with BackgroundServer(app) as server:
        run(burst(server.url))
    assert policy.peak == 2


def test_stake_decides_who_is_served_under_load() -> None:
    policy = ScriptedPolicy()
    gate = CallerGate(StandingConfig(min_stake=1000), metagraph())
    config = MinerAppConfig(max_active=1, max_waiting=1)
    app = create_miner_app(policy, CARD, MINER.hotkey_ss58, gate, config)
    admission = app.state.admission

    async def until(condition: Any) -> None:
        for _ in range(500):
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the server never reached the expected state")

    async def scenario(url: str) -> dict[str, Any]:
        clients = {n: MinerClient(WALLETS[n].hotkey) for n in ("mid", "low", "rich", "lower")}

        def send(name: str) -> asyncio.Task[Any]:
            req = StepRequest.model_validate_json(step_body(f"block-{name}", 20_000))
            return asyncio.create_task(clients[name].step(endpoint(url), req))

        a = send("mid")  # takes the one slot and blocks
        await until(lambda: admission.active == 1 and policy.calls)
        b = send("low")  # queues
        await until(lambda: admission.waiting == 1)
        c = send("rich")  # evicts the lower-staked waiter
        results: dict[str, Any] = {}
        results["low"] = await asyncio.gather(b, return_exceptions=True)
        await until(lambda: admission.waiting == 1)
        d = send("lower")  # the queue is full of higher stake: refused at once
        results["lower"] = await asyncio.gather(d, return_exceptions=True)
        policy.release.set()
        results["mid"], results["rich"] = await asyncio.gather(a, c)
        for client in clients.values():
            await client.aclose()
        return results

    with BackgroundServer(app) as server:
        results = run(scenario(server.url))
    for loser in ("low", "lower"):
        (error,) = results[loser]
        assert isinstance(error, BadStatus) and error.status_code == 503
    assert "evicted" in str(results["low"][0]) and "queue" in str(results["lower"][0])
    assert policy.calls == ["block-mid", "block-rich"]
    assert app.state.rejections["overloaded"] == 2


# -- the validator client against miners that misbehave -------------------------------------


def bad_miner_app() -> FastAPI:
    app = FastAPI()
    fine = {"message": {"role": "assistant", "content": "ok"}}

    @app.post("/{mode}/step")
    async def step(mode: str, request: Request) -> Response:
        if mode == "slow":  # answers only after 5 s, unless the client gives up first
            for _ in range(100):
                if await request.is_disconnected():
                    return Response(status_code=499)
                await asyncio.sleep(0.05)
        if mode == "garbage":
            return Response(b"<html>not json</html>", media_type="text/html")
        if mode == "huge":
            return Response(
                json.dumps({**fine, "pad": "x" * 300_000}), media_type="application/json"
            )
        if mode == "huge-stream":
            chunks = (b" " * 65536 for _ in range(8))
            return StreamingResponse(chunks, media_type="application/json")
        if mode == "invalid":
            calls = [{"function": {"name": "terminate"}}] * 6
            return Response(json.dumps({"message": {"tool_calls": calls}}))
        if mode == "busy":
            return Response(b'{"error":"overloaded","detail":"busy"}', status_code=503)
        port = request.client.port if request.client else 0
        body = {"message": {"role": "assistant", "content": str(port)}}
        return Response(json.dumps(body), media_type="application/json")

    return app


@pytest.fixture(scope="module")
def bad_miner() -> Iterator[str]:
    with BackgroundServer(bad_miner_app()) as server:
        yield server.url


def resetting_server() -> tuple[str, threading.Thread]:
    """A TCP server that answers every connection with a reset."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()

    def serve() -> None:
        conn, _ = sock.accept()
        conn.recv(65536)
        # Linger on with a zero timeout: close() sends a reset instead of a FIN.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
        sock.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", thread


def closed_port() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


async def step_to(url: str, deadline_s: float = 5.0) -> Any:
    req = StepRequest.model_validate_json(step_body())
    async with MinerClient(WALLETS["mid"].hotkey) as client:
        return await client.step(endpoint(url), req, deadline_s=deadline_s)


@pytest.mark.parametrize(
    ("mode", "error", "words"),
    [
        ("slow", TransportTimeout, "no reply within 0.3 s"),
        ("garbage", InvalidReply, "not JSON"),
        ("huge", OversizedReply, "cap"),
        ("huge-stream", OversizedReply, "cap"),
        ("invalid", InvalidReply, "message.tool_calls"),
        ("busy", BadStatus, "HTTP 503: overloaded: busy"),
    ],
)
def test_every_bad_reply_is_a_typed_error(
    bad_miner: str, mode: str, error: type[TransportError], words: str
) -> None:
    with pytest.raises(error) as info:
        run(step_to(f"{bad_miner}/{mode}", deadline_s=0.3 if mode == "slow" else 5.0))
    assert words in str(info.value)
    assert isinstance(info.value, TransportError) and info.value.endpoint.startswith("uid 0")


def test_a_reset_or_refused_connection_is_connection_failed() -> None:
    url, _ = resetting_server()
    with pytest.raises(ConnectionFailed):
        run(step_to(url))
    with pytest.raises(ConnectionFailed):
        run(step_to(closed_port()))


def test_the_client_keeps_one_connection_alive_across_turns(bad_miner: str) -> None:
    async def ports() -> set[str]:
        req = StepRequest.model_validate_json(step_body())
        async with MinerClient(WALLETS["mid"].hotkey) as client:
            replies = [await client.step(endpoint(f"{bad_miner}/echo"), req) for _ in range(5)]
        return {r.message.content or "" for r in replies}

    assert len(run(ports())) == 1


# -- whole episodes through the one episode loop ---------------------------------------------


def product_task(catalog: Any) -> Task:
    target = next(iter(catalog.iter_products(batch_size=50)))[2]
    query = f"I am looking for {target.title}, at most {int(target.price) + 100} pesos"
    return Task(id="t-remote", intent="product", query=query, reward=[Slot(title=[target.title])])


@pytest.fixture(scope="module")
def reference_miner() -> Iterator[str]:
    gate = CallerGate.allow({WALLETS["mid"].hotkey_ss58})
    app = create_miner_app(CarefulPolicy(seed=3), CARD, MINER.hotkey_ss58, gate)
    with BackgroundServer(app) as server:
        yield server.url


def test_a_remote_episode_is_the_local_episode_and_its_record_is_signed(
    catalog: Any, reference_miner: str
) -> None:
    env, task, key = ShoppingEnv(catalog), product_task(catalog), b"e" * 32
    local = run(run_episode(env, task, CarefulPolicy(seed=3), key=key))

    async def play() -> tuple[Trajectory, RemotePolicy]:
        async with MinerClient(WALLETS["mid"].hotkey) as client:
            remote = RemotePolicy(client, endpoint(reference_miner), "ep-remote-1")
            played = await run_episode(
                env,
                task,
                remote,
                key=key,
                validator_hotkey=WALLETS["mid"].hotkey_ss58,
                miner_uid=0,
                miner_hotkey=MINER.hotkey_ss58,
            )
            return played, remote

    played, remote = run(play())
    assert played.termination == "terminated" and played.failures == []
    assert played.turns >= 3 and played.tool_calls >= 3
    assert played.messages == local.messages
    assert played.recommended_ids == local.recommended_ids and played.outcome == local.outcome
    assert played.agent == "miner-0"
    assert [t.turn for t in remote.turns] == list(range(1, played.turns + 1))

    signer, verifier = HotkeySigner.from_wallet(WALLETS["mid"]), HotkeyVerifier()
    signature = Signature(signer=signer.hotkey, signature=signer.sign(played.signing_payload()))
    signed = played.model_copy(update={"signature": signature})
    assert verifier.verify(signed.signing_payload(), signature.signature, signature.signer)
    altered = signed.model_copy(update={"recommended_ids": ["0000000000"]})
    assert not verifier.verify(altered.signing_payload(), signature.signature, signature.signer)


@pytest.mark.parametrize(("where", "error"), [("down", "ConnectionFailed"), ("slow", "Timeout")])
def test_a_failing_miner_is_a_recorded_turn_failure_not_a_crash(
    catalog: Any, bad_miner: str, where: str, error: str
) -> None:
    url = closed_port() if where == "down" else f"{bad_miner}/slow"

    async def play() -> Trajectory:
        async with MinerClient(WALLETS["mid"].hotkey) as client:
            remote = RemotePolicy(client, endpoint(url), "ep-failing", deadline_s=0.3)
            return await run_episode(ShoppingEnv(catalog), product_task(catalog), remote)

    played = run(play())
    assert played.termination == "policy_error"
    (failure,) = played.failures
    assert failure.kind == "policy_error" and error in failure.detail
    assert played.outcome.success is False and played.recommended == []


def test_a_queued_request_that_gives_up_frees_its_place() -> None:
    async def scenario() -> tuple[int, int, int]:
        admission = PriorityAdmission(max_active=1, max_waiting=1)

        async def wait_for_slot() -> None:
            async with admission.slot(5.0):
                pass

        async with admission.slot(1.0):
            waiter = asyncio.create_task(wait_for_slot())
            await asyncio.sleep(0.01)
            queued = admission.waiting
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
            after_cancel = admission.waiting
        async with admission.slot(0.0):  # the slot is free again, for anyone
            held = admission.active
        return queued, after_cancel, held + admission.active

    assert run(scenario()) == (1, 0, 1)
