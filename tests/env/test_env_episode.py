"""Every tool driven through `Episode.call` on a real 2,000-product catalog."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shopbench.chat import EpisodeLimits
from shopbench.env.env import ShoppingEnv
from shopbench.env.episode import Episode
from shopbench.outcome.spec import Slot
from shopbench.tasks.model import Task

KEY = b"k" * 32

PRODUCT_TASK = Task(
    id="t-product", intent="product", query="a water bottle", reward=[Slot(title=["bottle"])]
)



@pytest.fixture(scope="module")
def query(catalog: Any) -> str:
    """Three title words of a real product: a search with plenty of hits."""
    first = next(iter(catalog.iter_products(batch_size=50)))[0]
    return " ".join(first.title.split()[:3])


def episode(env: ShoppingEnv, key: bytes | None = KEY, task: Task = PRODUCT_TASK) -> Episode:
    return env.new_episode(task, key=key)


def ok(ep: Episode, name: str, arguments: dict[str, Any] | str) -> Any:
    """One successful call in a turn of its own; its result parsed when it is JSON."""
    assert ep.begin_turn()
    obs = ep.call(name, arguments)
    assert obs.error is None, obs.content
    return json.loads(obs.content) if obs.content[:1] in "[{" else obs.content


def no_internal_errors(ep: Episode) -> None:
    assert all(r.error != "internal" for r in ep.log), [r.result for r in ep.log]


# -- happy paths ---------------------------------------------------------------------------


def test_find_product_shows_tokens_for_the_raw_search_results(env: ShoppingEnv, query: str) -> None:
    ep = episode(env)
    shown = ok(ep, "find_product", {"q": query, "page": 1})
    raw = env.catalog.index.find(query, 1)
    assert 1 <= len(shown) <= 10 and len(shown) == len(raw)
    for item, hit in zip(shown, raw, strict=True):
        assert list(item) == ["product_id", "shop_id", "title", "price", "service", "sold_count"]
        assert len(item["product_id"]) == 10 and item["product_id"].isdigit()
        assert len(item["shop_id"]) == 9 and item["shop_id"].isdigit()
        assert item["product_id"] != hit.product_id
        assert ep.resolve(item["product_id"]) == hit.product_id
        assert ep.resolve(item["shop_id"]) == hit.shop_id
        assert (item["title"], item["price"], item["sold_count"]) == (
            hit.title,
            hit.price,
            hit.sold_count,
        )
    # page 2 is the next ten of the same window
    page2 = ok(ep, "find_product", {"q": query, "page": 2})
    assert [ep.resolve(i["product_id"]) for i in page2] == [
        h.product_id for h in env.catalog.index.find(query, 2)
    ]
    no_internal_errors(ep)


def test_find_product_filters_and_sorts(env: ShoppingEnv, query: str) -> None:
    ep = episode(env)
    cheap = ok(ep, "find_product", {"q": query, "page": 1, "sort": "priceasc"})
    prices = [i["price"] for i in cheap]
    assert prices == sorted(prices)
    by_sales = ok(ep, "find_product", {"q": query, "page": 1, "sort": "order"})
    sold = [i["sold_count"] for i in by_sales]
    assert sold == sorted(sold, reverse=True)
    mid = sorted(prices)[len(prices) // 2]
    ranged = ok(ep, "find_product", {"q": query, "page": 1, "price": f"0-{mid}"})
    assert ranged and all(i["price"] <= mid for i in ranged)
    cod = ok(ep, "find_product", {"q": query, "page": "1", "service": "COD,default"})
    assert cod and all("COD" in i["service"] for i in cod)
    shop = cheap[0]["shop_id"]
    in_shop = ok(ep, "find_product", {"q": query, "page": 1, "shop_id": shop})
    assert in_shop and all(i["shop_id"] == shop for i in in_shop)
    # ShoppingBench treats empty optional filters as absent
    same = ok(
        ep, "find_product", {"q": query, "page": 1, "shop_id": "", "price": "", "sort": "default"}
    )
    assert same == ok(ep, "find_product", {"q": query, "page": 1})
    no_internal_errors(ep)


def test_view_product_information_details(env: ShoppingEnv, query: str) -> None:
    ep = episode(env)
    shown = ok(ep, "find_product", {"q": query, "page": 1})
    tokens = [i["product_id"] for i in shown[:3]]
    viewed = ok(ep, "view_product_information", {"product_ids": " , ".join(tokens + tokens[:1])})
    assert [v["product_id"] for v in viewed] == tokens  # repeats shown once, order kept
    for v, item in zip(viewed, shown, strict=False):
        product = env.catalog.get([ep.resolve(v["product_id"])])[0]
        assert v["shop_id"] == item["shop_id"]
        assert v["title"] == product.title and v["price"] == product.price
        assert v["description"] == product.description
        assert v["sku_options"] == product.sku_options
        assert v["attributes"] == product.attributes
        assert {"short_description", "service"} <= set(v)
    no_internal_errors(ep)


def test_recommend_then_terminate(env: ShoppingEnv, query: str) -> None:
    ep = episode(env)
    shown = ok(ep, "find_product", {"q": query, "page": 1})
    picked = [shown[1]["product_id"], shown[0]["product_id"]]
    text = ok(ep, "recommend_product", json.dumps({"product_ids": ",".join(picked)}))
    assert text == f"Having recommended the products to the user: {picked[0]},{picked[1]}."
    assert ep.recommended == picked
    assert ep.recommended_ids() == [ep.resolve(t) for t in picked]
    assert not ep.done
    assert ok(ep, "terminate", {"status": "success"}) == (
        "The interaction has been completed with status: success"
    )
    assert ep.done and ep.end_reason == "terminated" and ep.status == "success"
    assert set(ep.token_map()) >= set(picked)
    assert ep.token_map()[picked[0]] == ep.recommended_ids()[0]


# -- bad input -----------------------------------------------------------------------------

BAD_CALLS: list[tuple[str, Any, str, str]] = [
    ("buy_now", {}, "unknown_tool", "unknown tool 'buy_now'; available: find_product"),
    ("web_search", {"q": "x"}, "unknown_tool", "unknown tool 'web_search'"),
    ("find_product", {"page": 1}, "bad_argument", "missing required argument 'q'"),
    ("find_product", {"q": "x"}, "bad_argument", "missing required argument 'page'"),
    ("find_product", {"q": "x", "page": "two"}, "bad_argument", "'page' must be an integer"),
    ("find_product", {"q": "x", "page": 6}, "bad_argument", "'page' must be from 1 to 5, got 6"),
    ("find_product", {"q": "x", "page": 0}, "bad_argument", "from 1 to 5, got 0"),
    ("find_product", {"q": "   ", "page": 1}, "bad_argument", "'q' is empty"),
    ("find_product", {"q": "x", "page": 1, "price": "cheap"}, "bad_argument", "price 'cheap'"),
    ("find_product", {"q": "x", "page": 1, "price": "500-100"}, "bad_argument", "price"),
    (
        "find_product",
        {"q": "x", "page": 1, "service": "COD,fast"},
        "bad_argument",
        "unknown service 'fast'; allowed: official, freeShipping, COD, flashsale, default",
    ),
    (
        "find_product",
        {"q": "x", "page": 1, "sort": "cheapest"},
        "bad_argument",
        "'sort' must be one of priceasc, pricedesc, order, default",
    ),
    ("find_product", {"q": "x", "page": 1, "shop_id": "acme"}, "bad_argument", "not an id"),
    (
        "find_product",
        {"q": "x", "page": 1, "shop_id": "123456789"},
        "invalid_id",
        "shop_id 123456789 was not shown in this episode",
    ),
    ("find_product", {"q": "x", "page": 1, "color": "red"}, "bad_argument", "unknown argument"),
    ("find_product", {"q": "x" * 501, "page": 1}, "bad_argument", "the limit is 500"),
    ("find_product", '{"q": "x", ', "bad_argument", "not valid JSON"),
    ("find_product", "[1, 2]", "bad_argument", "must be a JSON object"),
    ("find_product", '{"q": "' + "y" * 5000 + '"}', "bad_argument", "limit of 4096 bytes"),
    ("find_product", "[" * 3000, "bad_argument", "nested more than 16 levels deep"),
    ("find_product", '{"q": ' + "[" * 1400 + "]" * 1400 + "}", "bad_argument", "nested more"),
    ("find_product", '{"q": "x", "page": NaN}', "bad_argument", "NaN is not a finite number"),
    ("find_product", '{"q": "x", "page": 1e400}', "bad_argument", "1e400 is not a finite"),
    ("find_product", '{"q": "x", "page": ' + "9" * 4000 + "}", "bad_argument", "cannot carry"),
    ("find_product", {"q": "x", "page": float("nan")}, "bad_argument", "not a finite number"),
    ("find_product", {1: "x"}, "bad_argument", "argument names must be strings"),
    ("view_product_information", {"product_ids": " , "}, "bad_argument", "is empty"),
    ("view_product_information", {}, "bad_argument", "missing required argument 'product_ids'"),
    (
        "view_product_information",
        {"product_ids": "1234567890"},
        "invalid_id",
        "product_ids not shown in this episode: 1234567890",
    ),
    (
        "view_product_information",
        {"product_ids": ",".join(str(1000000000 + i) for i in range(11))},
        "limit",
        "at most 10 product_ids per call, got 11",
    ),
    ("recommend_product", {"product_ids": "9999999999"}, "invalid_id", "not shown"),
    ("recommend_product", {"product_ids": "abc"}, "bad_argument", "'abc' in 'product_ids'"),
    ("terminate", {"status": "done"}, "bad_argument", "must be one of success, failure"),
    ("terminate", {}, "bad_argument", "missing required argument 'status'"),
]


@pytest.mark.parametrize(("name", "arguments", "code", "message"), BAD_CALLS)
def test_bad_calls_become_error_observations(
    env: ShoppingEnv, query: str, name: str, arguments: Any, code: str, message: str
) -> None:
    ep = episode(env)
    obs = ep.call(name, arguments)
    assert obs.error == code
    assert obs.content.startswith("Error: ")
    assert message in obs.content
    assert ep.log[-1].error == code and ep.log[-1].result == obs.content
    assert not ep.done and ep.recommended == []
    # the episode goes on: the next good call works
    assert ok(ep, "find_product", {"q": query, "page": 1})


def test_non_string_tool_names_and_argument_types_never_raise(env: ShoppingEnv) -> None:
    ep = episode(env)
    for name, args in [(None, {}), (123, "{}"), ("find_product", 42), ("x" * 10_000, {})]:
        obs = ep.call(name, args)  # type: ignore[arg-type]
        assert obs.error in ("unknown_tool", "bad_argument"), obs.content
    assert len(ep.log[-1].name) == ep.limits.max_tool_name_chars
    no_internal_errors(ep)


def test_recommend_only_once_and_a_failed_one_does_not_count(env: ShoppingEnv, query: str) -> None:
    ep = episode(env)
    shown = ok(ep, "find_product", {"q": query, "page": 1})
    bad = ep.call("recommend_product", {"product_ids": shown[0]["product_id"] + ",5555555555"})
    assert bad.error == "invalid_id" and "5555555555" in bad.content
    assert ep.recommended == []
    ok(ep, "recommend_product", {"product_ids": shown[0]["product_id"]})
    again = ep.call("recommend_product", {"product_ids": shown[1]["product_id"]})
    assert again.error == "not_allowed"
    assert "only once per episode" in again.content
    assert ep.recommended == [shown[0]["product_id"]]


def test_calls_after_the_end_are_refused_and_logged(env: ShoppingEnv, query: str) -> None:
    ep = episode(env)
    ok(ep, "terminate", {"status": "failure"})
    for name, args in [
        ("find_product", {"q": query, "page": 1}),
        ("terminate", {"status": "success"}),
    ]:
        obs = ep.call(name, args)
        assert obs.error == "episode_over" and "the episode has ended (terminated)" in obs.content
    assert ep.status == "failure" and [r.error for r in ep.log] == [
        None,
        "episode_over",
        "episode_over",
    ]


# -- episode-scoped ids --------------------------------------------------------------------


def test_tokens_are_isolated_between_episodes(env: ShoppingEnv, query: str) -> None:
    a = episode(env, key=None)
    b = episode(env, key=None)
    shown_a = ok(a, "find_product", {"q": query, "page": 1})
    shown_b = ok(b, "find_product", {"q": query, "page": 1})
    ids_a = [a.resolve(i["product_id"]) for i in shown_a]
    assert ids_a == [b.resolve(i["product_id"]) for i in shown_b]  # same products...
    assert not {i["product_id"] for i in shown_a} & {
        i["product_id"] for i in shown_b
    }  # ...other ids
    foreign = shown_a[0]["product_id"]
    assert b.resolve(foreign) is None
    for name, args in [
        ("view_product_information", {"product_ids": foreign}),
        ("recommend_product", {"product_ids": foreign}),
        ("find_product", {"q": query, "page": 1, "shop_id": shown_a[0]["shop_id"]}),
    ]:
        obs = b.call(name, args)
        assert obs.error == "invalid_id", obs.content
        assert "not shown in this episode" in obs.content
    assert b.recommended == []


def test_a_token_resolves_only_after_it_was_shown(env: ShoppingEnv, query: str) -> None:
    # The same key mints the same tokens (replay), but an id is valid only once shown.
    viewer = episode(env)
    shown = ok(viewer, "find_product", {"q": query, "page": 2})
    fresh = episode(env)  # same key, nothing shown yet
    token = shown[0]["product_id"]
    assert fresh.resolve(token) is None
    assert fresh.call("view_product_information", {"product_ids": token}).error == "invalid_id"
    assert ok(fresh, "find_product", {"q": query, "page": 2}) == shown
    assert ok(fresh, "view_product_information", {"product_ids": token})[0]["product_id"] == token


def test_the_key_is_never_shown(env: ShoppingEnv, query: str) -> None:
    key = bytes(range(32))
    ep = episode(env, key=key)
    ok(ep, "find_product", {"q": query, "page": 1})
    public = [getattr(ep, a) for a in dir(ep) if not a.startswith("_")]
    assert not [v for v in public if isinstance(v, bytes | str) and (v == key or key.hex() in v)]
    assert all(key.hex() not in r.result for r in ep.log)


# -- limits --------------------------------------------------------------------------------


def test_turn_and_per_turn_call_limits(env: ShoppingEnv, query: str) -> None:
    ep = episode(env)
    for turn in range(1, 31):
        assert ep.begin_turn() and ep.turn == turn
    assert ep.call("terminate", {"status": "bad"}).error == "bad_argument"
    assert not ep.begin_turn()
    assert ep.done and ep.end_reason == "max_turns"
    assert ep.call("find_product", {"q": query, "page": 1}).error == "episode_over"

    ep = episode(env)
    ep.begin_turn()
    for _ in range(5):
        assert ep.call("find_product", {"q": query, "page": 1}).error is None
    over = ep.call("find_product", {"q": query, "page": 1})
    assert over.error == "limit" and "at most 5 tool calls per turn" in over.content
    ep.begin_turn()  # a new turn resets the count
    assert ep.call("find_product", {"q": query, "page": 1}).error is None
    assert [r.turn for r in ep.log] == [1] * 6 + [2]


def test_custom_limits_are_enforced(catalog: Any, query: str) -> None:
    limits = EpisodeLimits(
        max_turns=2, max_view_ids=2, max_string_chars=40, max_description_chars=100
    )
    small = ShoppingEnv(catalog, limits=limits)
    ep = small.new_episode(PRODUCT_TASK, key=KEY)
    assert "at most 2 turns" in ep.system_prompt
    long_q = ep.call("find_product", {"q": "w" * 41, "page": 1})
    assert (
        long_q.error == "bad_argument" and "41 characters long; the limit is 40" in long_q.content
    )
    shown = json.loads(ep.call("find_product", {"q": query[:40], "page": 1}).content)
    three = ",".join(i["product_id"] for i in shown[:3])
    over = ep.call("view_product_information", {"product_ids": three})
    assert over.error == "limit" and "at most 2 product_ids per call, got 3" in over.content
    two = ",".join(i["product_id"] for i in shown[:2])
    viewed = ok(ep, "view_product_information", {"product_ids": two})
    assert len(viewed) == 2
    for v in viewed:
        full = catalog.get([ep.resolve(v["product_id"])])[0].description
        assert v["description"] == (full if len(full) <= 100 else full[:100] + "...")
    assert ep.turn == 2 and not ep.begin_turn() and ep.end_reason == "max_turns"
    assert limits.message_violation("r" * 10, "c") is None
    assert "content is 16385 bytes" in (EpisodeLimits().message_violation(None, "c" * 16385) or "")


# -- prompt, tools offered, log, knowledge ---------------------------------------------------


def test_system_prompt_and_offered_tools(env: ShoppingEnv, catalog: Any) -> None:
    ep = episode(env)
    assert ep.system_prompt_version == "v2"
    for phrase in ("find_product", "view_product_information", "recommend_product", "terminate"):
        assert phrase in ep.system_prompt
    assert "at most 30 turns and at most 5 tool calls per turn" in ep.system_prompt
    assert "{" not in ep.system_prompt  # every placeholder filled
    names = [t["function"]["name"] for t in ep.tools]
    assert names == ["find_product", "view_product_information", "recommend_product", "terminate"]
    knowledge = Task(
        id="t-k",
        intent="knowledge",
        query="q",
        reward=[Slot(title=["x"])],
        knowledge_attribute="cebu",
    )
    kep = env.new_episode(knowledge)
    assert [t["function"]["name"] for t in kep.tools][-1] == "web_search"


def test_the_log_records_every_call(env: ShoppingEnv, query: str) -> None:
    ep = episode(env)
    ep.call("find_product", json.dumps({"q": query, "page": 1}))
    ep.call("find_product", '{"q": ')
    first, second = ep.log
    assert first.name == "find_product" and first.arguments == {"q": query, "page": 1}
    assert first.error is None and first.latency_ms >= 0 and len(first.digest) == 64
    assert second.arguments == '{"q": ' and second.error == "bad_argument"
