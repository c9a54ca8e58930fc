"""The optional LLM shopper, against a real HTTP server speaking the OpenAI API: a faithful
rewording is what the agent reads and the log records as the LLM's; an unfaithful one, a
server that fails or one that is down leaves the rules' words; verify replays the archived
rewording without the endpoint and finds one altered after the fact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_openai import FakeJudgeServer, free_port
from typer.testing import CliRunner

from shopbench.archive.jsonl import read_trajectories
from shopbench.catalog.store import Catalog
from shopbench.chat import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.cli import app
from shopbench.env.env import ShoppingEnv
from shopbench.env.errors import EnvError
from shopbench.env.shopper.rephrase import LLMRephraser, ShopperLLMConfig, unfaithful_reason
from shopbench.records.binding import result_digest
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from shopbench.verify.replay import replay_differences, replay_episode

MODEL = "shopper"
REWORDED = "Sorry, I won't point you to one listing; ask me what I care about instead."


class Asker:
    """Asks the shopper for the product, then ends (a policy through the real loop)."""

    name = "asker"

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        turn = sum(m.role == "assistant" for m in messages) + 1
        if turn == 1:
            call = ("ask_shopper", {"question": "Which product is it? Just give me the id."})
        else:
            call = ("terminate", {"status": "failure"})
        tool_call = ToolCall(id=f"c{turn}", function=FunctionCall(
            name=call[0], arguments=json.dumps(call[1])))  # fmt: skip
        return AssistantMessage(reasoning_content="Asking.", tool_calls=[tool_call])


@pytest.fixture(scope="module")
def task(catalog_dir: Path) -> Task:
    return build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=1, seed=3)).tasks[0]


def _play(catalog: Catalog, task: Task, url: str) -> tuple[ShoppingEnv, Trajectory]:
    env = ShoppingEnv(catalog, rephraser=LLMRephraser(ShopperLLMConfig(base_url=url, model=MODEL)))
    return env, asyncio.run(run_episode(env, task, Asker(), key=b"L" * 32))


def _answer(t: Trajectory) -> str:
    return next(m.content or "" for m in t.messages if m.role == "tool")


def test_a_faithful_rewording_is_the_answer_and_replays(
    catalog: Catalog, task: Task, server: FakeJudgeServer
) -> None:
    server.reset(MODEL)
    server.says[MODEL] = REWORDED
    _, t = _play(catalog, task, server.url)
    assert _answer(t) == REWORDED
    assert t.outcome.dialogue is not None and [q.by for q in t.outcome.dialogue.turns] == ["llm"]
    assert t.tool_log[0].result_digest == result_digest(REWORDED)
    [request] = server.chats(MODEL)
    sent = json.dumps(request)
    assert "Which product is it" not in sent  # the model sees the rules' answer, not the agent
    assert task.reward[0].title[0] not in sent  # nor anything of the task
    rules = ShoppingEnv(catalog)  # the verifier has no endpoint
    assert list(replay_differences(t, replay_episode(rules, task, t, b"L" * 32))) == []
    assert list(replay_differences(t, replay_episode(rules, task, t))) == []
    altered = "Sorry, I won't point you to one listing; it costs 99 pesos though."
    asked = next(i for i, m in enumerate(t.messages) if m.role == "tool")
    forged = t.model_copy(update={
        "messages": [m.model_copy(update={"content": altered}) if i == asked else m
                     for i, m in enumerate(t.messages)],
        "tool_log": [e.model_copy(update={"result_digest": result_digest(altered)})
                     if n == 0 else e for n, e in enumerate(t.tool_log)],
    })  # fmt: skip
    found = {f[0] for f in replay_differences(forged, replay_episode(rules, task, forged))}
    assert found == {"tool_log[0].result_digest", "outcome.dialogue.turns[0].by"}


def test_a_reasoning_models_leading_block_is_not_part_of_the_rewording(
    catalog: Catalog, task: Task, server: FakeJudgeServer
) -> None:
    server.reset(MODEL)
    server.says[MODEL] = "<think>\nThey want it short.\n</think>\n" + REWORDED
    _, t = _play(catalog, task, server.url)
    assert _answer(t) == REWORDED


@pytest.mark.parametrize("says", ["I'd like it under 100 pesos.", "Get the one with COD.", ""])
def test_an_unfaithful_rewording_leaves_the_rules_words(
    catalog: Catalog, task: Task, server: FakeJudgeServer, says: str
) -> None:
    server.reset(MODEL)
    server.says[MODEL] = says
    _, t = _play(catalog, task, server.url)
    _, plain = _play(catalog, task, f"http://127.0.0.1:{free_port()}/v1")
    assert _answer(t) == _answer(plain) != says
    assert t.outcome.dialogue is not None and t.outcome.dialogue.turns[0].by == "rules"


def test_a_failing_or_absent_endpoint_leaves_the_rules_words(
    catalog: Catalog, task: Task, server: FakeJudgeServer
) -> None:
    server.reset(MODEL)
    server.plan(MODEL, "503")
    _, failed = _play(catalog, task, server.url)
    rules = asyncio.run(run_episode(ShoppingEnv(catalog), task, Asker(), key=b"L" * 32))
    assert _answer(failed) == _answer(rules)
    assert failed.outcome.dialogue == rules.outcome.dialogue


def test_faithfulness_is_facts_kept_and_none_added() -> None:
    answer = "I'd like it with color family navy blue, priced under 1,200 pesos."
    kw: dict[str, Any] = {"values": ["navy blue", "m"], "forbidden": ["nordic", "curtain"]}
    assert unfaithful_reason(answer, "Navy blue, please, and under 1,200 pesos.", **kw) is None
    refused = {
        "Navy blue, under 1200 pesos, size m.": "value 'm' is added",
        "Under 1,200 pesos.": "value 'navy blue' is dropped",
        "Navy blue, under 1,300 pesos.": "its numbers are not the answer's",
        "Navy blue, under 1,200 pesos, free shipping.": "its services are not the answer's",
        "Navy blue nordic one under 1,200 pesos.": "it names 'nordic'",
        "Navy blue, under 1,200, see https://x.y": "like an id or a link",
        "Navy blue, 1,200 max, id 1234567890": "like an id or a link",
    }
    for rewording, reason in refused.items():
        assert reason in (unfaithful_reason(answer, rewording, **kw) or ""), rewording


def test_eval_takes_an_llm_shopper(
    catalog_dir: Path, task: Task, server: FakeJudgeServer, tmp_path: Path
) -> None:
    server.reset(MODEL)
    server.says[MODEL] = REWORDED  # faithful to no answer careful gets: the rules' words stand
    tasks = tmp_path / "t.jsonl"
    write_tasks(tasks, [task])
    args = ["eval", "--catalog", str(catalog_dir), "--tasks", str(tasks), "--policy", "careful",
            "--out", str(tmp_path / "ev"), "--quiet"]  # fmt: skip
    done = CliRunner().invoke(app, [*args, "--shopper", f"openai:{MODEL}@{server.url}"])
    assert done.exit_code == 0, done.output
    [t] = read_trajectories(tmp_path / "ev" / "trajectories.jsonl")
    assert t.outcome.dialogue is not None and t.outcome.dialogue.questions > 0
    assert len(server.chats(MODEL)) == t.outcome.dialogue.questions
    assert {q.by for q in t.outcome.dialogue.turns} == {"rules"}
    bad = CliRunner().invoke(app, [*args, "--shopper", "openai:nourl"])
    assert isinstance(bad.exception, EnvError)  # the CLI's main prints it as one line, exit 2
    assert "shopper 'openai:nourl': expected openai:MODEL@URL" in str(bad.exception)
