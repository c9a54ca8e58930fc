"""Contamination: the normaliser, the weighted comparison, curation dropping lightly edited
test queries with the rule named, and `shopbench bench contamination`."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.registry import make_policy
from shopbench.archive.shards import write_shard
from shopbench.archive.signing import sign_trajectory
from shopbench.cli import main
from shopbench.curation.config import load_config
from shopbench.curation.contamination import TestSet, normalise
from shopbench.curation.curated import read_curated
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.score import with_judgement
from shopbench.tasks.intent_registry import intent_names
from shopbench.tasks.io import read_tasks
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from template.signing import HotkeySigner, LocalWallet

SIGNER = HotkeySigner.from_wallet(LocalWallet.derive("contamination-test"))
PARAMS = load_config().contamination
THRESHOLD = PARAMS.threshold


# -- the normaliser ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hidden",
    ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u2063"],
    ids=["zwsp", "zwnj", "zwj", "word-joiner", "bom", "soft-hyphen", "lrm", "invisible-sep"],
)
def test_invisible_characters_inside_words_vanish(hidden: str) -> None:
    assert normalise(f"wire{hidden}less ear{hidden}buds") == "wireless earbuds"


@pytest.mark.parametrize(
    ("disguised", "plain"),
    [
        ("Ѕhоеѕ fоr wоmеn", "shoes for women"),  # Cyrillic small and capital
        ("РАСКАGЕ ВОХ", "package box"),  # Cyrillic capitals only
        ("ρhοnε cαsε", "phone case"),  # Greek small letters
        ("ΗΕΑΤ ΤΑΡΕ", "heat tape"),  # Greek capitals
        ("ｌｅａｔｈｅｒ ＢＥＬＴ ｕｎｄｅｒ ￥１，０００", "leather belt under 1000"),  # fullwidth
        ("Crème ЅÉRUМ", "creme serum"),  # accents, on look-alikes too
        ("STRASSE straße", "strasse strasse"),  # case folding
    ],
)
def test_look_alikes_fullwidth_accents_and_case_fold_to_latin(disguised: str, plain: str) -> None:
    assert normalise(disguised) == plain


@pytest.mark.parametrize(
    "price",
    ["1,000", "1 000", "1000.00", "1,000.00", "₱1,000", "PHP 1000", "1000 pesos",
     "$1,000.00", "01000"],
)  # fmt: skip
def test_every_way_of_writing_a_number_is_one_form(price: str) -> None:
    assert normalise(f"under {price} please") == "under 1000 please"


def test_punctuation_separates_words_and_apostrophes_join_them() -> None:
    assert normalise("women’s heavy-duty 12inch (new!) bags; ok?") == (
        "womens heavy duty 12 inch new bags ok"
    )
    assert normalise("1.50 and 2.0 and 3,5") == "1.5 and 2 and 3 5"


# -- the comparison ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def voucher(shoppingbench_data: Path) -> TestSet:
    return TestSet.load(shoppingbench_data / "voucher_test.jsonl")


@pytest.fixture(scope="module")
def product(shoppingbench_data: Path) -> TestSet:
    return TestSet.load(shoppingbench_data / "product_test.jsonl")


def test_word_order_does_not_hide_a_test_query(product: TestSet) -> None:
    q = product.queries[3]  # "Show me women's jeans in size eu:30 with a baggy fit, ..."
    clauses = ", ".join(reversed(q.rstrip(".").split(", ")))
    ws = q.split()
    windows = " ".join(w for i in range(0, len(ws), 3) for w in reversed(ws[i : i + 3]))
    for edited in (clauses, windows):
        assert edited != q
        share, where = product.contained(edited, THRESHOLD)
        assert share == pytest.approx(1.0) and where == 3
        assert product.match(edited) == (3, pytest.approx(1.0), pytest.approx(1.0))


def test_a_changed_word_costs_only_its_weight(product: TestSet) -> None:
    q = product.queries[3]
    one = q.replace("baggy", "loose")
    three = one.replace("denim", "cotton").replace("plain", "striped")
    shares = [product.contained(x)[0] for x in (three, one)]
    assert THRESHOLD <= shares[0] < shares[1] < 1.0
    match = product.match(three)
    assert match is not None and match.position == 3
    assert match.contained == pytest.approx(shares[0])
    assert match.reason() == (
        f"{shares[0]:.2f} of its weighted words are in test query 4, "
        f"{match.covered:.2f} of that query's in it"
    )


def test_a_test_query_padded_with_words_of_its_own_is_covered(product: TestSet) -> None:
    q = product.queries[3]
    padded = f"{q} Also I am moving house next month and need boxes, tape, a trolley and rope."
    assert product.contained(padded, THRESHOLD)[0] < THRESHOLD
    match = product.match(padded)
    assert match is not None and match.position == 3 and match.covered == pytest.approx(1.0)
    assert match.reason().endswith("are in test query 4, 1.00 of that query's in it")


def test_boilerplate_weighs_little_and_an_honest_query_is_clean(voucher: TestSet) -> None:
    # Every voucher query carries the rules' wording: it weighs about a third of a word
    # found in one query, so sharing it alone does not contaminate.
    assert voucher.weight("voucher") == pytest.approx(1.0, abs=0.01)
    assert voucher.weight("caliper") > 5 * voucher.weight("voucher")
    honest = (
        "Help me buy a red cotton tote bag and a steel water bottle.\n\nMy budget is only "
        "`900`, but I have a voucher with the following rules:\n1. The voucher applies to all "
        "products.\n2. It is valid only when the total price of the products exceeds `300`.\n"
        "3. It provides a fixed discount of `50`."
    )
    assert voucher.contained(honest)[0] < THRESHOLD
    assert voucher.covered(honest)[0] < PARAMS.cover_threshold
    assert voucher.match(honest) is None and voucher.match("") is None


# -- curation, end to end ------------------------------------------------------------------


def _cyrillic(q: str) -> str:
    return q.translate(str.maketrans({"a": "а", "e": "е", "o": "о", "c": "с", "p": "р"}))


def _zero_width(q: str) -> str:
    return "".join(ch + "\u200b" if i % 3 == 1 else ch for i, ch in enumerate(q))


def _windows(q: str) -> str:
    ws = q.split()
    return " ".join(w for i in range(0, len(ws), 3) for w in reversed(ws[i : i + 3]))


def _numbers(q: str) -> str:
    return q.replace("`425`", "₱425.00").replace("`170`", "170.00 pesos").replace("`34`", "$34")


def _one_word(q: str) -> str:
    return q.replace("crayons", "pastels")


def _clauses(q: str) -> str:
    return ", ".join(reversed(q.replace("\n", ". ").split(". ")))


def _padded(q: str) -> str:
    return q + " Also a sketchbook, a pencil sharpener, an eraser and a canvas tote for school."


EDITS = (_cyrillic, _zero_width, _windows, _numbers, _one_word, _clauses, _padded)


@pytest.fixture(scope="module")
def careful(env: ShoppingEnv, catalog: Any, catalog_dir: Path) -> list[Trajectory]:
    """The careful policy on 8 product and shop tasks, judged and signed as archived."""
    from shopbench.tasks.generate import BuildConfig, build_tasks

    tasks: list[Task] = build_tasks(
        BuildConfig(catalog=catalog_dir, intents=["product", "shop"], n=4, seed=5)
    ).tasks
    agent = make_policy("careful", catalog=catalog, seed=0)
    judge = RubricJudge()

    async def go() -> list[Trajectory]:
        return list(await asyncio.gather(*(
            run_episode(env, t, agent, key=bytes([1, i + 1]) * 16, miner_uid=0,
                        miner_hotkey="5Miner00" + "x" * 40, block=100 + i)
            for i, t in enumerate(tasks)
        )))  # fmt: skip

    out = []
    for t in asyncio.run(go()):
        t = t.model_copy(update={"validator_hotkey": SIGNER.hotkey})
        out.append(sign_trajectory(with_judgement(t, judge.judge(t)), SIGNER))
    return out


def test_curation_drops_lightly_edited_test_queries_and_keeps_honest_ones(
    careful: list[Trajectory], tmp_path: Path, shoppingbench_data: Path
) -> None:
    test_sets = [shoppingbench_data / f"{k}_test.jsonl" for k in ("voucher", "product")]
    leaked = read_tasks(test_sets[0]).tasks[0].query  # "Looking for oil-based crayons, ..."
    assert "`425`" in leaked and "crayons" in leaked
    base = careful[0]
    disguised = [
        sign_trajectory(
            base.model_copy(update={"query": edit(leaked), "episode_id": f"leak-{edit.__name__}"}),
            SIGNER,
        )
        for edit in EDITS
    ]
    assert all(d.query != leaked for d in disguised)
    root = tmp_path / "archive"
    by_intent: dict[str, list[Trajectory]] = {}
    for t in [*careful, *disguised]:
        by_intent.setdefault(str(t.intent), []).append(t)
    for group in by_intent.values():
        write_shard(group, str(root), signer=SIGNER)
    out = tmp_path / "curated"
    args = ["curate", "--archive", str(root), "--out", str(out)]
    for ts in test_sets:
        args += ["--test-set", str(ts)]
    try:
        main(args)
    except SystemExit as e:
        assert not e.code
    report = json.loads((out / "report.json").read_text())
    counts = report["contaminated"][str(test_sets[0])]
    assert counts["contaminated"] == len(EDITS) and counts["kept_contaminated"] == 0
    assert counts["clean"] == len(careful)
    assert report["contaminated"][str(test_sets[1])]["contaminated"] == 0
    assert report["dropped_by_rule"]["contamination"] == len(EDITS)
    # The report groups reasons with their figures as N (digits in the path too).
    reasons = report["rules"]["contamination"]["reasons"]
    named = re.sub(r"[0-9]+(\.[0-9]+)?", "N", str(test_sets[0]))
    assert reasons == {
        f"query overlaps test set {named} (N of its weighted words are in test query N, "
        "N of that query's in it)": len(EDITS)
    }
    kept = {e.trajectory.episode_id for e in read_curated(out)}
    assert kept == {t.episode_id for t in careful}


# -- the bench -----------------------------------------------------------------------------


def test_bench_contamination_prints_the_catch_rate_per_edit_and_the_false_positives(
    shoppingbench_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main([
        "bench", "contamination", "--test-set", str(shoppingbench_data / "voucher_test.jsonl"),
        "--products", "500", "--per-intent", "4", "--json",
    ])  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["threshold"] == THRESHOLD
    assert result["cover_threshold"] == PARAMS.cover_threshold
    assert set(result["edits"]) >= {
        "none", "case", "punctuation", "one_changed_word", "three_changed_words",
        "clauses_reversed", "shuffled_window_3", "zero_width", "cyrillic", "number_format",
        "padded_8_words",
    }  # fmt: skip
    for kind, rate in result["edits"].items():
        assert rate["queries"] == 250, kind
        assert rate["rate"] == round(rate["caught"] / rate["queries"], 4)
    for kind in ("none", "cyrillic", "zero_width", "shuffled_window_3", "padded_8_words"):
        assert result["edits"][kind]["caught"] == 250, kind
    fp = result["false_positives"]
    # up to four of each intent (a 500-product catalog may give fewer of one)
    assert 4 * (len(intent_names()) - 1) < fp["queries"] <= 4 * len(intent_names())
    assert fp["flagged"] == 0
