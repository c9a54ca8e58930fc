"""The shared OpenAI-compatible client, through a real local server speaking the API.

The server is :mod:`fake_openai` (FastAPI + uvicorn on a thread). The paraphraser and the
policy are driven through their own entry points; the waits between tries are recorded by
an injected sleep instead of slept. The keys are read from a given environment.
"""

from __future__ import annotations

import asyncio
import random
from email.utils import formatdate
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from support.fake_openai import FakeJudgeServer, RecordedSleeps, free_port  # noqa: E402

from shopbench.agents.registry import API_KEY_VARIABLES as POLICY_KEYS  # noqa: E402
from shopbench.agents.registry import make_policy  # noqa: E402
from shopbench.chat import ChatMessage  # noqa: E402
from shopbench.judging.llm.config import API_KEY_VARIABLES as JUDGE_KEYS  # noqa: E402
from shopbench.openai_compat.client import OpenAIClient  # noqa: E402
from shopbench.openai_compat.config import ClientConfig  # noqa: E402
from shopbench.openai_compat.errors import (  # noqa: E402
    EndpointError,
    EndpointTimeout,
    MalformedReply,
)
from shopbench.openai_compat.keys import api_key_from_env  # noqa: E402
from shopbench.openai_compat.retry import parse_retry_after  # noqa: E402
from shopbench.outcome.spec import Slot  # noqa: E402
from shopbench.tasks.model import Task  # noqa: E402
from shopbench.tasks.paraphrase import ParaphraseConfig, must_keep, paraphrase  # noqa: E402

MODEL = "tiny/model"


@pytest.fixture(autouse=True)
def fresh(server: FakeJudgeServer) -> None:
    server.reset(MODEL)
    server.retry_date_s = 4.0
    server.says[MODEL] = "A reply."  # the clients here are no judges


def config(**options: Any) -> ClientConfig:
    base: dict[str, Any] = {
        "request_timeout_s": 5.0, "connect_timeout_s": 5.0, "retries": 2, "backoff_s": 1.0,
        "max_backoff_s": 20.0, "jitter": 0.0, "max_response_bytes": 1 << 20,
        "max_connections": 4,
    }  # fmt: skip
    return ClientConfig(**{**base, **options})


def chat(client: OpenAIClient, url: str, **kw: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        try:
            return await client.chat(url, {"model": MODEL, "messages": []}, **kw)
        finally:
            await client.aclose()

    return asyncio.run(go())


def _task() -> Task:
    title = "Kalibo Trail Ripstop Backpack 30L"
    return Task(id="p", intent="product", query=f"Looking for a {title}.",
                reward=[Slot(product_id="1", title=[title])])  # fmt: skip


# -- the paraphraser ----------------------------------------------------------------------


def test_the_paraphraser_waits_what_the_server_asks_then_keeps_the_rewrite(
    server: FakeJudgeServer,
) -> None:
    task = _task()
    rewrite = "Hi! I'd like " + " and ".join(must_keep(task)) + ", please."
    server.says[MODEL] = rewrite
    server.plan(MODEL, "503_retry", "429_date")
    waits = RecordedSleeps()
    out, report = paraphrase(
        ParaphraseConfig(base_url=server.url, model=MODEL, backoff_s=0.5), [task], sleep=waits
    )
    assert report.rewritten == 1 and out[0].query == rewrite
    assert len(server.chats(MODEL)) == 3  # a 503, a 429, then the rewrite
    # The 503's Retry-After (2 s), then the seconds until the 429's HTTP date (4 s ahead,
    # at a whole second's resolution), never the paraphraser's own 0.5 s backoff.
    assert waits.waits[0] == 2.0 and 2.0 < waits.waits[1] <= 4.0


def test_a_paraphrase_that_stays_rate_limited_keeps_the_template_with_the_reason(
    server: FakeJudgeServer,
) -> None:
    server.plan(MODEL, "429", "429", "429")
    waits = RecordedSleeps()
    out, report = paraphrase(
        ParaphraseConfig(base_url=server.url, model=MODEL, retries=2, max_backoff_s=2.5),
        [_task()], sleep=waits,
    )  # fmt: skip
    assert out[0].query == _task().query
    assert report.kept == {"endpoint error (rate_limited)": 1}
    assert waits.waits == [2.5, 2.5]  # Retry-After: 3, capped at max_backoff_s


# -- the client ---------------------------------------------------------------------------


def test_backoff_doubles_with_jitter_taken_off_each_wait(server: FakeJudgeServer) -> None:
    server.plan(MODEL, "503", "503", "503")
    waits = RecordedSleeps()
    client = OpenAIClient(config(retries=3, jitter=0.5), sleep=waits, rng=random.Random(7))
    assert chat(client, server.url)["choices"]
    assert len(waits.waits) == 3
    for wait, full in zip(waits.waits, [1.0, 2.0, 4.0], strict=True):
        assert full / 2 <= wait <= full
    server.plan(MODEL, "503", "503", "503")
    again = RecordedSleeps()
    assert chat(OpenAIClient(config(retries=3, jitter=0.5), sleep=again,
                             rng=random.Random(7)), server.url)  # fmt: skip
    assert again.waits == waits.waits  # the jitter comes from the injected generator


@pytest.mark.parametrize(
    "plan, error, kind, requests",
    [
        (("context",), EndpointError, "too_long", 1),
        (("reject_format",), EndpointError, "rejected", 1),
        (("non_json", "non_json", "non_json"), MalformedReply, "bad_reply", 3),
        (("503", "503", "503"), EndpointError, "down", 3),
        (("slow", "slow", "slow"), EndpointTimeout, "timeout", 3),
    ],
)
def test_failures_are_typed_and_only_transient_ones_are_retried(
    server: FakeJudgeServer, plan: tuple[str, ...], error: type[Exception], kind: str,
    requests: int,
) -> None:
    server.slow_s = 1.0
    server.plan(MODEL, *plan)
    waits = RecordedSleeps()
    timeout = 0.2 if "slow" in plan else 5.0
    client = OpenAIClient(config(request_timeout_s=timeout), sleep=waits)

    def ask() -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            try:
                body = {"model": MODEL, "messages": [], "response_format": {"type": "json"}}
                return await client.chat(server.url, body)
            finally:
                await client.aclose()

        return asyncio.run(go())

    with pytest.raises(error) as e:
        ask()
    assert e.value.kind == kind  # type: ignore[attr-defined]
    assert len(server.chats(MODEL)) == requests and len(waits.waits) == requests - 1
    assert str(e.value).startswith(f"{server.url}/chat/completions: ")


def test_an_unreachable_server_is_unavailable_after_the_retries() -> None:
    waits = RecordedSleeps()
    client = OpenAIClient(config(retries=1, backoff_s=0.25), sleep=waits)
    with pytest.raises(EndpointError, match="ConnectError") as e:
        chat(client, f"http://127.0.0.1:{free_port()}/v1")
    assert e.value.kind == "down" and e.value.transient and waits.waits == [0.25]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("7", lambda: now) == 7.0
    assert parse_retry_after(formatdate(now + 12, usegmt=True), lambda: now) == 12.0
    assert parse_retry_after(formatdate(now - 60, usegmt=True), lambda: now) == 0.0
    assert parse_retry_after("soon", lambda: now) is None
    assert parse_retry_after("-3", lambda: now) is None
    assert parse_retry_after(None, lambda: now) is None


# -- keys ---------------------------------------------------------------------------------


def test_keys_are_read_in_each_components_order() -> None:
    env = {"OPENAI_API_KEY": "generic", "SHOPBENCH_OPENAI_API_KEY": "shopbench",
           "SHOPBENCH_JUDGE_API_KEY": "judge"}  # fmt: skip
    assert api_key_from_env(JUDGE_KEYS, env) == "judge"
    assert api_key_from_env(POLICY_KEYS, env) == "shopbench"
    assert api_key_from_env(JUDGE_KEYS, {**env, "SHOPBENCH_JUDGE_API_KEY": ""}) == "shopbench"
    assert api_key_from_env(POLICY_KEYS, {"OPENAI_API_KEY": "generic"}) == "generic"
    assert api_key_from_env(POLICY_KEYS, {}) is None


def test_the_policy_sends_the_key_its_order_picks(
    server: FakeJudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "generic")
    monkeypatch.setenv("SHOPBENCH_OPENAI_API_KEY", "shopbench")
    monkeypatch.setenv("SHOPBENCH_JUDGE_API_KEY", "judge")
    server.says[MODEL] = "Hello."
    p = make_policy(f"openai:{MODEL}@{server.url}")

    async def go() -> str | None:
        try:
            reply = await p.act([ChatMessage(role="user", content="hi")], [])  # type: ignore[attr-defined]
            return reply.content
        finally:
            await p.aclose()  # type: ignore[attr-defined]

    assert asyncio.run(go()) == "Hello."
    assert server.tokens == ["shopbench"]
