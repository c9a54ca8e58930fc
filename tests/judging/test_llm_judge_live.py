"""Opt-in: the LLM judge against a live OpenAI-compatible server (vLLM, on GPU or CPU).

Skipped unless ``SHOPBENCH_OPENAI_URL`` is set to the server's API root, e.g.
``http://127.0.0.1:8000/v1``. ``SHOPBENCH_OPENAI_MODEL`` names the model (default: the
first one the server lists); ``SHOPBENCH_JUDGE_BYTES_PER_TOKEN`` sets the prompt-size
estimate (default 1.5, safe for small tokenizers that spell digits one by one). The prompt
budget is taken from the server's ``max_model_len``. Run with ``-s`` to see the answers.

What it checks is the path, not the model's judgement (a tiny random model answers
garbage): the server accepts a JSON-schema ``response_format``; a whole judgement either
comes back as a verdict or falls back cleanly to the rubric with its reason; and the
identity check through ``/v1/models`` accepts the served model and refuses another.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx
import pytest
from support.judge_agents import Careful, make_tasks, play

from shopbench.env.env import ShoppingEnv
from shopbench.judging.errors import JudgeUnavailable
from shopbench.judging.llm.config import Endpoint, LLMJudgeConfig
from shopbench.judging.llm.fallback import is_fallback
from shopbench.judging.llm.judge import LLMJudge
from shopbench.judging.llm.release import JudgeRelease
from shopbench.judging.llm.reply import read_completion, read_reply, response_format
from shopbench.judging.rubric.judge import RubricJudge, load_rubric

URL = os.environ.get("SHOPBENCH_OPENAI_URL", "")
pytestmark = pytest.mark.skipif(
    not URL, reason="set SHOPBENCH_OPENAI_URL to an OpenAI-compatible server to run"
)
RUBRIC = load_rubric()
NAMES = [c.name for c in RUBRIC.criteria]
REPLY_TOKENS = 512


@pytest.fixture(scope="module")
def served() -> dict[str, Any]:
    root = Endpoint(base_url=URL, model="any").root
    body = httpx.get(root + "/models", timeout=30).json()
    print("\n/v1/models:", json.dumps(body)[:600])
    wanted = os.environ.get("SHOPBENCH_OPENAI_MODEL")
    entry = next((m for m in body["data"] if m["id"] == wanted), None) if wanted else None
    return entry or body["data"][0]


def _judge(model: str, max_model_len: int | None, **options: Any) -> LLMJudge:
    context = max_model_len or 8192
    release = JudgeRelease(
        model=model, revision="", max_reply_tokens=REPLY_TOKENS,
        prompt_budget_tokens=max(1024, context - REPLY_TOKENS - 256),
        bytes_per_token=float(os.environ.get("SHOPBENCH_JUDGE_BYTES_PER_TOKEN", "1.5")),
    )
    config = LLMJudgeConfig(
        endpoints=[Endpoint(base_url=URL, model=model)], release=release, override=True,
        retries=1, request_timeout_s=300, deadline_s=600, **options,
    )
    return LLMJudge(config, rubric=RUBRIC)


def test_live_server_accepts_a_json_schema_response_format(served: dict[str, Any]) -> None:
    endpoint = Endpoint(base_url=URL, model=served["id"])
    body = {
        "model": served["id"], "temperature": 0.0, "max_tokens": REPLY_TOKENS, "seed": 0,
        "messages": [{"role": "system", "content": "Judge the episode. Answer in JSON."},
                     {"role": "user", "content": "The agent searched once and stopped."}],
        "response_format": response_format(NAMES),
        "chat_template_kwargs": {"enable_thinking": False},
    }
    r = httpx.post(endpoint.chat_url, json=body, timeout=300)
    print("\nstatus", r.status_code, "body", r.text[:400])
    assert r.status_code == 200, r.text[:300]
    completion = read_completion(r.json(), endpoint.chat_url)
    try:
        judged = read_reply(completion.text, NAMES)
        print("parsed a judgement:", {n: a.verdict for n, a in judged.answers.items()})
    except JudgeUnavailable as e:  # a random model runs out of tokens inside a string
        print("no judgement in the reply:", completion.finish_reason, e)
        assert completion.finish_reason == "length" or completion.text.lstrip().startswith("{")


def test_live_judgement_gives_a_verdict_or_falls_back_cleanly(
    served: dict[str, Any], catalog: Any
) -> None:
    env = ShoppingEnv(catalog)
    [t] = play(env, make_tasks(catalog, 1), Careful(0))
    judge = _judge(served["id"], served.get("max_model_len"))

    async def go() -> Any:
        try:
            [check] = await judge.check_endpoints()
            print("\nidentity:", check.reason)
            assert check.ok, check.reason
            try:
                verdict = await judge.assess(t)
                print("verdict:", verdict.score, verdict.rationale[:300], verdict.notes)
                assert [c.name for c in verdict.criteria] == NAMES
                assert verdict.score in {0.1, 0.3, 0.5, 0.7, 0.9, 1.0}
            except JudgeUnavailable as e:
                print("unavailable:", e.kind, str(e)[:300])
                # The request went through; only the random model's answer was unusable.
                assert e.kind in ("bad_reply", "truncated"), str(e)
            return await judge.ajudge(t)
        finally:
            await judge.aclose()

    final = asyncio.run(go())
    print("ajudge:", final.score, "fallback" if is_fallback(final) else "llm", final.notes[-1:])
    if is_fallback(final):
        assert final.score == RubricJudge(RUBRIC).judge(t).score


def test_live_identity_check_refuses_a_model_the_server_does_not_serve(
    served: dict[str, Any], catalog: Any
) -> None:
    judge = _judge("not-served/other-model", served.get("max_model_len"))
    env = ShoppingEnv(catalog)
    [t] = play(env, make_tasks(catalog, 1), Careful(0))

    async def go() -> Any:
        try:
            [check] = await judge.check_endpoints()
            print("\nidentity:", check.reason)
            assert not check.ok and "not the judge model 'not-served/other-model'" in check.reason
            return await judge.ajudge(t)
        finally:
            await judge.aclose()

    v = asyncio.run(go())
    assert is_fallback(v) and "unavailable (model_mismatch)" in v.notes[-1]
