"""Typed tool results: the exact text the agent sees, parsed back by the same models; and a
recommendation that keeps its positions, graded slot by slot through the episode loop."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from shopbench.catalog.schema import Product
from shopbench.chat import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.env.env import ShoppingEnv
from shopbench.env.results import (
    ProductDetails,
    ProductHit,
    Recommendation,
    Termination,
    WebResult,
    parse_product_details,
    parse_recommendation,
    parse_search_results,
    parse_termination,
    parse_web_results,
    render,
)
from shopbench.outcome.spec import Slot
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode

HIT = ProductHit(
    product_id="1234567890", shop_id="123456789", title='Ñandú "Trail" Bag 2L', price=1499.5,
    service=("official", "COD"), sold_count=12,
)
DETAILS = ProductDetails(
    product_id="1234567890", shop_id="123456789", title="Kape Barako 250g", price=99.0,
    service=(), short_description="Batangas coffee", description="Strong.\nDark roast...",
    sku_options={"0": {"size": "250g", "grind": "fine"}}, attributes={"origin": ["Batangas"]},
)
PAGE = WebResult(url="kb://brand-kalibo", title="Kalibo Trail", content="Made in Aklan.")


def test_results_render_to_the_exact_text_agents_have_always_seen() -> None:
    assert render([HIT]) == (
        '[{"product_id":"1234567890","shop_id":"123456789","title":"Ñandú \\"Trail\\" Bag 2L",'
        '"price":1499.5,"service":["official","COD"],"sold_count":12}]'
    )
    assert render([DETAILS]) == (
        '[{"product_id":"1234567890","shop_id":"123456789","title":"Kape Barako 250g",'
        '"price":99.0,"service":[],"short_description":"Batangas coffee",'
        '"description":"Strong.\\nDark roast...","sku_options":{"0":{"size":"250g",'
        '"grind":"fine"}},"attributes":{"origin":["Batangas"]}}]'
    )
    assert render([PAGE]) == (
        '[{"url":"kb://brand-kalibo","title":"Kalibo Trail","content":"Made in Aklan."}]'
    )
    assert render([]) == "[]"
    assert render(Recommendation(product_ids=("1", "", "3"))) == (
        "Having recommended the products to the user: 1,,3."
    )
    assert render(Termination(status="failure")) == (
        "The interaction has been completed with status: failure"
    )


def _dumps(rows: list[Any]) -> str:
    return json.dumps([r.model_dump() for r in rows], ensure_ascii=False, separators=(",", ":"))


def test_render_writes_json_dumps_text_for_every_character_and_price() -> None:
    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    texts = [chars[i : i + 4096] for i in range(0, len(chars), 4096)]
    prices = [0.0, 5e-324, 1e-05, 9.999e-05, 1e-4, 0.1 + 0.2, 1499.5, 1e16, 1.5e300]
    prices += [float("inf"), *(1.2345678901 * 10.0**e for e in range(-12, 20))]
    for price in prices:
        hits = [HIT.model_copy(update={"price": price, "title": t}) for t in texts[:3]]
        assert render(hits) == _dumps(hits), price
    details = [DETAILS.model_copy(update={"title": t, "description": t}) for t in texts]
    assert render(details) == _dumps(details)
    pages = [PAGE.model_copy(update={"content": t}) for t in texts]
    assert render(pages) == _dumps(pages)


def test_every_kind_parses_back_to_the_same_model_and_nothing_else() -> None:
    assert parse_search_results(render([HIT, HIT])) == [HIT, HIT]
    assert parse_product_details(render([DETAILS])) == [DETAILS]
    assert parse_web_results(render([PAGE])) == [PAGE]
    rec = Recommendation(product_ids=("1234567890", "", "2345678901"))
    assert parse_recommendation(render(rec)) == rec
    assert parse_termination(render(Termination(status="success"))) == Termination(
        status="success"
    )
    error = "Error: find_product: argument 'q' is empty; give the words to search"
    for text in (error, render(rec), render([PAGE]), '[{"product_id": 1', "[1, 2]"):
        assert parse_search_results(text) == []
        assert parse_product_details(text) == []
    assert parse_web_results(render([HIT])) == []
    assert parse_recommendation(error) is None
    assert parse_termination(render(rec)) is None


@pytest.fixture(scope="module")
def env(catalog: Any) -> ShoppingEnv:
    return ShoppingEnv(catalog)


def _old_hits_text(env: ShoppingEnv, tokens: dict[str, str], q: str) -> str:
    """find_product's observation as the environment wrote it before typed results: dicts
    built from the raw search hits, dumped as compact JSON."""
    rows = [
        {"product_id": tokens[h.product_id], "shop_id": tokens[h.shop_id], "title": h.title,
         "price": h.price, "service": list(h.service), "sold_count": h.sold_count}
        for h in env.catalog.index.find(q, page=1)
    ]
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"))


def _old_details_text(env: ShoppingEnv, tokens: dict[str, str], ids: list[str]) -> str:
    cap = env.limits.max_description_chars
    rows = []
    for p in env.catalog.get(ids):
        assert p is not None
        description = p.description if len(p.description) <= cap else p.description[:cap] + "..."
        rows.append({
            "product_id": tokens[p.product_id], "shop_id": tokens[p.shop_id], "title": p.title,
            "price": p.price, "service": list(p.service),
            "short_description": p.short_description, "description": description,
            "sku_options": p.sku_options, "attributes": p.attributes,
        })
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"))


def test_episode_observations_are_the_text_of_the_untyped_rendering(
    env: ShoppingEnv, catalog: Any
) -> None:
    products = next(iter(catalog.iter_products(batch_size=40)))
    task = Task(id="t", intent="product", query="q", reward=[Slot(title=["q"])])
    compared = 0
    for n, p in enumerate(products[::4]):
        ep = env.new_episode(task, key=bytes([n]) * 32)
        q = " ".join(p.title.split()[:3])
        found = ep.call("find_product", {"q": q, "page": 1})
        tokens = {v: k for k, v in ep.token_map().items()}
        assert found.content == _old_hits_text(env, tokens, q)
        ids = [ep.resolve(h.product_id) for h in parse_search_results(found.content)[:4]]
        shown = ",".join(tokens[i] for i in ids if i)
        viewed = ep.call("view_product_information", {"product_ids": shown})
        assert viewed.content == _old_details_text(env, tokens, [i for i in ids if i])
        compared += 2
    assert compared == 20


def _found_alone(catalog: Any, p: Product) -> bool:
    return any(h.product_id == p.product_id for h in catalog.index.find(p.title, page=1))


@pytest.fixture(scope="module")
def shop_task(catalog: Any) -> tuple[Task, list[Product]]:
    """A three-slot shop task on three products of one shop, each found by its title."""
    by_shop: dict[str, list[Product]] = {}
    for batch in catalog.iter_products(batch_size=500):
        for p in batch:
            by_shop.setdefault(p.shop_id, []).append(p)
    for items in by_shop.values():
        found = [p for p in items if _found_alone(catalog, p)]
        titles = {p.title for p in found}
        if len(found) >= 3 and len(titles) >= 3:
            picked = list({p.title: p for p in found}.values())[:3]
            task = Task(
                id="t-shop", intent="shop", query="three things from one shop",
                reward=[Slot(product_id=p.product_id, title=[p.title]) for p in picked],
            )
            return task, picked
    raise AssertionError("the test catalog has no shop with three findable products")


class SkipsTheMiddle:
    """Searches the first and third products' titles, then recommends "first,,third"."""

    name = "skips_the_middle"

    def __init__(self, first: str, third: str) -> None:
        self.titles = (first, third)

    async def act(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> Any:
        turns = sum(m.role == "assistant" for m in messages)
        if turns == 0:
            return _reply(*(("find_product", {"q": t, "page": 1}) for t in self.titles))
        if turns == 1:
            answers = [parse_search_results(m.content or "") for m in messages if m.role == "tool"]
            first, third = (
                next(h.product_id for h in hits if h.title == title)
                for hits, title in zip(answers, self.titles, strict=True)
            )
            return _reply(("recommend_product", {"product_ids": f"{first},,{third}"}))
        return _reply(("terminate", {"status": "success"}))


def _reply(*calls: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(
        content="next step",
        tool_calls=[
            ToolCall(id=f"c{i}", function=FunctionCall(name=n, arguments=json.dumps(a)))
            for i, (n, a) in enumerate(calls)
        ],
    )


def test_an_empty_position_leaves_its_slot_empty_and_the_next_id_grades_the_next_slot(
    env: ShoppingEnv, shop_task: tuple[Task, list[Product]]
) -> None:
    task, (a, _, c) = shop_task
    t = asyncio.run(
        run_episode(env, task, SkipsTheMiddle(a.title, c.title), key=b"k" * 32)
    )
    first, empty, third = t.recommended
    assert empty == "" and first and third
    assert t.recommended_ids == [a.product_id, None, c.product_id]
    slots = t.outcome.slots
    assert [s.product_id for s in slots] == [a.product_id, None, c.product_id]
    assert slots[2].exact_target and slots[2].rule_score == 1.0
    assert slots[1].rule_score == 0.0
    assert not t.outcome.success and "no product for slot(s) [2]" in (t.outcome.reason or "")
    accepted = next(e for e in t.tool_log if e.name == "recommend_product")
    assert accepted.error is None
    said = next(m.content for m in t.messages if m.role == "tool" and m.name == "recommend_product")
    assert parse_recommendation(said or "") == Recommendation(product_ids=(first, "", third))


def test_empty_ids_in_recommend_and_view(env: ShoppingEnv, catalog: Any) -> None:
    p = next(iter(catalog.iter_products(batch_size=10)))[0]
    task = Task(id="t", intent="product", query="q", reward=[Slot(title=["q"])])
    ep = env.new_episode(task, key=b"e" * 32)
    hits = parse_search_results(ep.call("find_product", {"q": p.title, "page": 1}).content)
    a, b = hits[0].product_id, hits[1].product_id
    # view skips empty entries, as it always has
    viewed = parse_product_details(
        ep.call("view_product_information", {"product_ids": f",{a},, {b},"}).content
    )
    assert [d.product_id for d in viewed] == [a, b]
    empty = ep.call("recommend_product", {"product_ids": " , ,"})
    assert empty.error == "bad_argument" and "'product_ids' is empty" in empty.content
    # a leading empty position is kept; trailing ones follow no id and are dropped
    said = ep.call("recommend_product", {"product_ids": f",{a},"})
    assert said.content == f"Having recommended the products to the user: ,{a}."
    assert ep.recommended == ["", a]
    assert ep.recommended_ids() == [None, ep.resolve(a)]
