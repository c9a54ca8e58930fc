"""The outcome grader against reward specs from ShoppingBench's own task files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shopbench.catalog.schema import Product
from shopbench.outcome.budget import check_budget
from shopbench.outcome.errors import EmbeddingModelMissing
from shopbench.outcome.grader import grade, grade_slot
from shopbench.outcome.spec import PriceBound, Slot
from shopbench.outcome.title import EmbeddingTitleMatcher, LexicalTitleMatcher, title_tokens
from shopbench.tasks.io import read_tasks
from shopbench.tasks.model import Task
from shopbench.tasks.shoppingbench_format import task_from_record


@pytest.fixture(scope="module")
def product_tasks(shoppingbench_data: Path) -> list[Task]:
    return read_tasks(shoppingbench_data / "product_test.jsonl", strict=True).tasks


@pytest.fixture(scope="module")
def voucher_tasks(shoppingbench_data: Path) -> list[Task]:
    return read_tasks(shoppingbench_data / "voucher_test.jsonl", strict=True).tasks


def satisfying(slot: Slot, pid: str = "900", shop: str = "77", price: float = 100.0) -> Product:
    """A product other than the target that meets every constraint of `slot` at `price`."""
    attributes: dict[str, list[str]] = {}
    for attr in slot.attributes or []:
        for k, vs in attr.items():
            attributes.setdefault(k, []).extend(vs)
    sku = {str(i): dict(o) for i, o in enumerate(slot.sku_options or [])}
    return Product(
        product_id=pid,
        shop_id=shop,
        category="A > B > C",
        title=slot.title[0],
        price=price,
        sku_options=sku,
        attributes=attributes,
        service=list(slot.service or []),
    )


def hits(outcome_slot) -> dict[str, bool]:  # type: ignore[no-untyped-def]
    return {f"{h.kind}:{h.name}:{h.expected}": h.hit for h in outcome_slot.constraints}


# --- product tasks: title, SKU versus attributes, price modes, services -------------------


def test_jeans_spec_full_partial_and_exact_target(product_tasks: list[Task]) -> None:
    task = product_tasks[3]  # women's jeans: size eu:30, 4 attributes, price > 114
    slot = task.reward[0]
    assert slot.sku_options == [{"size": "eu:30"}] and len(slot.attributes or []) == 4
    good = satisfying(slot, price=300)
    out = grade(task, [good])
    assert out.success and out.rule_scores == [1.0] and out.reason is None
    assert out.slots[0].n_constraints == 7 and not out.slots[0].exact_target

    # Price one cent under the "greater than" bound: one of 7 constraints misses.
    cheap = good.model_copy(update={"price": 113.99})
    out = grade(task, [cheap])
    assert not out.success
    assert out.rule_scores == [pytest.approx(6 / 7)]
    assert "price greater than" in (out.reason or "")

    # The exact target scores 1 even when its own data no longer meets the spec.
    target = cheap.model_copy(update={"product_id": slot.product_id, "attributes": {}})
    out = grade(task, [target])
    assert out.success and out.rule_scores == [1.0] and out.slots[0].exact_target
    assert out.slots[0].n_hit < out.slots[0].n_constraints


def test_sku_pairs_may_match_attributes_and_vice_versa(product_tasks: list[Task]) -> None:
    task = product_tasks[3]
    slot = task.reward[0]
    base = satisfying(slot, price=300)
    # The size sits in the attributes instead of a SKU option; an attribute sits in a SKU.
    attrs = dict(base.attributes)
    waist = attrs.pop("waist_type")
    swapped = base.model_copy(
        update={
            "sku_options": {"1": {"waist_type": waist[0]}},
            "attributes": {**attrs, "size": ["eu:30"]},
        }
    )
    out = grade(task, [swapped])
    assert out.success, out.reason
    assert out.slots[0].best_sku == "1"


def test_best_sku_option_counts_and_pairs_do_not_mix_across_options(
    voucher_tasks: list[Task],
) -> None:
    wanted = [{"size": "39", "color_family": "sea blue"}]
    task = next(t for t in voucher_tasks if t.reward[1:] and t.reward[1].sku_options == wanted)
    slot = task.reward[1]  # title, size 39 + sea blue, activity_type running
    p = satisfying(slot).model_copy(
        update={
            "sku_options": {
                "0": {"size": "39", "color_family": "black"},
                "1": {"size": "40", "color_family": "sea blue"},
                "2": {"size": "41", "color_family": "red"},
            }
        }
    )
    g = grade_slot(slot, p)
    assert g.n_constraints == 4 and g.n_hit == 3 and g.rule_score == 0.75
    assert g.best_sku == "0"  # first option reaching the best count
    both = p.model_copy(update={"sku_options": {**p.sku_options, "3": dict(wanted[0])}})
    g = grade_slot(slot, both)
    assert g.rule_score == 1.0 and g.best_sku == "3"
    # The best option is judged together with the attributes: size 39 as an attribute
    # makes option "1" (size 40, sea blue) the one that completes the spec.
    sized = p.model_copy(update={"attributes": {**p.attributes, "size": ["39"]}})
    g = grade_slot(slot, sized)
    assert g.rule_score == 1.0 and g.best_sku == "1"
    # Keys and values match exactly: another case is another value.
    shouting = p.model_copy(
        update={"sku_options": {"0": {"size": "39", "color_family": "Sea Blue"}}}
    )
    g = grade_slot(slot, shouting)
    assert hits(g)["sku:color_family:sea blue"] is False
    assert [h.actual for h in g.constraints if h.name == "color_family"] == ["Sea Blue"]


def test_multi_value_attribute_needs_every_value() -> None:
    slot = Slot(title=["Plain Tee"], attributes=[{"color_family": ["red", "blue"]}])
    p = Product(
        product_id="1",
        shop_id="1",
        category="A",
        title="Plain Tee",
        price=1,
        attributes={"color_family": ["red"]},
    )
    g = grade_slot(slot, p)
    assert (g.n_constraints, g.n_hit) == (3, 2)


@pytest.mark.parametrize(
    ("bound", "price", "hit"),
    [
        (PriceBound(mode="less than", lo=0, hi=200), 200.0, True),
        (PriceBound(mode="less than", lo=0, hi=200), 200.01, False),
        (PriceBound(mode="greater than", lo=375), 375.0, True),
        (PriceBound(mode="greater than", lo=375), 374.99, False),
        (PriceBound(mode="between", lo=75, hi=95), 75.0, True),
        (PriceBound(mode="between", lo=75, hi=95), 95.0, True),
        (PriceBound(mode="between", lo=75, hi=95), 95.5, False),
        (PriceBound(mode="between", lo=75, hi=95), 74.0, False),
    ],
)
def test_price_modes_are_inclusive(bound: PriceBound, price: float, hit: bool) -> None:
    slot = Slot(title=["Rubber Plug"], price=[bound])
    p = Product(product_id="1", shop_id="1", category="A", title="Rubber Plug", price=price)
    g = grade_slot(slot, p)
    assert hits(g)[f"price:price {bound.mode}:{g.constraints[1].expected}"] is hit
    assert g.rule_score == (1.0 if hit else 0.5)


def test_between_bound_from_the_product_test_file(product_tasks: list[Task]) -> None:
    task = next(
        t for t in product_tasks if any(b.mode == "between" for b in t.reward[0].price or [])
    )
    bound = (task.reward[0].price or [])[0]
    assert bound.lo is not None and bound.hi is not None
    at_hi = grade(task, [satisfying(task.reward[0], price=bound.hi)])
    over = grade(task, [satisfying(task.reward[0], price=bound.hi + 1)])
    assert at_hi.success and not over.success


def test_services(product_tasks: list[Task]) -> None:
    task = product_tasks[5]  # building blocks: flashsale, recommended age, price > 35
    slot = task.reward[0]
    assert slot.service == ["flashsale"]
    good = satisfying(slot, price=50)
    assert grade(task, [good]).success
    other = good.model_copy(update={"service": ["COD", "official"]})
    out = grade(task, [other])
    assert not out.success and out.rule_scores == [pytest.approx(3 / 4)]
    assert hits(out.slots[0])["service:service:flashsale"] is False


def test_title_of_another_kind_of_product_misses(product_tasks: list[Task]) -> None:
    task = product_tasks[2]  # chili powder, bag, single pack, price > 375
    slot = task.reward[0]
    noisy = satisfying(slot, price=400).model_copy(
        update={"title": "Original Hyco Chili Powder 1 kilo [Sealed] Hot Sale COD"}
    )
    assert grade(task, [noisy]).success
    kind = noisy.model_copy(update={"title": "Hyco Garlic Granules Seasoning Jar"})
    out = grade(task, [kind])
    assert not out.success and hits(out.slots[0])[f"title:title:{slot.title[0]}"] is False
    assert out.rule_scores == [pytest.approx(3 / 4)]


def test_product_task_grades_first_id_only(product_tasks: list[Task]) -> None:
    task = product_tasks[0]
    good = satisfying(task.reward[0])
    assert grade(task, [good, None]).success
    assert not grade(task, [None, good]).success
    out = grade(task, [])
    assert not out.success and out.rule_scores == [0.0]
    assert out.reason == "no product recommended"


# --- shop tasks -----------------------------------------------------------------------


SHOP_RECORD = {  # the shape of ShoppingBench's shop test file (two of its slots)
    "query": "Find a shop that offers a battery spring contact plate and rubber plugs.",
    "reward": [
        {
            "product_id": "4098726003",
            "title": ["Speed 5PCS AA Battery Negative And Positive Coils Spring Contact Plate"],
            "sku_options": [{"color_family": "04"}],
        },
        {
            "product_id": "3971631378",
            "title": ["Speed 100Pcs Set Double Rubber Plug For Frameless Glasses"],
            "price": [{"between": [75, 95]}],
        },
    ],
}


def test_shop_needs_every_slot_and_one_shop() -> None:
    task = task_from_record(SHOP_RECORD)
    assert task.intent == "shop"
    a = satisfying(task.reward[0], pid="1", shop="5", price=10)
    b = satisfying(task.reward[1], pid="2", shop="5", price=80)
    assert grade(task, [a, b]).success
    assert grade(task, [a, b, a]).success  # extra ids are ignored
    two_shops = grade(task, [a, b.model_copy(update={"shop_id": "6"})])
    assert not two_shops.success and two_shops.rule_scores == [1.0, 1.0]
    assert two_shops.shops == 2 and "2 shops" in (two_shops.reason or "")
    missing = grade(task, [a])
    assert not missing.success and missing.rule_scores == [1.0, 0.0]
    assert missing.mean_rule == 0.5 and "slot(s) [2]" in (missing.reason or "")
    dup = grade(task, [a, a])  # duplicates are graded as given: `a` fails slot 2
    assert not dup.success and dup.rule_scores[0] == 1.0 and dup.rule_scores[1] < 1


# --- voucher tasks: the budget arithmetic ---------------------------------------------


def priced(task: Task, prices: list[float], shops: list[str] | None = None) -> list[Product]:
    shops = shops or ["5"] * len(prices)
    return [
        satisfying(s, pid=str(100 + i), shop=shops[i], price=prices[i])
        for i, s in enumerate(task.reward)
    ]


def test_voucher_exactly_at_threshold(voucher_tasks: list[Task]) -> None:
    task = voucher_tasks[3]  # platform, threshold 473 > budget 398, fixed 233, 3 slots
    v = task.voucher
    assert v is not None and (v.threshold, v.face_value, v.budget) == (473, 233, 398)
    at = grade(task, priced(task, [200, 200, 73]))
    assert at.success and at.budget is not None
    assert at.budget.applies and at.budget.total == 473 and at.budget.discounted_total == 240
    below = grade(task, priced(task, [200, 200, 72]))
    assert not below.success and below.budget is not None and not below.budget.applies
    assert "below the threshold" in below.budget.reason


def test_voucher_budget_off_by_one(voucher_tasks: list[Task]) -> None:
    task = voucher_tasks[3]
    ok = grade(task, priced(task, [300, 300, 31]))  # 631 - 233 = 398 = budget
    assert ok.success and ok.budget is not None and ok.budget.discounted_total == 398
    over = grade(task, priced(task, [300, 300, 32]))  # 399
    assert not over.success and over.rule_scores == [1.0, 1.0, 1.0]
    assert over.budget is not None and over.budget.applies and not over.budget.holds
    assert "still over" in (over.reason or "")


def test_shop_voucher_across_two_shops(voucher_tasks: list[Task]) -> None:
    task = voucher_tasks[9]  # shop voucher, threshold 561, fixed 194, budget 463, 2 slots
    v = task.voucher
    assert v is not None and (v.voucher_type, v.budget) == ("shop", 463)
    assert grade(task, priced(task, [300, 300])).success  # 600 - 194 = 406
    split = grade(task, priced(task, [300, 300], ["5", "6"]))
    assert not split.success and split.budget is not None and not split.budget.applies
    assert "one shop, got 2" in split.budget.reason
    # Within budget the voucher is not needed, so two shops are fine.
    assert grade(task, priced(task, [263, 200], ["5", "6"])).success
    assert not grade(task, priced(task, [264, 200], ["5", "6"])).success


def test_percentage_voucher_cap_binding(voucher_tasks: list[Task]) -> None:
    task = voucher_tasks[6]  # platform, 34% capped at 60, threshold 65, budget 293
    v = task.voucher
    assert v is not None and (v.discount, v.cap, v.budget) == (0.34, 60, 293)
    at = grade(task, priced(task, [200, 153]))  # 34% would be 120, the cap allows 60
    assert at.success and at.budget is not None
    assert at.budget.capped and at.budget.discounted_total == 293
    over = grade(task, priced(task, [200, 154]))  # 294: over, although 34% off would fit
    assert not over.success and over.budget is not None and over.budget.capped


def test_percentage_voucher_below_cap(voucher_tasks: list[Task]) -> None:
    task = voucher_tasks[18]  # shop, 41% capped at 4362, threshold 6649, budget 4638
    n = len(task.reward)
    out = grade(task, priced(task, [7000 / n] * n))
    assert out.success and out.budget is not None and not out.budget.capped
    assert out.budget.discounted_total == pytest.approx(7000 * 0.59)


def test_voucher_with_a_missing_slot_fails_the_budget(voucher_tasks: list[Task]) -> None:
    task = voucher_tasks[3]
    prods = priced(task, [10, 10, 10])
    out = grade(task, [prods[0], None, prods[2]])
    assert not out.success and out.budget is not None and not out.budget.complete
    assert check_budget(task.voucher, prods).holds  # type: ignore[arg-type]


# --- knowledge tasks ------------------------------------------------------------------


WEB_RECORD = {
    "query": "Which instrument did Alec Aitken play? I would like a horsetail bow for it.",
    "Knowledge_Attribute": "Violin",
    "reward": {
        "product_id": "3706669986",
        "shop_id": "3450032",
        "title": "Heart String Violin Bows Full Size Handmade Horsetail Hair Violin Bow",
        "description": "Bow for the violin.",
        "price": 256.0,
    },
}


def test_knowledge_key_attribute_and_strict_title() -> None:
    task = task_from_record(WEB_RECORD, "web")
    title = WEB_RECORD["reward"]["title"]  # type: ignore[index]
    p = Product(product_id="5", shop_id="5", category="A", title=title, price=200)
    assert grade(task, [p]).success
    desc_only = p.model_copy(
        update={
            "title": "Heart String Bow Full Size Carbon Fiber Horsetail Hair",
            "description": "Fits any VIOLIN.",
        }
    )
    out = grade(task, [desc_only])
    kw = out.slots[0].constraints[0]
    assert kw.hit and kw.actual == "description"
    # Close but under the knowledge threshold (0.8), above the product one (0.6).
    assert out.slots[0].constraints[1].score == pytest.approx(14 / 18)
    assert not out.success and out.rule_scores == [0.5]
    absent = p.model_copy(update={"title": "Heart String Cello Bow Full Size Horsetail Hair"})
    out = grade(task, [absent])
    assert not out.success and out.slots[0].constraints[0].hit is False
    exact = absent.model_copy(update={"product_id": "3706669986"})
    assert grade(task, [exact]).success


# --- title matchers -------------------------------------------------------------------


def test_lexical_matcher_rule() -> None:
    m = LexicalTitleMatcher()
    target = "Pure Leather Belt for Men"
    assert m.similarity(target, target) == 1.0
    for noisy in (
        "Original Pure Leather Belt for Men COD",
        "Hot Sale Pure Leather Belts for Men Ready Stock",
        "2pcs Pure Leather Belt for Men [Sealed]",
        "PURE LEATHER BELT FOR MEN 3 pcs",
    ):
        assert m.match(noisy, target).score == 1.0, noisy
    assert m.match("Pure Leather Belt for Men Brown", target).score == pytest.approx(8 / 9)
    other = m.match("Pure Leather Wallet for Women Card Holder", target)
    assert not other.hit and other.score == pytest.approx(0.4)
    assert title_tokens("Stock Pot Ready Stock") == {"stock", "pot"}
    assert m.similarity("中文标题", "另一个标题") == 0.0


def test_embedding_matcher_thresholds_and_cache() -> None:
    vectors = {"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.9, 0.43588989]}
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return [vectors[t] for t in texts]

    m = EmbeddingTitleMatcher(encode)
    ab = m.match("a", "b")  # cosine 0.6
    assert ab.score == pytest.approx(0.6) and ab.hit
    assert not m.match("a", "b", knowledge=True).hit
    assert m.match("a", "c", knowledge=True).hit  # cosine 0.9
    assert m.similarity("a", "a") == pytest.approx(1.0)
    assert calls == [["a", "b"], ["c"]]  # each text encoded once

    slot = Slot(title=["b"])
    p = Product(product_id="1", shop_id="1", category="A", title="a", price=1)
    assert grade_slot(slot, p, m).rule_score == 1.0
    strict = EmbeddingTitleMatcher(encode, threshold=0.7)
    assert grade_slot(slot, p, strict).rule_score == 0.0


def test_embedding_matcher_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbeddingModelMissing, match=r"shopbench\[embed\]"):
        EmbeddingTitleMatcher.from_pretrained()
