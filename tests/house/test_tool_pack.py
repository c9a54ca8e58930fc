"""A new tool as a pack, declared here and nowhere else (docs/architecture.md, "Adding a tool
pack"): its tool offered to an agent, its handler answering, its log entries shown by the
ATIF export, the trace browser, the LLM judge's facts and the replay, each through the hook
the shopper's pack uses.

A task takes only the wire vocabulary's intents, so the toy pack is offered on product
tasks for the test's length: the intent lookup answers for ``product`` with a declaration
naming the toy pack, as a new intent's module would name it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from shopbench.chat import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.env.env import ShoppingEnv
from shopbench.env.packs import (
    PackHandler,
    PackSession,
    Setting,
    register_handler,
    unregister_handler,
)
from shopbench.env.toolkit import Toolkit, tool
from shopbench.errors import RegistryError
from shopbench.judging.llm.facts import facts_text
from shopbench.outcome.spec import Slot
from shopbench.packs.pack import (
    ToolPack,
    Voice,
    pack_of,
    pack_page_rows,
    register_pack,
    tool_pack,
    tool_packs,
    unregister_pack,
)
from shopbench.records.outcome import Outcome
from shopbench.records.tools import BASE_TOOLS, Tool
from shopbench.records.trajectory import ToolLogEntry, Trajectory
from shopbench.tasks import intent_registry
from shopbench.tasks.model import Task
from shopbench.traces.atif import atif_document
from shopbench.trajectory.loop import run_episode
from shopbench.verify.replay import replay_episode

TOOL = "check_stock"
KEY = b"s" * 32
WORDS = "The warehouse says {} is in stock."
FACT = "The warehouse answered check_stock."

# -- the pack's low-floor half: its tool and its hooks ----------------------------------------


def _voice(message: ChatMessage, entry: ToolLogEntry) -> Voice | None:
    if entry.error is not None:
        return None
    return Voice(message=message.content or "", extra={"warehouse": True, "turn": entry.turn})


def _page_rows(t: Trajectory) -> list[dict[str, Any]]:
    return [{"turn": e.turn, "digest": e.result_digest} for e in t.tool_log if e.name == TOOL]


def _facts(outcome: Outcome | None, recommend_turn: int | None) -> list[str]:
    return [FACT] if outcome is not None else []


def _rewordings(record: Trajectory) -> list[str | None]:
    answers = {m.tool_call_id: m.content for m in record.messages if m.role == "tool"}
    calls = [c for m in record.messages if m.role == "assistant" for c in m.tool_calls or []]
    return [answers.get(c.id) for c in calls if c.function.name == TOOL]


STOCK = ToolPack(
    name="stock", tools=(TOOL,), handler="tests.house.test_tool_pack",
    voice=_voice, page_rows=_page_rows, facts=_facts, rewordings=_rewordings,
)  # fmt: skip

# -- its handler, at the environment's floor ------------------------------------------------


class StockNote(BaseModel):
    """The warehouse's answer: a sentence."""

    model_config = ConfigDict(frozen=True)

    text: str


class StockTools(Toolkit):
    """The toy tool."""

    @tool
    def check_stock(self, product_id: str) -> StockNote:
        """Ask the warehouse whether a product is in stock.

        Args:
            product_id: A product_id from earlier results.
        """
        return StockNote(text=WORDS.format(product_id))


ACCEPTED: list[str] = []


class StockSession(PackSession):
    """Takes archived words that are the warehouse's."""

    def accept(self, text: str) -> bool:
        ACCEPTED.append(text)
        return text.startswith("The warehouse says")


def _open(env: Setting, task: Task, dialogue_id: str) -> PackSession:
    return StockSession(StockTools())


HANDLER = PackHandler(pack=STOCK, toolkit=StockTools, open=_open)


@pytest.fixture
def stocked(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy pack registered, its handler too, and offered on product tasks."""
    product = intent_registry.intent_spec("product")
    offered = dataclasses.replace(product, packs=(STOCK,))
    lookup = intent_registry.intent_spec
    monkeypatch.setattr(intent_registry, "intent_spec",
                        lambda name: offered if name == "product" else lookup(name))  # fmt: skip
    register_pack(STOCK)
    register_handler(HANDLER)
    try:
        yield
    finally:
        unregister_handler(STOCK.name)
        unregister_pack(STOCK.name)


class StockPolicy:
    """Searches, asks the warehouse about the first hit, recommends it."""

    name = "stock-checker"

    def __init__(self) -> None:
        self.offered: list[str] = []

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        turn = sum(1 for m in messages if m.role == "assistant") + 1
        self.offered = [t["function"]["name"] for t in tools]
        first = next((json.loads(m.content or "[]")[0]["product_id"] for m in messages
                      if m.role == "tool" and (m.content or "").startswith("[{")), "")  # fmt: skip
        calls: list[tuple[str, dict[str, Any]]] = {
            1: [(Tool.FIND_PRODUCT, {"q": "water bottle", "page": 1})],
            2: [(TOOL, {"product_id": first})],
        }.get(turn, [(Tool.RECOMMEND_PRODUCT, {"product_ids": first}),
                     (Tool.TERMINATE, {"status": "success"})])  # fmt: skip
        return AssistantMessage(content="", tool_calls=[
            ToolCall(id=f"c{turn}_{i}", function=FunctionCall(name=n, arguments=json.dumps(a)))
            for i, (n, a) in enumerate(calls)
        ])  # fmt: skip


TASK = Task(id="t-stock", intent="product", query="a water bottle", reward=[Slot(title=["bottle"])])


def test_a_toy_pack_runs_through_every_layer(env: ShoppingEnv, stocked: None) -> None:
    policy = StockPolicy()
    t = asyncio.run(run_episode(env, TASK, policy, key=KEY))
    # Offered after the tools every task gets, and answered by its handler.
    assert policy.offered == [*BASE_TOOLS, TOOL]
    entry = next(e for e in t.tool_log if e.name == TOOL)
    answer = next(m for m in t.messages if m.role == "tool" and m.name == TOOL)
    assert entry.error is None and answer.content == WORDS.format(t.recommended[0])
    assert pack_of(TOOL) is STOCK

    # ATIF: the answer is the warehouse's words, a user step, not an observation.
    steps = atif_document(t)["steps"]
    users = [s for s in steps if s["source"] == "user" and "warehouse" in
             s.get("extra", {}).get("shopbench", {})]  # fmt: skip
    assert [s["message"] for s in users] == [answer.content]
    assert users[0]["extra"]["shopbench"] == {"warehouse": True, "turn": entry.turn}
    results = [r for s in steps for r in (s.get("observation") or {}).get("results", [])]
    assert answer.tool_call_id not in {r.get("source_call_id") for r in results}

    # The browser's conversation rows and the judge's facts.
    assert pack_page_rows(t) == [{"turn": 2, "digest": entry.result_digest}]
    assert facts_text(None, t.outcome, None).splitlines()[-1] == FACT

    # The replay offers the archived words back, and the pack takes them.
    ACCEPTED.clear()
    replayed = replay_episode(env, TASK, t, key=KEY)
    assert [answer.content] == ACCEPTED
    assert [e.result_digest for e in replayed.tool_log] == [e.result_digest for e in t.tool_log]


def test_the_pack_is_gone_once_unregistered(env: ShoppingEnv) -> None:
    assert pack_of(TOOL) is None
    assert TOOL not in env.tool_specs("product")
    with pytest.raises(RegistryError, match=r"tool pack 'stock'; allowed: web_search, shopper$"):
        tool_pack("stock")


def test_a_tool_belongs_to_one_pack_and_the_built_in_packs_stay() -> None:
    asking = dataclasses.replace(STOCK, name="asking", tools=(Tool.ASK_SHOPPER,))
    with pytest.raises(RegistryError, match=r"'ask_shopper' already belongs to .* 'shopper'"):
        register_pack(asking)
    with pytest.raises(RegistryError, match="'shopper' is not a registered add-on pack"):
        unregister_pack("shopper")
    register_pack(STOCK, before="shopper")
    try:
        assert [p.name for p in tool_packs()] == ["web_search", "stock", "shopper"]
    finally:
        unregister_pack(STOCK.name)
    assert [p.name for p in tool_packs()] == ["web_search", "shopper"]
