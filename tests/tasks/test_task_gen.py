"""Task generation on the 2,000-product fixture: valid, solvable, split, deterministic."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shopbench.outcome.budget import check_budget
from shopbench.outcome.grader import DEFAULT_MATCHER, grade
from shopbench.tasks.generate import BuildConfig, BuildResult, build_tasks
from shopbench.tasks.intent_registry import intent_specs
from shopbench.tasks.io import format_task, read_tasks, write_tasks
from shopbench.tasks.model import Task
from shopbench.tasks.queries import attribute_label, product_phrase
from shopbench.tasks.satisfy import TitleScreen, slot_passes
from shopbench.tasks.split import Rotation, SplitRule, target_groups
from shopbench.tasks.validate import check_task, findable, validate_file

# The intents whose query states the whole task (a clarify task holds some of it back).
INTENTS = [s.name for s in intent_specs() if not s.shape.hidden]


@pytest.fixture(scope="module")
def built(catalog_dir: Path) -> BuildResult:
    return build_tasks(BuildConfig(catalog=catalog_dir, intents=INTENTS, n=30, seed=5))


def _by_intent(result: BuildResult, intent: str) -> list[Task]:
    return [t for t in result.tasks if t.intent == intent]


def test_every_intent_gives_its_tasks_and_each_validates(built: BuildResult, catalog: Any) -> None:
    assert [(r.intent, r.produced) for r in built.reports] == [(i, 30) for i in INTENTS]
    rule = SplitRule()
    for task in built.tasks:
        assert check_task(task, catalog.index, rule) == [], task.id
        assert task.split == "live" and task.cluster and task.satisfying
        assert grade(task, catalog.get(task.targets)).success


def test_the_whole_file_validates_and_a_broken_task_is_caught(
    built: BuildResult, catalog: Any, tmp_path: Path
) -> None:
    path = tmp_path / "tasks.jsonl"
    write_tasks(path, built.tasks)
    report = validate_file(path, catalog.index)
    assert report.ok and report.valid == report.tasks == 120
    task = _by_intent(built, "voucher")[0]
    assert task.voucher is not None
    broke = task.model_copy(
        update={"id": "broken", "voucher": task.voucher.model_copy(update={"budget": 1.0})}
    )
    other = _by_intent(built, "product")[0]
    lost = other.model_copy(update={"id": "lost", "satisfying": [["999999999999"]]})
    edited = other.model_copy(update={"id": "edited", "query": "Show me something nice."})
    write_tasks(path, [broke, lost, edited])
    bad = validate_file(path, catalog.index)
    assert not bad.ok and bad.valid == 0
    text = "\n".join(bad.problems)
    assert "broken: target fails its own grader: budget" in text
    assert "lost: slot 1: target missing from its satisfying set" in text
    assert "lost: slot 1: satisfying id 999999999999 not in the catalog" in text
    assert "edited: slot 1: its phrase" in text and "is not in the query" in text


def test_same_seed_same_bytes_any_workers_and_another_seed_differs(catalog_dir: Path) -> None:
    def lines(seed: int, workers: int) -> list[str]:
        cfg = BuildConfig(catalog=catalog_dir, intents=INTENTS, n=6, seed=seed,
                          workers=workers, chunk=4)  # fmt: skip
        return [format_task(t) for t in build_tasks(cfg).tasks]

    one = lines(9, 1)
    assert one == lines(9, 2)  # two runs, one and two worker processes: the same bytes
    other = lines(10, 1)
    assert {t.split('"query":')[1][:60] for t in one}.isdisjoint(
        {t.split('"query":')[1][:60] for t in other}
    )


def test_targets_are_findable_from_their_own_words(built: BuildResult, catalog: Any) -> None:
    for task in built.tasks:
        for i, slot in enumerate(task.reward):
            assert findable(catalog.index, task, i)
            # the words the query names the item with are recorded, and shorter than its title
            assert task.phrases is not None and task.phrases[i] in task.query
            assert len(task.phrases[i].split()) <= len(product_phrase(slot.title[0]).split())
    # Most items are described in fewer words than their title's, not named by it.
    slots = [(t.phrases or [""])[i] != product_phrase(s.title[0], drop=t.knowledge_attribute or "")
             for t in built.tasks for i, s in enumerate(t.reward)]  # fmt: skip
    assert sum(slots) / len(slots) > 0.6


def test_queries_state_every_graded_constraint(built: BuildResult) -> None:
    for task in built.tasks:
        if task.intent == "knowledge":
            continue
        for slot in task.reward:
            for option in slot.sku_options or []:
                for k, v in option.items():
                    assert re.search(
                        rf"{re.escape(attribute_label(k))}(?::| is| of)? "
                        rf"{re.escape(v)}",
                        task.query,
                    ), (k, v, task.query)
            for attr in slot.attributes or []:
                for k, vs in attr.items():
                    for v in vs:
                        assert f"{attribute_label(k)}" in task.query and v in task.query
            for b in slot.price or []:
                for n in (b.lo, b.hi):
                    if n is not None:
                        number = rf"(?:{int(n):,}|{int(n)})"
                        assert re.search(rf"(?<!\d)(?<!\d,){number}(?!\d)(?!,\d)",
                                         task.query), (n, task.query)  # fmt: skip
            names = {"official": "official|LazMall", "freeShipping": "free shipping|free delivery",
                     "COD": "COD|cash on delivery", "flashsale": "flash sale|LazFlash"}  # fmt: skip
            for s in slot.service or []:
                assert re.search(names[s], task.query), (s, task.query)


def test_satisfying_sets_hold_only_passing_products_and_miss_almost_none(
    built: BuildResult, catalog: Any
) -> None:
    everything = [p for batch in catalog.iter_products() for p in batch]
    found = listed = 0
    for task in _by_intent(built, "product") + _by_intent(built, "shop")[:10]:
        for i, slot in enumerate(task.reward):
            ids = task.satisfying[i]  # type: ignore[index]
            assert ids[0] == slot.product_id
            for p in catalog.get(ids):
                assert slot_passes(task, i, p)
            screen = TitleScreen(DEFAULT_MATCHER, slot.title, knowledge=False)
            full = {
                p.product_id
                for p in everything
                if screen.may_match(p.title)
                and slot_passes(task, i, p)
                and not SplitRule().is_heldout(p.group_key)
            }
            assert set(ids) <= full
            found += len(ids)
            listed += len(full)
    assert found >= 0.97 * listed


def test_screen_never_rejects_a_title_the_matcher_accepts(catalog: Any) -> None:
    everything = [p.title for batch in catalog.iter_products() for p in batch]
    for target in everything[::97]:
        for knowledge in (False, True):
            screen = TitleScreen(DEFAULT_MATCHER, [target], knowledge=knowledge)
            for title in everything[::7]:
                if DEFAULT_MATCHER.match(title, target, knowledge=knowledge).hit:
                    assert screen.may_match(title) and screen.matches(title), (title, target)


def test_shop_tasks_come_from_one_shop_with_distinct_products(
    built: BuildResult, catalog: Any
) -> None:
    counts = set()
    for task in _by_intent(built, "shop"):
        products = catalog.get(task.targets)
        assert len({p.shop_id for p in products}) == 1
        assert len({p.base_id for p in products}) == len(products)
        counts.add(len(products))
    assert counts == {2, 3, 4}


def test_voucher_arithmetic_follows_shoppingbench(built: BuildResult, catalog: Any) -> None:
    kinds = set()
    for task in _by_intent(built, "voucher"):
        v = task.voucher
        assert v is not None
        products = catalog.get(task.targets)
        total = sum(p.price for p in products)
        assert 0.1 * total - 1 <= v.threshold <= 0.9 * total + 1
        assert v.price_after_voucher is not None and v.budget >= v.price_after_voucher
        assert v.budget <= v.price_after_voucher * 1.1 + 1
        if v.discount_type == "fixed":
            assert v.face_value is not None and 0.1 * v.threshold - 1 <= v.face_value
            assert v.face_value <= 0.5 * v.threshold + 1
        else:
            assert v.discount is not None and 0.1 <= v.discount <= 0.5 and v.cap is not None
        if v.voucher_type == "shop":
            assert len(products) >= 2 and len({p.shop_id for p in products}) == 1
        assert check_budget(v, products).holds
        assert not any(s.price for s in task.reward)  # the budget bounds the prices
        assert task.query.split("\n\n")[-1].startswith("My budget is only `")
        kinds.add((v.voucher_type, v.discount_type))
    assert len(kinds) == 4


def test_knowledge_tasks_hide_an_answer_the_corpus_gives(built: BuildResult, catalog: Any) -> None:
    facts = {f.value.lower() for page in catalog.knowledge() for f in page.facts}
    kinds = set()
    for task in _by_intent(built, "knowledge"):
        key = task.knowledge_attribute or ""
        (target,) = catalog.get(task.targets)
        assert key.lower() in (target.title + " " + target.description).lower()
        assert key.lower() in facts
        assert key.lower() not in task.query.lower()  # the answer must be looked up
        kinds.add(task.meta["knowledge_kind"])
    assert kinds == {"brand", "material"}


def test_heldout_split_and_rotation_and_exclusions(catalog_dir: Path, catalog: Any) -> None:
    rule = SplitRule()
    held = build_tasks(BuildConfig(catalog=catalog_dir, intents=INTENTS, n=8, seed=2,
                                   split="heldout"))  # fmt: skip
    assert held.tasks and all(t.split == "heldout" for t in held.tasks)
    for t in held.tasks:
        assert all(rule.is_heldout(p.group_key) for p in catalog.get(t.targets))

    rotation = Rotation(epoch=5, n_buckets=4)
    live = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product", "voucher"], n=10,
                                   seed=2, epoch=5, n_buckets=4))  # fmt: skip
    for t in live.tasks:
        assert t.meta["bucket"] == rotation.current == 1
        assert all(rotation.is_current(p.group_key) for p in catalog.get(t.targets))
        for ids in t.satisfying or []:
            assert not any(rule.is_heldout(p.group_key) for p in catalog.get(ids))

    forced, unplaced = target_groups(live.tasks, catalog)
    assert forced and unplaced == 0
    again = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product", "voucher"], n=10,
                                    seed=2, epoch=5, forced_heldout=frozenset(forced)))  # fmt: skip
    for t in again.tasks:
        assert not any(p.group_key in forced for p in catalog.get(t.targets))
        for ids in t.satisfying or []:
            assert not any(p.group_key in forced for p in catalog.get(ids))


def test_an_unsupported_intent_is_reported_with_its_reason_not_retried_forever(
    catalog_dir: Path, catalog: Any, tmp_path: Path
) -> None:
    groups = {p.group_key for batch in catalog.iter_products() for p in batch}
    none = build_tasks(BuildConfig(catalog=catalog_dir, intents=INTENTS, n=50, seed=1,
                                   forced_heldout=frozenset(groups)))  # fmt: skip
    assert none.tasks == []
    for r in none.reports:
        assert r.produced == 0 and r.attempts == 0
        assert r.unsupported == "no product is eligible as a target in the live split"

    # A catalog imported without a knowledge corpus cannot ask questions.
    from shopbench.catalog.importer import import_catalog

    src = tmp_path / "products.jsonl"
    rows = [p.model_dump_json() for p in next(catalog.iter_products(batch_size=400))]
    src.write_text("\n".join(rows) + "\n")
    import_catalog(src, tmp_path / "imported")
    got = build_tasks(BuildConfig(catalog=tmp_path / "imported", intents=["knowledge", "product"],
                                  n=5, seed=1))  # fmt: skip
    know, prod = got.reports
    assert know.produced == 0 and know.attempts == 0
    assert know.unsupported == "the catalog has no knowledge corpus (no facts to ask about)"
    assert prod.produced == 5


def test_hopeless_drafts_stop_after_one_unit_with_the_reason(
    catalog_dir: Path, catalog: Any
) -> None:
    # Hold out every group of a brand the corpus can ask about: questions remain, but no
    # live product carries an answer, so every knowledge draft fails. Generation gives up
    # after the first unit instead of trying every index.
    brands = {f.entity for p in catalog.knowledge() for f in p.facts if f.entity_kind == "brand"}
    brands |= {f.value for p in catalog.knowledge() for f in p.facts
               if f.entity_kind == "line" and f.attribute == "brand"}  # fmt: skip
    forced = {p.group_key for b in catalog.iter_products() for p in b if p.brand in brands}
    cfg = BuildConfig(catalog=catalog_dir, intents=["knowledge"], n=500, seed=1, chunk=10,
                      max_attempts=3, forced_heldout=frozenset(forced))  # fmt: skip
    res = build_tasks(cfg)
    (r,) = res.reports
    assert r.produced == 0 and r.attempts == 30
    assert r.unsupported is not None
    assert "no eligible product carries the answer" in r.unsupported


def test_read_back_tasks_equal_the_generated_ones(built: BuildResult, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_tasks(path, built.tasks)
    assert read_tasks(path).tasks == built.tasks


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "tasks", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_cli_builds_validates_and_rejects_bad_input_in_one_line(
    catalog_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "t.jsonl"
    # The four ShoppingBench intents: the 2,000-product catalog has too few look-alike
    # listings to give every clarify index a task (tests/tasks/test_clarify_tasks.py).
    built = _cli("build", "--catalog", str(catalog_dir), "--n", "3", "--seed", "1",
                 "--intents", "product,shop,voucher,knowledge", "--out", str(out))  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert "knowledge: 3/3 tasks" in built.stdout and "wrote 12 tasks" in built.stdout
    checked = _cli("validate", "--catalog", str(catalog_dir), str(out))
    assert checked.returncode == 0 and "12/12 tasks valid; all valid" in checked.stdout

    for args, message in [
        (["--n", "0"], "error: --n: Input should be greater than or equal to 1, got 0"),
        (["--n", "2", "--intents", "product,bogus"], "error: unknown intent 'bogus'"),
        (["--n", "2", "--split", "test"], "error: --split: Input should be 'live' or 'heldout'"),
        (["--n", "2", "--window", "10"], "error: --window: Input should be greater than or"),
        (["--n", "2", "--split", "heldout", "--epoch", "1"],
         "error: epoch applies to the live split only"),
    ]:
        bad = _cli("build", "--catalog", str(catalog_dir), "--out", str(out), *args)
        assert bad.returncode == 2 and bad.stderr.startswith(message), bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    missing = _cli("build", "--catalog", str(tmp_path / "nope"), "--n", "1", "--out", str(out))
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"error: {tmp_path / 'nope'}: catalog directory does not exist"


def test_pool_finds_rows_by_id_and_screens_pairs_it_stores(catalog: Any) -> None:
    from shopbench.tasks.pool import Pool

    pool = Pool(catalog, lambda group: True)
    assert pool.load_pair_text(catalog) and len(pool) == len(catalog)
    products = next(catalog.iter_products(batch_size=300))
    rows = pool.rows_of([p.product_id for p in products] + ["1", "x", "0" + products[0].product_id])
    assert rows[-3:] == [None, None, None]
    for p, row in zip(products, rows, strict=False):
        assert row is not None and pool.product_id(row) == p.product_id
        assert pool.group_of(row) == p.group_key
        own = [(k, v) for k, vs in p.attributes.items() for v in vs]
        own += [(k, v) for o in p.sku_options.values() for k, v in o.items()]
        assert pool.screen_pairs([row], own) == [True]
        assert pool.screen_pairs([row, row], [("color_family", "no such colour")]) == [False] * 2
