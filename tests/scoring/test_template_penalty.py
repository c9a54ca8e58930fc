"""The template penalty: one miner's near-identical reasoning across different tasks."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from support.judge_agents import Careful, Narrator, make_tasks, play

from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.scoring.template_penalty import (
    MinHasher,
    TemplateConfig,
    masked_tokens,
    miner_template,
    penalise,
    shingles,
    template_reports,
)

TEMPLATE = (
    "Let me look through the catalog for the best options. I will compare a few of them "
    "on price and quality and then recommend the one that fits the customer's needs."
)


def test_numbers_and_ids_are_masked() -> None:
    assert masked_tokens("Pick 1234567890 at ₱1,299.50, not 2345678901!") == [
        "pick", "#", "at", "php", "#", "not", "#",
    ]
    assert shingles(["a", "b", "c", "d"], 3) == {"a b c", "b c d"}
    assert shingles(["a"], 3) == {"a"}
    assert shingles([], 3) == set()


def test_minhash_estimates_jaccard_and_is_deterministic() -> None:
    a = shingles(masked_tokens(TEMPLATE), 3)
    b = shingles(masked_tokens(TEMPLATE.replace("price and quality", "size and colour")), 3)
    exact = len(a & b) / len(a | b)
    h1, h2 = MinHasher(256, seed=15), MinHasher(256, seed=15)
    sa, sb = h1.signature(a), h2.signature(b)
    assert (h1.signature(a) == sa).all()
    estimate = float((sa == sb).mean())
    assert abs(estimate - exact) < 0.12, (estimate, exact)


def test_the_same_text_for_different_tasks_costs_the_most() -> None:
    cfg = TemplateConfig()
    quoted = [(f"task{i}", f"{TEMPLATE} I pick {1000000000 + i} at ₱{100 + i}.")
              for i in range(6)]
    report = miner_template("m", quoted, cfg)
    assert report.similarity == 1.0 and report.factor == cfg.min_factor == 0.5
    assert report.compared == 6 and report.per_episode == [1.0] * 6


def test_varied_wording_keeps_full_credit() -> None:
    texts = [
        "The request is a red steel water bottle; the first search showed three insulated ones.",
        "Two cordless drills came back, the cheaper one lacks the second battery pack.",
        "This shop sells both the yoga mat and the strap, so one order covers the request.",
        "Nothing matched the ceramic kettle in white, so I searched for porcelain instead.",
    ]
    report = miner_template("m", [(f"t{i}", t) for i, t in enumerate(texts)])
    assert report.similarity < 0.2 and report.factor == 1.0


def test_repeats_of_one_task_and_silent_episodes_do_not_count() -> None:
    same_task = miner_template("m", [("t", TEMPLATE), ("t", TEMPLATE), ("t", TEMPLATE)])
    assert same_task.compared == 0 and same_task.factor == 1.0
    silent = miner_template("m", [("a", ""), ("b", ""), ("c", "   ")])
    assert silent.factor == 1.0
    assert miner_template("m", []).factor == 1.0


def test_the_factor_falls_linearly_between_low_and_high() -> None:
    cfg = TemplateConfig(low=0.4, high=0.8, min_factor=0.2)
    assert [cfg.factor(s) for s in (0.0, 0.4, 0.6, 0.8, 1.0)] == pytest.approx(
        [1.0, 1.0, 0.6, 0.2, 0.2]
    )
    with pytest.raises(ValidationError, match="must be above low"):
        TemplateConfig(low=0.8, high=0.5)


def test_penalty_multiplies_the_process_score_once(catalog: Any) -> None:
    env = ShoppingEnv(catalog)
    t = play(env, make_tasks(catalog, 1), Careful())[0]
    v = RubricJudge().judge(t)
    p = penalise(v, 0.5)
    assert (p.score, p.unpenalised_score, p.template_factor) == (0.45, 0.9, 0.5)
    assert penalise(p, 0.8).score == pytest.approx(0.72)  # from the unpenalised score
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        penalise(v, 1.5)


def test_reference_narrator_is_hit_and_careful_is_not(catalog: Any) -> None:
    env = ShoppingEnv(catalog)
    tasks = make_tasks(catalog, 6)
    narr = play(env, tasks, Narrator())
    care = play(env, tasks, Careful())
    # Two miners in one round, told apart by hotkey.
    round_ = [t.model_copy(update={"miner_hotkey": "5Narr"}) for t in narr] + [
        t.model_copy(update={"miner_hotkey": "5Care"}) for t in care
    ]
    reports = template_reports(round_)
    assert set(reports) == {"5Narr", "5Care"}
    assert reports["5Narr"].similarity > 0.9 and reports["5Narr"].factor == 0.5
    assert reports["5Care"].similarity < 0.5 and reports["5Care"].factor == 1.0
