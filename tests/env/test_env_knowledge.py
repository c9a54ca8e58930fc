"""web_search: BM25 over the catalog's knowledge pages, offered on knowledge tasks only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shopbench.chat import EpisodeLimits
from shopbench.env.env import ShoppingEnv
from shopbench.env.knowledge_index import KnowledgeIndex, snippet
from shopbench.outcome.spec import Slot
from shopbench.tasks.model import Task

KNOWLEDGE_TASK = Task(
    id="t-knowledge",
    intent="knowledge",
    query="Which city is the brand from? Buy me a backpack from a brand based there.",
    reward=[Slot(title=["backpack"])],
    knowledge_attribute="x",
)


def test_snippet_prefers_sentences_with_query_words_in_page_order() -> None:
    text = (
        "Kalibo Trail makes bags. It was founded in 1990. "
        "The brand is based in Cebu City. Its packs use ripstop nylon."
    )
    # room for everything: the whole page, in page order
    assert snippet(text, ["where", "is", "kalibo", "trail", "based"], 200) == text
    short = snippet(text, ["based", "trail"], 60)
    assert short == "Kalibo Trail makes bags. The brand is based in Cebu City."
    assert snippet(text, ["zzz"], 30) == "Kalibo Trail makes bags."  # no match: the opening
    assert snippet("One very long sentence without an end " * 5, ["long"], 20).endswith("...")
    assert len(snippet("One very long sentence without an end " * 5, ["long"], 20)) <= 20


@pytest.fixture(scope="module")
def pages(catalog: Any) -> list[Any]:
    pages = catalog.knowledge()
    assert pages, "the generated catalog has a knowledge corpus"
    return pages


def test_knowledge_index_finds_a_page_by_its_title(pages: list[Any]) -> None:
    index = KnowledgeIndex(pages)
    assert len(index) == len(pages)
    for page in pages[:20]:
        results = index.search(page.title, 5, 600)
        assert results and len(results) <= 5
        assert page.title in [r.title for r in results]
        assert all(len(r.content) <= 600 and r.url.startswith("kb://") for r in results)
    assert index.search('AND ( title:"x -y', 3, 600) is not None  # operators are plain words
    assert index.search("  ?! ", 3, 600) == []


def test_web_search_through_an_episode_states_the_fact(catalog: Any, pages: list[Any]) -> None:
    env = ShoppingEnv(catalog, limits=EpisodeLimits(max_turns=100))
    ep = env.new_episode(KNOWLEDGE_TASK, key=b"w" * 32)
    assert "web_search" in ep.tool_names
    facts = [
        f for p in pages for f in p.facts if f.entity_kind == "brand" and f.attribute == "home_city"
    ]
    facts = list({f.entity: f for f in facts}.values())[:40]
    assert len(facts) == 40
    found = 0
    for fact in facts:
        assert ep.begin_turn()
        q = f"Which city is the brand {fact.entity} based in?"
        obs = ep.call("web_search", {"q": q, "max_results": 3})
        assert obs.error is None, obs.content
        results = json.loads(obs.content)
        assert 1 <= len(results) <= 3
        assert list(results[0]) == ["url", "title", "content"]
        found += any(fact.value in r["content"] for r in results)
    assert found >= 36  # the answer is in the snippets for (nearly) every brand
    assert ep.begin_turn()
    for bad, message in [(0, "from 1 to 10, got 0"), (11, "from 1 to 10, got 11")]:
        obs = ep.call("web_search", {"q": "cotton", "max_results": bad})
        assert obs.error == "bad_argument" and message in obs.content
    assert ep.call("web_search", {"q": ""}).error == "bad_argument"
    default = ep.call("web_search", {"q": pages[0].title})
    assert default.error is None and 1 <= len(json.loads(default.content)) <= 10
