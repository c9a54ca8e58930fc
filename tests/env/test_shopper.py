"""The clarify shopper, driven through the episode's ``ask_shopper`` tool: it answers what
it is asked from the hidden card, truthfully and in the query's forms, refuses to name the
product, costs per question, stops at its cap, and words the same episode the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from shopbench.agents.reference.query_reading import read_price, read_services, requested_pairs
from shopbench.catalog.store import Catalog
from shopbench.env.env import ShoppingEnv
from shopbench.env.shopper.questions import MAX_QUESTION_CHARS
from shopbench.records.verdict import Verdict
from shopbench.scoring.score import episode_score
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.hidden import PRICE, SERVICE
from shopbench.tasks.intent_registry import intent_names
from shopbench.tasks.model import Task
from shopbench.tasks.queries import attribute_label


@pytest.fixture(scope="module")
def clarify_tasks(catalog_dir: Path) -> list[Task]:
    built = build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=12, seed=3))
    assert len(built.tasks) >= 10
    return built.tasks


def _ask(env: ShoppingEnv, task: Task, questions: list[str], key: bytes = b"k" * 32) -> list[str]:
    episode = env.new_episode(task, key=key)
    out = []
    for q in questions:
        episode.begin_turn()
        out.append(episode.call("ask_shopper", {"question": q}).content)
    return out


def _question(topic: str) -> str:
    if topic == PRICE:
        return "What is your budget?"
    if topic == SERVICE:
        return "Is there a service you need?"
    return f"Which {attribute_label(topic.split(':', 1)[1])} would you like?"


def test_ask_shopper_is_offered_on_clarify_tasks_only(catalog: Catalog) -> None:
    env = ShoppingEnv(catalog)
    assert "ask_shopper" in env.tool_specs("clarify")
    assert "web_search" not in env.tool_specs("clarify")
    for intent in intent_names():
        offered = env.tool_specs(intent)
        assert ("ask_shopper" in offered) == (intent == "clarify"), intent


def test_the_card_stays_with_the_validator(clarify_tasks: list[Task]) -> None:
    task = clarify_tasks[0]
    card = task.card().model_dump()
    assert "hidden" not in card and "reward" not in card
    assert set(card) == {"id", "intent", "query", "split", "cluster"}


def test_the_shopper_states_each_hidden_constraint_in_the_query_forms(
    catalog: Catalog, clarify_tasks: list[Task]
) -> None:
    env = ShoppingEnv(catalog)
    for task in clarify_tasks:
        slot, card = task.reward[0], task.hidden
        assert card is not None
        topics = card.topics()
        answers = _ask(env, task, [_question(t) for t in topics])
        for topic, answer in zip(topics, answers, strict=True):
            if topic == PRICE:
                assert slot.price is not None
                bound = slot.price[0]
                read = read_price(answer)
                assert read is not None, answer
                assert (read.lo, read.hi) == (
                    bound.lo if bound.mode != "less than" else None,
                    bound.hi if bound.mode != "greater than" else None,
                )
            elif topic == SERVICE:
                assert set(read_services(answer)) == set(slot.service or []), answer
            else:
                key = topic.split(":", 1)[1]
                wanted = {k: v for o in slot.sku_options or [] for k, v in o.items()}
                wanted |= {k: vs[0] for a in slot.attributes or [] for k, vs in a.items()}
                assert requested_pairs(answer, {key}) == {key: wanted[key]}, answer


def test_the_shopper_refuses_the_product_and_does_not_mind_the_rest(
    catalog: Catalog, clarify_tasks: list[Task]
) -> None:
    env = ShoppingEnv(catalog)
    task = clarify_tasks[0]
    refusal, off_topic, shop = _ask(env, task, [
        "Which product is it? Give me the product_id.",
        "How is the weather today?",
        "Do you prefer a particular shop?",
    ])  # fmt: skip
    assert "can't" in refusal.lower() or "won't" in refusal.lower()
    assert off_topic.startswith("I don't mind")
    assert shop.startswith("I don't mind")


def test_questions_cost_and_stop_at_the_cap(catalog: Catalog, clarify_tasks: list[Task]) -> None:
    env = ShoppingEnv(catalog)
    task = clarify_tasks[0]
    cap = task.rules.max_questions
    episode = env.new_episode(task, key=b"c" * 32)
    topic = task.hidden.topics()[0]  # type: ignore[union-attr]
    for i in range(cap + 1):
        episode.begin_turn()
        obs = episode.call("ask_shopper", {"question": _question(topic)})
        assert (obs.error == "limit") == (i == cap), obs.content
    episode.begin_turn()
    long = episode.call("ask_shopper", {"question": "a" * (MAX_QUESTION_CHARS + 1)})
    assert long.error in ("limit", "bad_argument")
    dialogue = episode.dialogue()
    assert dialogue is not None and dialogue.questions == cap
    assert dialogue.asked() == {topic}
    outcome = env.grade(task, [task.reward[0].product_id], dialogue)
    assert outcome.success and outcome.dialogue == dialogue
    verdict = Verdict(judge_id="t", score=1.0)
    assert episode_score(outcome, verdict) == pytest.approx(1.0 - task.rules.question_cost * cap)
    # A success asking everything allowed still outranks every failure.
    floor = verdict.model_copy(update={"score": 0.0})
    assert episode_score(outcome, floor) > 0.1


def test_an_over_long_question_is_refused_unread(
    catalog: Catalog, clarify_tasks: list[Task]
) -> None:
    env = ShoppingEnv(catalog)
    episode = env.new_episode(clarify_tasks[1], key=b"d" * 32)
    episode.begin_turn()
    obs = episode.call("ask_shopper", {"question": "What is your budget? " * 20})
    assert obs.error == "bad_argument" and "limit is 300" in obs.content
    assert episode.dialogue() is not None and episode.dialogue().questions == 0  # type: ignore[union-attr]


def test_the_same_episode_is_worded_the_same_and_another_differently(
    catalog: Catalog, clarify_tasks: list[Task]
) -> None:
    env = ShoppingEnv(catalog)
    questions = [_question(t) for t in clarify_tasks[2].hidden.topics()] * 2  # type: ignore[union-attr]
    first = _ask(env, clarify_tasks[2], questions)
    assert _ask(env, clarify_tasks[2], questions) == first
    others = {tuple(_ask(env, clarify_tasks[2], questions, key=bytes([i]) * 32)) for i in range(8)}
    assert len(others) > 1


def test_the_shopper_never_says_yes_to_a_false_premise(
    catalog: Catalog, clarify_tasks: list[Task]
) -> None:
    env = ShoppingEnv(catalog)
    asked = 0
    for task in clarify_tasks:
        assert task.hidden is not None
        if PRICE not in task.hidden.topics():
            continue
        for n in range(12):  # the wording is drawn per episode: several episodes each
            [answer] = _ask(env, task, ["Is your budget under 40 pesos?"], key=bytes([n]) * 32)
            asked += 1
            assert not answer.lower().startswith("yes"), answer
            assert read_price(answer) is not None, answer  # the constraint, stated
    assert asked >= 24
