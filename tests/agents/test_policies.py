"""Reference policies: reading requests, and behaving as each is meant to on real tasks."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.reference import CarefulPolicy, OfflinePolicy
from shopbench.agents.reference.query_reading import (
    read_price,
    read_query,
    read_services,
    requested_pairs,
)
from shopbench.agents.registry import SERVABLE_POLICIES, make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import PriceBound, Voucher
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode

# -- reading requests -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, lo, hi",
    [
        ("priced above 114 PHP.", 114, None),
        ("that costs not more than PHP 2,410.", None, 2410),
        ("no less than ₱4334?", 4334, None),
        ("at a price somewhere between 1016 and 3,266 pesos, from LazMall", 1016, 3266),
        ("costing from PHP 4064 to 4,479, and in capacity 500ml", 4064, 4479),
        ("1,601 pesos and up", 1601, None),
        ("₱2800 max", None, 2800),
        ("pricier than PHP 75", 75, None),
        ("under 500, with free shipping", None, 500),
    ],
)
def test_price_bounds_are_read_with_their_numbers(
    text: str, lo: float | None, hi: float | None
) -> None:
    need = read_price(text)
    assert need is not None and (need.lo, need.hi) == (lo, hi)


@pytest.mark.parametrize(
    "text", ["Up to 20 Hours Battery Wireless Earbuds", "Rice Cooker 1.8L for 5 people", "2pcs"]
)
def test_numbers_in_product_names_are_not_prices(text: str) -> None:
    assert read_price(text) is None


def test_services_are_read_by_their_names() -> None:
    assert read_services("with a LazFlash deal, COD available and free delivery") == (
        "freeShipping", "COD", "flashsale",
    )
    assert read_services("sold by a LazMall official store") == ("official",)
    assert read_services("a cod fish fillet") == ()  # only the capitalised COD is the service


def test_a_shop_list_a_voucher_and_a_question_are_read() -> None:
    shop = read_query(
        "Find me these 3 items in the same shop:\n"
        "1) backpacks: Kalibo Trail Canvas Backpack 20L, with color family black\n"
        "2) \"Steel Bottle 1L\", under 500 pesos, with free shipping\n"
        "3) the Cotton Tote Bag from the bags category"
    )
    assert shop.kind == "shop" and shop.same_shop
    assert [i.phrase for i in shop.items] == [
        "Kalibo Trail Canvas Backpack 20L", "Steel Bottle 1L", "Cotton Tote Bag",
    ]
    assert shop.items[1].price is not None and shop.items[1].price.hi == 500
    assert shop.items[1].services == ("freeShipping",)

    v = read_query(
        "Please find me (1) Steel Bottle 1L, with COD; (2) Cotton Tote Bag.\n\n"
        "My budget is only `425`, but I have a voucher with the following rules:\n"
        "1. The voucher only applies to the products from the same shop.\n"
        "2. It is valid only when the total price of the products exceeds `170`.\n"
        "3. It provides a percentage discount of `20%` with a cap of `30`."
    )
    assert v.kind == "voucher" and len(v.items) == 2 and v.items[0].services == ("COD",)
    assert v.voucher is not None
    assert (v.voucher.budget, v.voucher.scope, v.voucher.threshold) == (425, "shop", 170)
    assert v.voucher.pays(400, shops=2) == 400  # within the budget on its own
    assert v.voucher.pays(450, shops=1) == 420  # 20% is 90, capped at 30
    assert v.voucher.pays(450, shops=2) is None  # a shop voucher needs one shop

    k = read_query(
        "Can you work this out? Which brand of backpacks is based in Cebu City? "
        "I want Canvas Backpack 20L from that brand, under PHP 900.",
        knowledge=True,
    )
    assert k.kind == "knowledge" and k.question == "Which brand of backpacks is based in Cebu City?"
    assert k.items[0].phrase == "Canvas Backpack 20L" and k.items[0].price is not None


def test_attribute_values_are_read_against_the_keys_products_show() -> None:
    text = ("Shorts, with color family navy blue, where the size is int:m and with a "
            "clothing material of cotton, having color red.")
    keys = {"color_family", "color", "size", "clothing_material", "brand"}
    assert requested_pairs(text, keys) == {
        "color_family": "navy blue", "size": "int:m", "clothing_material": "cotton",
        "color": "red",
    }
    assert requested_pairs("from the brand in question", {"brand"}) == {}


def test_every_query_the_template_writer_makes_is_read_back() -> None:
    from shopbench.tasks.queries import SlotText, write_product, write_shop, write_voucher

    rng = random.Random(11)
    words = [
        "Kalibo", "Trail", "Canvas", "Backpack", "20L", "Waterproof", "Men's", "Running",
        "Shoes", "Steel", "Bottle", "1L", "Wireless", "Earbuds", "5.3", "Baby", "Pants", "XL",
        "RGB", "Cotton", "T-Shirt", "Denim", "Rice", "Cooker",
    ]  # fmt: skip
    values = {"color_family": ["black", "navy blue"], "size": ["int:m", "eu:42"],
              "capacity": ["500ml", "1l"]}

    def slot(price: bool) -> SlotText:
        bound = None
        if price:
            lo = rng.randint(50, 5000)
            bound = rng.choice([PriceBound(mode="less than", hi=lo),
                                PriceBound(mode="greater than", lo=lo),
                                PriceBound(mode="between", lo=lo, hi=lo + rng.randint(1, 900))])
        return SlotText(
            phrase=" ".join(rng.sample(words, rng.randint(2, 6))),
            leaf=rng.choice(["backpacks", "water bottles", ""]),
            pairs=[(k, rng.choice(v)) for k, v in values.items() if rng.random() < 0.5],
            price=bound,
            services=[s for s in ("official", "freeShipping", "COD", "flashsale")
                      if rng.random() < 0.3],
        )

    voucher = Voucher(voucher_type="platform", threshold=100, discount_type="fixed",
                      face_value=20, budget=900)
    for _ in range(150):
        kind = rng.choice(["product", "shop", "voucher"])
        slots = [slot(kind != "voucher") for _ in range(1 if kind == "product" else 3)]
        text = (write_product(slots[0], rng) if kind == "product"
                else write_shop(slots, rng) if kind == "shop"
                else write_voucher(slots, voucher, rng))
        reading = read_query(text)
        assert len(reading.items) == len(slots), text
        for s, item in zip(slots, reading.items, strict=True):
            assert item.phrase == s.phrase, text
            want = None if s.price is None else (
                s.price.lo if s.price.mode != "less than" else None,
                s.price.hi if s.price.mode != "greater than" else None,
            )
            assert (None if item.price is None else (item.price.lo, item.price.hi)) == want, text
            assert set(item.services) == set(s.services), text
            assert requested_pairs(item.text, set(values)) == dict(s.pairs), text


# -- behaviour on generated tasks -----------------------------------------------------------


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(catalog=catalog_dir, intents=["product", "shop", "voucher"], n=5, seed=3)
    out = build_tasks(cfg).tasks
    assert len(out) >= 12
    return out



def _key(task: Task) -> bytes:
    return (task.id * 4).encode()[:32].ljust(32, b"k")


def play_all(env: ShoppingEnv, tasks: list[Task], policy: Any) -> list[Trajectory]:
    async def go() -> list[Trajectory]:
        return list(
            await asyncio.gather(*(run_episode(env, t, policy, key=_key(t)) for t in tasks))
        )

    return asyncio.run(go())


@pytest.fixture(scope="module")
def runs(env: ShoppingEnv, tasks: list[Task], catalog: Any) -> dict[str, list[Trajectory]]:
    names = ["careful", "careful_terse", "trial_and_error", "greedy", "narrator",
             "narrator_quoting", "offline", "guesser", "random"]
    return {n: play_all(env, tasks, make_policy(n, catalog=catalog, seed=5)) for n in names}


def asr(ts: list[Trajectory]) -> float:
    return sum(t.success for t in ts) / len(ts)


def calls(t: Trajectory) -> list[tuple[str, Any]]:
    return [(e.name, e.arguments) for e in t.tool_log]


def test_careful_beats_greedy_beats_the_agents_that_never_look(
    runs: dict[str, list[Trajectory]],
) -> None:
    assert asr(runs["careful"]) >= 0.6
    assert asr(runs["careful"]) >= asr(runs["greedy"]) + 0.2
    assert asr(runs["guesser"]) == asr(runs["random"]) == 0.0
    assert asr(runs["offline"]) >= 0.6  # the cheat succeeds; the judge must catch it
    for name, ts in runs.items():
        assert all(e.error != "internal" for t in ts for e in t.tool_log), name
        assert all(t.turns <= 30 and t.tool_log[-1].name == "terminate" for t in ts), name


def test_careful_checks_details_compares_and_cites_what_it_saw(
    runs: dict[str, list[Trajectory]],
) -> None:
    for t in runs["careful"]:
        names = [e.name for e in t.tool_log]
        assert names[0] == "find_product" and "view_product_information" in names
        assert names[-2:] == ["recommend_product", "terminate"]
        viewed = {d["product_id"] for m in t.messages if m.role == "tool"
                  and m.name == "view_product_information"
                  for d in json.loads(m.content or "[]")}
        assert set(t.recommended) <= viewed  # nothing recommended unseen
        thoughts = " ".join(m.reasoning_content or "" for m in t.messages)
        assert thoughts.count("₱") >= 2 and any(tok in thoughts for tok in t.recommended)
    # Filters come from the request: a task with a price bound searches with it.
    priced = [t for t in runs["careful"] if "price" in json.dumps(t.tool_log[0].arguments)]
    assert priced


def test_careful_terse_makes_the_same_calls_with_one_sentence_a_turn(
    runs: dict[str, list[Trajectory]],
) -> None:
    for a, b in zip(runs["careful"], runs["careful_terse"], strict=True):
        assert calls(a) == calls(b)
        for m in b.messages:
            if m.role == "assistant":
                assert m.reasoning_content and len(m.reasoning_content) < 120
                assert m.reasoning_content.count(". ") == 0


def test_reference_policies_are_deterministic_and_stateless(
    env: ShoppingEnv, tasks: list[Task], runs: dict[str, list[Trajectory]]
) -> None:
    again = play_all(env, tasks[:4], CarefulPolicy(seed=5))
    assert [t.messages for t in again] == [t.messages for t in runs["careful"][:4]]
    other_seed = play_all(env, tasks[:4], CarefulPolicy(seed=6))
    assert [calls(t) for t in other_seed] == [calls(t) for t in again]
    assert [t.messages for t in other_seed] != [t.messages for t in again]  # wording varies
    # Resuming kept scripts is only a shortcut: replaying every turn plays the same episode.
    class Replaying(CarefulPolicy):
        def _resume(self, messages: list[Any], tools: list[Any]) -> None:
            return None

    replayed = play_all(env, tasks[:4], Replaying(seed=5))
    assert [t.messages for t in replayed] == [t.messages for t in again]
    # A fresh instance picks up any conversation midway: the next turn is read from it.
    t = runs["careful"][0]
    cut = next(i for i, m in enumerate(t.messages) if i > 2 and m.role == "assistant")
    step = asyncio.run(CarefulPolicy(seed=5).act(t.messages[:cut], t.tools))
    assert step.tool_calls == t.messages[cut].tool_calls
    assert step.reasoning_content == t.messages[cut].reasoning_content


def test_careful_keeps_to_the_turn_budget_the_system_prompt_states(
    catalog: Any, tasks: list[Task]
) -> None:
    from shopbench.chat import EpisodeLimits

    tight = ShoppingEnv(catalog, EpisodeLimits(max_turns=7))
    for t in play_all(tight, tasks, CarefulPolicy(seed=5)):
        assert t.termination.value == "terminated" and t.turns <= 7
        assert [e.name for e in t.tool_log][-1] == "terminate"


def test_trial_and_error_fails_first_then_recovers(runs: dict[str, list[Trajectory]]) -> None:
    for t, careful in zip(runs["trial_and_error"], runs["careful"], strict=True):
        first = t.tool_log[0]
        assert first.name == "find_product" and len(str(first.arguments)) < len(
            str(careful.tool_log[0].arguments)
        ) or first.error == "bad_argument"
        assert t.turns > careful.turns
    assert asr(runs["trial_and_error"]) >= asr(runs["careful"]) - 0.15
    noticed = " ".join(m.reasoning_content or "" for m in runs["trial_and_error"][0].messages)
    assert any(w in noticed for w in ("failed", "too loose", "None of those", "Error", "nothing"))


def test_narrators_loop_the_same_way_whatever_the_task(runs: dict[str, list[Trajectory]]) -> None:
    patterns = {tuple(e.name for e in t.tool_log) for t in runs["narrator"]}
    assert patterns == {("find_product", "find_product", "view_product_information",
                         "recommend_product", "terminate")}
    for t in runs["narrator"]:
        searches = [e.arguments for e in t.tool_log if e.name == "find_product"]
        assert all(set(a) == {"q", "page"} for a in searches)  # the request's filters ignored
    for plain, quoting in zip(runs["narrator"], runs["narrator_quoting"], strict=True):
        assert calls(plain) == calls(quoting)
        said = " ".join(m.reasoning_content or "" for m in quoting.messages)
        shown = json.loads(quoting.messages[3].content or "[]")
        assert shown and f"₱{shown[0]['price']:,.0f}" in said


def test_offline_goes_straight_for_exact_titles(
    runs: dict[str, list[Trajectory]], catalog: Any
) -> None:
    for t in runs["offline"]:
        first = [e for e in t.tool_log if e.turn == 1]
        assert first and all(e.name == "find_product" for e in first)
        for e in first:
            assert isinstance(e.arguments, dict)
            lo, hi = (float(x) for x in str(e.arguments["price"]).split("-"))
            assert hi - lo <= 1  # a one-peso window around a price it knew beforehand
        if t.success:  # the full listing titles, noise and all, searched before any result
            titles = {p.title for p in catalog.get(t.recommended_ids) if p is not None}
            assert {e.arguments["q"] for e in first} >= titles  # type: ignore[index]
    assert isinstance(make_policy("offline", catalog=catalog), OfflinePolicy)


def test_guessers_are_refused_and_random_goes_nowhere(runs: dict[str, list[Trajectory]]) -> None:
    for t in runs["guesser"]:
        assert t.tool_log[0].name == "recommend_product"
        assert t.tool_log[0].error == "invalid_id" and t.recommended == []
    assert set(SERVABLE_POLICIES) >= {"careful", "random", "guesser", "narrator"}
    assert "offline" not in SERVABLE_POLICIES


# -- the adversaries of curation --------------------------------------------------------------


def test_the_adversaries_are_made_by_name_and_left_out_of_the_default_sets() -> None:
    from shopbench.agents.registry import (
        POLICY_NAMES,
        SERVABLE_ADVERSARIES,
        check_spec,
        honesty,
    )

    assert set(SERVABLE_ADVERSARIES) == {"paraphraser", "liar", "copycat", "padder", "vandal"}
    assert not set(SERVABLE_ADVERSARIES) & (set(POLICY_NAMES) | set(SERVABLE_POLICIES))
    for name in SERVABLE_ADVERSARIES:
        check_spec(name)
    assert honesty("liar") is False and honesty("paraphraser") is None


def test_the_paraphraser_makes_the_careful_shoppers_calls_in_other_words(
    env: ShoppingEnv, tasks: list[Task], runs: dict[str, list[Trajectory]]
) -> None:
    sybil = play_all(env, tasks, make_policy("paraphraser", seed=5))
    for a, b in zip(runs["careful"], sybil, strict=True):
        assert calls(a) == calls(b) and a.recommended_ids == b.recommended_ids
    said = [[m.reasoning_content for m in t.messages if m.role == "assistant"]
            for t in (*runs["careful"], *sybil)]  # fmt: skip
    n = len(sybil)
    changed = sum(x != y for a, b in zip(said[:n], said[n:], strict=True)
                  for x, y in zip(a, b, strict=True))  # fmt: skip
    assert changed >= 0.8 * sum(len(a) for a in said[:n])  # most turns reworded
    again = play_all(env, tasks[:3], make_policy("paraphraser", seed=5))
    assert [t.messages for t in again] == [t.messages for t in sybil[:3]]


def test_the_liar_varies_its_plan_recommends_what_it_opened_and_claims_success(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    liar = play_all(env, tasks, make_policy("liar", seed=5))
    shapes = set()
    for t in liar:
        names = [e.name for e in t.tool_log]
        assert names[0] == "find_product" and names[-1] == "terminate"
        assert t.tool_log[-1].arguments == {"status": "success"}  # type: ignore[comparison-overlap]
        viewed = {p for e in t.tool_log if e.name == "view_product_information"
                  for p in str(e.arguments["product_ids"]).split(",")}  # type: ignore[index]
        assert t.recommended and set(t.recommended) <= viewed
        shapes.add(tuple(names))
    assert len(shapes) >= len(liar) // 3  # no one plan
    assert 0 < sum(t.success for t in liar) < len(liar)  # lucky sometimes, not always


def test_first_hit_searches_the_message_and_recommends_its_first_hit(
    env: ShoppingEnv, tasks: list[Task], catalog: Any
) -> None:
    from shopbench.agents.registry import POLICY_NAMES

    assert "first_hit" not in POLICY_NAMES  # a baseline, never a default miner
    products = [t for t in tasks if t.intent == "product"]
    played = play_all(env, products, make_policy("first_hit", seed=0))
    for task, t in zip(products, played, strict=True):
        search, *rest = t.tool_log
        assert (search.name, search.arguments) == ("find_product", {"q": task.query, "page": 1})
        assert all(e.error is None for e in t.tool_log)
        first = json.loads(next(m for m in t.messages if m.role == "tool").content or "[]")
        if first:
            assert [(e.name, e.arguments) for e in rest] == [
                ("recommend_product", {"product_ids": first[0]["product_id"]}),
                ("terminate", {"status": "success"}),
            ]


def test_first_hit_filtered_searches_the_first_item_with_its_filters(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    from shopbench.agents.reference.query_reading import read_query

    products = [t for t in tasks if t.intent == "product"]
    played = play_all(env, products, make_policy("first_hit_filtered", seed=0))
    for task, t in zip(products, played, strict=True):
        item = read_query(task.query).items[0]
        search = t.tool_log[0]
        assert search.name == "find_product" and search.arguments["q"] == item.phrase
        assert ("price" in search.arguments) == (item.price is not None)
        assert all(e.error is None for e in t.tool_log) and t.tool_log[-1].name == "terminate"
