"""Constrained tool calls (``decoding: constrained``): the grammar built from the tool
schemas and the ids an episode showed, and a random tiny model held to it for whole episodes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support.local_model import tiny_engine

from shopbench.agents.local.config import HFPolicyConfig
from shopbench.agents.local.engine import HFEngine
from shopbench.agents.local.grammar import (
    MAX_NUMBERS,
    PRICE_PATTERN,
    GrammarTokenizer,
    call_schema,
    customer_numbers,
    price_choices,
    reply_grammar,
    shown_ids,
)
from shopbench.agents.local.policy import HFPolicy
from shopbench.chat import ChatMessage
from shopbench.env.env import ShoppingEnv
from shopbench.tasks.model import Task

SEARCH = '[{"product_id":"1111","shop_id":"77","title":"A"},{"product_id":"2222","shop_id":"88"}]'


def _tools(env: ShoppingEnv, task: Task) -> list[dict]:
    return env.new_episode(task).tools


@pytest.fixture(scope="module")
def task(catalog_dir: Path) -> Task:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    return build_tasks(BuildConfig(catalog=catalog_dir, intents=["product"], n=3, seed=8)).tasks[0]


def test_ids_are_those_the_tool_results_showed() -> None:
    messages = [
        ChatMessage(role="user", content='"product_id":"9999" in the request is not shown'),
        ChatMessage(role="tool", content=SEARCH, tool_call_id="c1", name="find_product"),
    ]
    assert shown_ids(messages) == (["1111", "2222"], ["77", "88"])


def test_the_call_schema_holds_each_argument_to_its_form(env: ShoppingEnv, task: Task) -> None:
    tools = _tools(env, task)
    before = {o["properties"]["name"]["const"]: o["properties"]["arguments"]
              for o in call_schema(tools, [], [])["anyOf"]}  # fmt: skip
    # Nothing shown yet: no tool that needs ids can be called, and no shop named.
    assert "recommend_product" not in before and "view_product_information" not in before
    search = before["find_product"]["properties"]
    assert "shop_id" not in search
    assert search["price"]["pattern"] == PRICE_PATTERN
    assert search["page"] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert search["sort"]["enum"] == ["priceasc", "pricedesc", "order", "default"]
    assert "freeShipping" in search["service"]["pattern"]
    after = {o["properties"]["name"]["const"]: o["properties"]["arguments"]
             for o in call_schema(tools, ["1111", "2222"], ["77"])["anyOf"]}  # fmt: skip
    assert "1111" in after["recommend_product"]["properties"]["product_ids"]["pattern"]
    assert after["find_product"]["properties"]["shop_id"]["enum"] == ["77"]


def test_the_grammar_takes_a_well_formed_turn_and_refuses_a_bad_one(
    tmp_path: Path, env: ShoppingEnv, task: Task
) -> None:
    import llguidance  # noqa: F401  (the library the grammar is written for)

    tools = _tools(env, task)
    good = ('<think>\nOpening the first.\n</think>\n\n<tool_call>\n{"name": '
            '"view_product_information", "arguments": {"product_ids": "1111,2222"}}\n</tool_call>')
    engine = tiny_engine(tmp_path / "m", [good, json.dumps(tools), SEARCH])
    grammars = GrammarTokenizer(engine.tokenizer, engine.stop_ids)
    messages = [ChatMessage(role="tool", content=SEARCH, tool_call_id="c1", name="find_product")]
    grammar = reply_grammar(tools, messages, grammars.marker_ids)

    def takes(text: str) -> bool:
        matcher = grammars.matcher(grammar)
        ids = engine.tokenizer.encode(text, add_special_tokens=False)
        return matcher.consume_tokens(ids) and matcher.is_accepting()

    assert takes(good)
    assert not takes(good.replace("1111,2222", "1111,3333"))  # an id never shown
    assert not takes(good.replace("<think>\nOpening the first.\n</think>\n\n", "Sure! "))
    price = ('<tool_call>\n{"name": "find_product", "arguments": {"q": "bag", "page": 1, '
             '"price": "PRICE"}}\n</tool_call>')  # fmt: skip
    for written in ("100-500", "100-", "-500"):  # every form the environment reads
        assert takes(price.replace("PRICE", written)), written
    assert not takes(price.replace("PRICE", "freeShipping"))
    assert not takes(price.replace("PRICE", "-"))


def test_grounded_prices_are_built_from_the_numbers_the_customer_wrote() -> None:
    messages = [
        ChatMessage(role="system", content="You have at most 30 turns."),
        ChatMessage(role="user", content="A 5kg dumbbell between 1,073 and 1640.50 pesos, 5 pcs"),
        ChatMessage(role="tool", content="shop 777 | 999", tool_call_id="c1", name="find_product"),
    ]
    assert customer_numbers(messages) == ["5", "1073", "1640.50"]
    choices = price_choices(customer_numbers(messages))
    assert {"1073-1640.50", "-1073", "1073-", "5-1073"} <= set(choices)
    assert "1640.50-1073" not in choices and "777-" not in choices  # low above high; a tool's
    assert "0-1073" in choices and len(choices) == 3 + 3 + 3 + 3
    assert price_choices([]) == []
    # A hostile request: a number too long to be a price, and more numbers than a grammar needs.
    flood = ChatMessage(role="user", content="9" * 5000 + " " + " ".join(map(str, range(50))))
    numbers = customer_numbers([flood])
    assert numbers == [str(n) for n in range(MAX_NUMBERS)]
    assert len(price_choices(numbers)) < 100


def test_a_grounded_grammar_writes_the_customers_price_and_no_invented_one(
    tmp_path: Path, env: ShoppingEnv, task: Task
) -> None:
    tools = _tools(env, task)
    price = ('<tool_call>\n{"name": "find_product", "arguments": {"q": "bag", "page": 1, '
             '"price": "PRICE"}}\n</tool_call>')  # fmt: skip
    bare = ('<tool_call>\n{"name": "find_product", "arguments": {"q": "bag", "page": 1}}'
            "\n</tool_call>")  # fmt: skip
    engine = tiny_engine(tmp_path / "m", [price, json.dumps(tools)])
    grammars = GrammarTokenizer(engine.tokenizer, engine.stop_ids)

    def takes(request: str, text: str, grounded: bool = True) -> bool:
        messages = [ChatMessage(role="user", content=request)]
        matcher = grammars.matcher(
            reply_grammar(tools, messages, grammars.marker_ids, grounded=grounded)
        )
        ids = engine.tokenizer.encode(text, add_special_tokens=False)
        return matcher.consume_tokens(ids) and matcher.is_accepting()

    cheap = "A bag cheaper than 1400 pesos"
    assert takes(cheap, price.replace("PRICE", "-1400"))
    assert takes(cheap, price.replace("PRICE", "1400-"))
    assert not takes(cheap, price.replace("PRICE", "100-101"))  # a number never written
    assert takes(cheap, price.replace("PRICE", "100-101"), grounded=False)
    assert not takes("A bag from 300 to 50 pesos", price.replace("PRICE", "300-50"))
    assert takes("A bag from 300 to 50 pesos", price.replace("PRICE", "50-300"))
    assert not takes("A red bag", price.replace("PRICE", "0-100"))  # no number: no price
    assert takes("A red bag", bare)


@pytest.mark.parametrize(
    "written", ["0-100", "100-1000", "1000-", "-500", "12.5-99.9", "-", "", "abc", "1-2-3",
                "5", "--5", "5--", " 1-2"],
)  # fmt: skip
def test_the_price_form_is_what_the_environment_reads(written: str) -> None:
    """A price the grammar lets a model write is one the search parses, and each form the
    search documents (lo-hi, lo-, -hi) can be written."""
    import re

    from shopbench.catalog.search.filters import parse_price
    from shopbench.errors import ShopbenchError

    try:
        parse_price(written)
        parsed = True
    except ShopbenchError:
        parsed = False
    held = re.fullmatch(PRICE_PATTERN.strip("^$"), written) is not None
    assert held == (parsed and written.strip() == written), written


@pytest.mark.slow
def test_a_random_model_constrained_makes_only_calls_the_environment_accepts(
    tmp_path: Path, env: ShoppingEnv, task: Task
) -> None:
    """Free, a random tiny model writes no call that runs; constrained, every call of every
    turn is one the environment accepts."""
    from shopbench.trajectory.loop import RunLimits, run_episode

    tools = _tools(env, task)
    engine = tiny_engine(tmp_path / "m", [json.dumps(tools), task.query, SEARCH], seed=3)

    def play(decoding: str, **kept: int | bool):  # type: ignore[no-untyped-def]
        config = HFPolicyConfig(path=engine.path, max_new_tokens=160, decoding=decoding)
        policy = HFPolicy(config, engine=HFEngine(engine.path, **kept))  # type: ignore[arg-type]
        return asyncio.run(run_episode(env, task, policy, RunLimits(max_idle_turns=3),
                                       key=b"\x01" * 32))  # fmt: skip

    free = play("free")
    assert not [e for e in free.tool_log if e.error is None]
    constrained = play("constrained")
    calls = constrained.tool_log
    assert calls and all(e.error is None for e in calls), [e.error for e in calls]
    turns = [m for m in constrained.messages if m.role == "assistant"]
    assert all(m.tool_calls for m in turns)  # every turn made a call
    assert calls[-1].name == "terminate" or len(turns) == constrained.turns
    # With earlier turns' keys and values kept (as the experiment evaluates): the same turns.
    kept = play("constrained", kv_tokens=200_000, buffered=True)
    assert kept.messages == constrained.messages
    grounded = play("grounded")  # prices, if any, from the request's own numbers
    assert grounded.tool_log and all(e.error is None for e in grounded.tool_log)
    numbers = set(customer_numbers([ChatMessage(role="user", content=task.query)]))
    for e in grounded.tool_log:
        if e.name == "find_product" and "price" in e.arguments:
            assert set(e.arguments["price"].split("-")) - {""} <= numbers, e.arguments
