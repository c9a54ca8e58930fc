"""The OpenAI-compatible policy against a real HTTP server speaking the chat API with tools.

The server (FastAPI + uvicorn, in-process) plays a small agent whose replies take each form
a vLLM/Qwen3 server produces — reasoning in ``reasoning_content``, reasoning inside
``<think>`` in the content, hermes ``<tool_call>`` text — and, per model name, misbehaves:
malformed bodies, no choices, a transient 503, a rate limit with ``Retry-After`` (seconds or
an HTTP date), a slow reply, a 400, broken arguments.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any

import pytest
from pydantic import ValidationError

from shopbench.agents.errors import PolicySpecError
from shopbench.agents.format.parse import parse_completion, parse_generation
from shopbench.agents.format.views import BRIEF_SYSTEM, ObservationView, apply_view, view_tools
from shopbench.agents.openai_policy import OpenAIPolicy, OpenAIPolicyConfig
from shopbench.agents.registry import check_spec, make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.openai_compat.errors import EndpointError, EndpointTimeout, MalformedReply
from shopbench.outcome.spec import Slot
from shopbench.records.trajectory import TerminationReason, Trajectory
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import RunLimits, run_episode

fastapi = pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

KEY = b"o" * 32


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message},
                     "finish_reason": "tool_calls"}],
    }


def _agent_turn(body: dict[str, Any]) -> dict[str, Any]:
    """A tiny shopping agent: search the request, recommend the first hit, terminate."""
    messages = body["messages"]
    tool_results = [m for m in messages if m["role"] == "tool"]
    if not tool_results:
        query = next(m["content"] for m in messages if m["role"] == "user")
        return {
            "content": None,
            "reasoning_content": "The customer wants a product; I will search for it.",
            "tool_calls": [{
                "id": "call_a",
                "type": "function",
                "function": {"name": "find_product",
                             "arguments": json.dumps({"q": query[:60], "page": 1})},
            }],
        }
    if len(tool_results) == 1:
        hits = json.loads(tool_results[0]["content"])
        first = hits[0]
        return {
            "content": f"<think>\nThe first hit, {first['title']}, costs {first['price']}."
            f"\n</think>\n\nRecommending it.",
            "tool_calls": [{
                "id": "call_b",
                "type": "function",
                # Arguments as an object, as some servers send them.
                "function": {"name": "recommend_product",
                             "arguments": {"product_ids": first["product_id"]}},
            }],
        }
    return {
        "content": "<think>Done now.</think>All set. <tool_call>\n"
        '{"name": "terminate", "arguments": {"status": "success"}}\n</tool_call>',
    }


class Server:
    """The fake endpoint: request bodies are kept per model name."""

    def __init__(self) -> None:
        self.requests: dict[str, list[dict[str, Any]]] = {}
        app = fastapi.FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: fastapi.Request) -> Any:
            body = await request.json()
            model = body.get("model", "")
            seen = self.requests.setdefault(model, [])
            seen.append(body)
            Response = fastapi.responses.Response
            if model == "malformed":
                return Response("not json{", media_type="application/json")
            if model == "nochoices":
                return {"object": "chat.completion", "choices": []}
            if model.startswith("flaky") and len(seen) == 1:
                return Response('{"error": "overloaded"}', status_code=503)
            if model == "ratelimited" and len(seen) == 1:
                return Response('{"error": "rate limited"}', status_code=429,
                                headers={"Retry-After": "2"})
            if model == "ratelimited-date" and len(seen) == 1:
                # Retry-After as an HTTP date, half a minute ahead.
                when = formatdate(time.time() + 30, usegmt=True)
                return Response('{"error": "overloaded"}', status_code=503,
                                headers={"Retry-After": when})
            if model == "slow":
                await asyncio.sleep(1.5)
            if model == "badrequest":
                return Response('{"error": "context too long"}', status_code=400)
            if model == "badargs":
                return _completion({"content": None, "tool_calls": [{
                    "id": "x", "type": "function",
                    "function": {"name": "find_product", "arguments": '{"q": "bag", "page": '},
                }]})
            return _completion(_agent_turn(body))

        self.app = app


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Server, str]]:
    fake = Server()
    sock = _free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        fake.app, log_level="error", lifespan="off", timeout_graceful_shutdown=1
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.started, "the fake endpoint did not start"
    yield fake, f"http://127.0.0.1:{port}/v1"
    srv.should_exit = True
    thread.join(timeout=5)
    sock.close()


@pytest.fixture(scope="module")
def env(catalog: Any) -> ShoppingEnv:
    return ShoppingEnv(catalog)


@pytest.fixture(scope="module")
def task(catalog: Any) -> Task:
    p = next(iter(catalog.iter_products(batch_size=50)))[0]
    return Task(id="t-http", intent="product", query=p.title,
                reward=[Slot(product_id=p.product_id, title=[p.title])])


class Waits:
    """An injected sleep that records the waits instead of sleeping."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def policy(url: str, model: str, sleep: Waits | None = None, **options: Any) -> OpenAIPolicy:
    cfg = {"retries": 2, "backoff_s": 0.01, "request_timeout_s": 5.0, **options}
    return OpenAIPolicy(OpenAIPolicyConfig(model=model, base_url=url, **cfg), sleep=sleep)


def play(env: ShoppingEnv, task: Task, p: OpenAIPolicy, **limits: Any) -> Trajectory:
    async def go() -> Trajectory:
        try:
            return await run_episode(env, task, p, RunLimits(**limits), key=KEY)
        finally:
            await p.aclose()

    return asyncio.run(go())


def test_an_episode_through_the_endpoint_keeps_reasoning_and_reads_every_call_form(
    server: tuple[Server, str], env: ShoppingEnv, task: Task
) -> None:
    fake, url = server
    t = play(env, task, policy(url, "agent"))
    assert t.termination is TerminationReason.terminated and t.status == "success"
    assert t.agent == "openai:agent"
    turns = [m for m in t.messages if m.role == "assistant"]
    assert turns[0].reasoning_content == "The customer wants a product; I will search for it."
    assert turns[1].reasoning_content and turns[1].reasoning_content.startswith("The first hit,")
    assert turns[1].content == "Recommending it."
    assert json.loads(turns[1].tool_calls[0].function.arguments)["product_ids"]  # type: ignore[index]
    assert turns[2].reasoning_content == "Done now." and turns[2].content == "All set."
    assert [e.name for e in t.tool_log] == ["find_product", "recommend_product", "terminate"]
    assert t.recommended and t.success  # the first hit of the product's own title

    bodies = fake.requests["agent"]
    assert len(bodies) == 3
    last = bodies[-1]
    assert last["tool_choice"] == "auto" and {x["function"]["name"] for x in last["tools"]} == {
        "find_product", "view_product_information", "recommend_product", "terminate",
    }
    sent = last["messages"]
    assert [m["role"] for m in sent] == [
        "system", "user", "assistant", "tool", "assistant", "tool",
    ]
    # Earlier reasoning goes back folded into <think>, as Qwen3's chat template reads it.
    assert sent[2]["content"].startswith("<think>\nThe customer wants a product")
    assert "reasoning_content" not in sent[2]
    assert sent[3]["tool_call_id"] == turns[0].tool_calls[0].id  # type: ignore[index]
    assert last["temperature"] == 0.6 and last["model"] == "agent"


def test_reasoning_can_go_back_as_a_field(
    server: tuple[Server, str], env: ShoppingEnv, task: Task
) -> None:
    fake, url = server
    play(env, task, policy(url, "agent-field", reasoning_history="field"))
    sent = fake.requests["agent-field"][-1]["messages"]
    assert sent[2]["reasoning_content"].startswith("The customer wants")
    assert sent[2]["content"] is None


def test_the_endpoint_reads_the_conversation_in_the_policys_view(
    server: tuple[Server, str], env: ShoppingEnv, task: Task
) -> None:
    fake, url = server
    t = play(env, task, policy(url, "agent-compact", view="compact/h1/brief"))
    view = ObservationView.from_id("compact/h1/brief")
    bodies = fake.requests["agent-compact"]
    assert len(bodies) >= 2  # the scripted agent reads full results: it stops after its search
    second = bodies[1]
    assert second["tools"] == view_tools(t.tools, view)
    sent = second["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[0]["content"].startswith(BRIEF_SYSTEM)
    found = t.messages[3]
    assert sent[3]["content"] == apply_view(t.messages[:4], view)[3].content
    assert sent[3]["content"] != found.content and found.content
    assert sent[3]["content"].count("\n") == found.content.count('"product_id"') - 1
    with pytest.raises(ValidationError):
        OpenAIPolicyConfig(model="m", base_url=url, view="tiny")


@pytest.mark.parametrize(
    "model, error, says, attempts",
    [
        ("malformed", MalformedReply, "not JSON", 3),
        ("nochoices", MalformedReply, "no choices[0].message", 1),
        ("badrequest", EndpointError, "HTTP 400", 1),
    ],
)
def test_bad_replies_end_the_episode_with_the_reason(
    server: tuple[Server, str], env: ShoppingEnv, task: Task,
    model: str, error: type[Exception], says: str, attempts: int,
) -> None:
    fake, url = server
    t = play(env, task, policy(url, model))
    assert t.termination is TerminationReason.policy_error
    assert error.__name__ in (t.termination_detail or "") and says in (t.termination_detail or "")
    assert len(fake.requests[model]) == attempts  # transient failures retried, others not


def test_a_transient_failure_is_retried(
    server: tuple[Server, str], env: ShoppingEnv, task: Task
) -> None:
    fake, url = server
    t = play(env, task, policy(url, "flaky"))
    assert t.termination is TerminationReason.terminated
    assert len(fake.requests["flaky"]) == 4  # one 503, then three good turns


def test_a_rate_limited_turn_waits_the_servers_retry_after(
    server: tuple[Server, str], env: ShoppingEnv, task: Task
) -> None:
    fake, url = server
    waits = Waits()
    t = play(env, task, policy(url, "ratelimited", waits, backoff_s=0.5))
    assert t.termination is TerminationReason.terminated
    assert len(fake.requests["ratelimited"]) == 4  # one 429, then three good turns
    assert waits.seconds == [2.0]  # the server's Retry-After, not the 0.5 s backoff
    # An HTTP date asks for the seconds until then, capped at max_backoff_s.
    capped = Waits()
    t = play(env, task, policy(url, "ratelimited-date", capped, max_backoff_s=7.0))
    assert t.termination is TerminationReason.terminated
    assert capped.seconds == [7.0]


def test_without_retry_after_the_backoff_is_jittered_below_its_doubling(
    server: tuple[Server, str], env: ShoppingEnv, task: Task
) -> None:
    fake, url = server
    waits = Waits()
    t = play(env, task, policy(url, "flaky-jitter", waits, backoff_s=0.4, jitter=0.5))
    assert t.termination is TerminationReason.terminated
    assert len(fake.requests["flaky-jitter"]) == 4  # one 503, then three good turns
    assert len(waits.seconds) == 1 and 0.2 <= waits.seconds[0] <= 0.4


def test_a_slow_endpoint_times_out(
    server: tuple[Server, str], env: ShoppingEnv, task: Task
) -> None:
    _, url = server
    t = play(env, task, policy(url, "slow", request_timeout_s=0.2, retries=0))
    assert t.termination is TerminationReason.policy_timeout
    assert "no reply within 0.2 s" in (t.termination_detail or "")
    # The loop's own turn timeout bounds a policy that retries for too long.
    t = play(env, task, policy(url, "slow", retries=5), turn_timeout_s=0.3)
    assert t.termination is TerminationReason.policy_timeout
    assert "no reply within 0.3 s" in (t.termination_detail or "")


def test_an_endpoint_that_refuses_ends_the_episode(env: ShoppingEnv, task: Task) -> None:
    sock = _free_socket()
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    t = play(env, task, policy(f"http://127.0.0.1:{port}/v1", "m", retries=1))
    assert t.termination is TerminationReason.policy_error
    assert "EndpointError" in (t.termination_detail or "")
    assert "ConnectError" in (t.termination_detail or "")


def test_broken_arguments_from_the_model_reach_the_agent_as_an_error(
    server: tuple[Server, str], catalog: Any, task: Task
) -> None:
    from shopbench.chat import EpisodeLimits

    _, url = server
    env2 = ShoppingEnv(catalog, EpisodeLimits(max_turns=2))
    t = play(env2, task, policy(url, "badargs"))
    assert t.termination is TerminationReason.turn_limit
    assert [e.error for e in t.tool_log] == ["bad_argument", "bad_argument"]
    assert t.messages[3].content and "not valid JSON" in t.messages[3].content


def test_parse_completion_reads_what_servers_send_and_rejects_garbage() -> None:
    msg = parse_completion(_completion({
        "content": [{"type": "text", "text": "Hello"}],
        "reasoning": "vLLM's newer field name",
        "tool_calls": [{"id": "1", "function": {"name": "terminate", "arguments": None}}],
    }))
    assert msg.content == "Hello" and msg.reasoning_content == "vLLM's newer field name"
    assert msg.tool_calls and msg.tool_calls[0].function.arguments == "{}"
    with pytest.raises(MalformedReply, match="no function object"):
        parse_completion(_completion({"tool_calls": [{"id": "1"}]}))
    with pytest.raises(MalformedReply, match="tool_calls is not a list"):
        parse_completion(_completion({"tool_calls": "terminate"}))
    with pytest.raises(MalformedReply, match="no choices"):
        parse_completion([1, 2])
    # Over the size limits: handed on unvalidated, for the loop to report.
    big = parse_completion(_completion({"content": "y" * 20_000}))
    assert big.content is not None and len(big.content) == 20_000
    assert issubclass(EndpointTimeout, TimeoutError)


def test_a_reply_the_server_parsed_nothing_of_reads_as_the_local_generation() -> None:
    # A server with no reasoning or tool parser (transformers serve for a Llama model)
    # hands back the model's text: cut by the token limit, it reads as hf: reads it.
    cut_thinking = parse_completion(_completion({"content": "<think>\nI should search"}))
    assert cut_thinking.reasoning_content == "I should search"
    assert cut_thinking.content is None and cut_thinking.tool_calls is None
    whole = parse_completion(_completion({
        "content": '<think>\nSearch.\n</think>\n\n<tool_call>\n{"name": "find_product", '
        '"arguments": {"q": "jeans", "page": 1}}',
    }))  # fmt: skip
    assert whole.reasoning_content == "Search." and whole.content is None
    assert whole.tool_calls and whole.tool_calls[0].function.name == "find_product"
    assert json.loads(whole.tool_calls[0].function.arguments) == {"q": "jeans", "page": 1}
    broken = parse_completion(_completion({"content": '<tool_call>\n{"name": "find_pro'}))
    assert broken.tool_calls and broken.tool_calls[0].function.name == ""
    # vLLM's reasoning parser keeps the newlines around the thought; <think> text loses them.
    spaced = parse_completion(_completion({"reasoning_content": "\nStop.\n", "content": ""}))
    assert spaced.reasoning_content == "Stop."
    assert spaced == parse_generation("<think>\nStop.\n</think>")
    for text in (
        "<think>\nI should search", '<tool_call>\n{"name": "find_pro', "Plain words.",
        '<think>a</think>b<tool_call>{"name": "terminate", "arguments": {"status": "x"}}',
    ):
        assert parse_completion(_completion({"content": text})) == parse_generation(text)


def test_specs_resolve_to_endpoints_and_bad_ones_are_named() -> None:
    p = make_policy("openai:Qwen/Qwen3-4B@http://localhost:8000/v1", temperature=0.0)
    assert isinstance(p, OpenAIPolicy)
    assert p.config.model == "Qwen/Qwen3-4B" and p.config.temperature == 0.0
    assert p.config.chat_url == "http://localhost:8000/v1/chat/completions"
    bare = OpenAIPolicyConfig(model="m", base_url="http://h:1")
    assert bare.chat_url == "http://h:1/v1/chat/completions"
    with pytest.raises(PolicySpecError, match="expected openai:MODEL@URL"):
        check_spec("openai:no-url")
    with pytest.raises(PolicySpecError, match="not an http"):
        check_spec("openai:m@ftp://x")
    with pytest.raises(PolicySpecError, match="unknown policy 'clever'; allowed: careful"):
        make_policy("clever")
    with pytest.raises(PolicySpecError, match="needs the catalog"):
        make_policy("offline")
