"""Query grounding: search words must come from the request or from earlier observations."""

from __future__ import annotations

from typing import Any

from support.judge_agents import Careful, Offline, hit, make_tasks, play, record

from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.grounding import (
    GroundingRules,
    ground_search,
    narrow_price_window,
    words,
)
from shopbench.judging.rubric.judge import RubricJudge

REQUEST = set(words('I need the "Kalibo Trail Running Shoes" for men, under 2,500 pesos'))


def _never(_: float) -> bool:
    return False


def check(q: str, *, price: str | None = None, seen: set[str] | None = None,
          secret: frozenset[str] = frozenset(), rules: GroundingRules | None = None) -> Any:
    args: dict[str, Any] = {"q": q, "page": 1}
    if price is not None:
        args["price"] = price
    return ground_search(args, [REQUEST, seen or set()], lambda x: x in (2500.0,),
                         rules or GroundingRules(), secret=secret)


def test_words_of_the_request_are_grounded_in_any_form() -> None:
    g = check("kalibo trail running shoe for men")  # "shoe": the request says "shoes"
    assert g.grounded and g.unknown_words == [] and g.content_words == 5


def test_a_run_of_three_unknown_words_is_knowledge_the_agent_could_not_have() -> None:
    g = check("kalibo trail zorvex hypergrip ultralite")
    assert not g.grounded
    assert g.unknown_words == ["zorvex", "hypergrip", "ultralite"] and g.longest_run == 3
    assert g.reason() == "words from neither the request nor earlier results: " \
        "'zorvex hypergrip ultralite'"


def test_shorter_runs_stop_words_and_common_words() -> None:
    assert check("kalibo zorvex hypergrip trail").grounded  # a run of two
    # Stop words neither break nor extend a run.
    assert not check("zorvex of the hypergrip for ultralite").grounded
    rules = GroundingRules(common=frozenset({"cheap", "best", "sale"}))
    assert check("best cheap sale kalibo", rules=rules).grounded
    assert not check("best cheap sale kalibo").grounded


def test_words_shown_by_earlier_observations_are_grounded() -> None:
    seen = set(words("Zorvex HyperGrip UltraLite Trail Shoe"))
    assert check("zorvex hypergrip ultralite", seen=seen).grounded


def test_hidden_answer_words_are_a_leak_even_alone() -> None:
    secret = frozenset({"sealed", "japan"})
    g = check("kalibo trail running shoes japan", secret=secret)
    assert not g.grounded and g.leaked_words == ["japan"]
    assert "hidden answer" in g.reason()
    assert check("kalibo trail running shoes japan", secret=secret,
                 rules=GroundingRules(leak_limit=0)).grounded
    # Once an observation has shown it, it is known.
    assert check("kalibo japan", secret=secret, seen={"japan"}).grounded


def test_a_price_window_naming_an_unseen_price_is_ungrounded() -> None:
    assert narrow_price_window("1299-1300") == (1299.0, 1300.0)
    assert narrow_price_window("1000-2000") is None
    assert narrow_price_window("500-") is None
    assert narrow_price_window("banana") is None
    g = check("kalibo trail", price="1299-1300")
    assert not g.grounded and "price window" in g.reason()
    assert check("kalibo trail", price="2499-2500").grounded  # the request's own number
    assert check("kalibo trail", price="0-2500").grounded  # wide: a budget, not a price
    assert not check("kalibo trail", price="5000-5090").grounded  # within 2% of 5090
    assert check("kalibo trail", price="5000-5090", rules=GroundingRules(price_window=0.01)
                 ).grounded


def test_grounding_follows_the_episode_order(catalog: Any) -> None:
    judge = RubricJudge()
    shown = [hit("1111111111", "Zorvex HyperGrip UltraLite Trail Shoe", 900.0)]
    late = record('I want "Kalibo Trail Running Shoes"', [
        ("Search Kalibo Trail Running Shoes.",
         [("find_product", {"q": "Kalibo Trail Running Shoes", "page": 1}, shown)]),
        ("The results mention Zorvex HyperGrip UltraLite; search that.",
         [("find_product", {"q": "zorvex hypergrip ultralite", "page": 1}, shown)]),
    ])
    early = record('I want "Kalibo Trail Running Shoes"', [
        ("Search Zorvex HyperGrip UltraLite.",
         [("find_product", {"q": "zorvex hypergrip ultralite", "page": 1}, shown)]),
    ])
    assert judge.judge(late).gates["grounded_queries"]
    v = judge.judge(early)
    assert not v.gates["grounded_queries"] and v.score == 0.1
    assert "'zorvex hypergrip ultralite'" in v.rationale


def test_an_offline_solver_is_caught_and_an_honest_agent_is_not(catalog: Any) -> None:
    env = ShoppingEnv(catalog)
    tasks = make_tasks(catalog, 3)
    judge = RubricJudge()
    # The offline agent searches for titles it knows from its own copy of the catalog,
    # seller notes included: words no observation had shown.
    answers = {t.query: f"[Sealed] Ready Stock {t.reward[0].title[0]}" for t in tasks}
    offline = [judge.judge(t) for t in play(env, tasks, Offline(answers))]
    honest = [judge.judge(t) for t in play(env, tasks, Careful())]
    assert all(v.gates["grounded_queries"] for v in honest)
    assert all(v.signals["ungrounded_searches"] == 0 for v in honest)
    assert not any(v.gates["grounded_queries"] for v in offline)
    assert all(v.score == 0.1 and v.stopped_at == "grounded_queries" for v in offline)
