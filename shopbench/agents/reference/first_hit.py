"""The floors a tuned model must pass: one search, the first hit recommended, unchecked.

``first_hit`` searches the customer's whole message: no reading of the request, no filters,
no second look. On held-out product tasks it scores well above ``greedy`` (the search engine
does the reading); a model worth mining with must beat it. ``first_hit_filtered`` reads the
request first and searches its first item's words with its price bound and services as
filters: the four-turn script a small tuned model learns first, so a model that beats it has
learned more than that script.
"""

from __future__ import annotations

from shopbench.agents.reference.observations import CallResult
from shopbench.agents.reference.query_reading import read_query
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.agents.reference.session import Session
from shopbench.records.tools import Tool


class FirstHitPolicy(ScriptedPolicy):
    """One search of the whole message; the first hit recommended, unchecked."""

    name = "first_hit"

    def script(self, ctx: Context) -> Script:
        """Search the message, recommend its first hit, terminate."""
        results = yield Step(
            calls=[(Tool.FIND_PRODUCT, {"q": ctx.query, "page": 1})],
            reasoning="Searching the customer's request as written.",
        )
        yield from _take_first(results)


class FilteredFirstHitPolicy(ScriptedPolicy):
    """One search of the first item's words with its price and service filters; the first
    hit recommended, unchecked."""

    name = "first_hit_filtered"

    def script(self, ctx: Context) -> Script:
        """Read the request, search with its filters, recommend the first hit, terminate."""
        items = read_query(ctx.query, knowledge=ctx.offers(Tool.WEB_SEARCH)).items
        args = (
            Session.search_args(items[0], items[0].phrase) if items else {"q": ctx.query, "page": 1}
        )
        results = yield Step(
            calls=[(Tool.FIND_PRODUCT, args)],
            reasoning="Searching the request's item with its filters.",
        )
        yield from _take_first(results)


def _take_first(results: list[CallResult]) -> Script:
    """Recommend the first hit of the search `results` answer, unchecked; terminate."""
    hits = results[0].hits if results else []
    if hits:
        yield Step(
            calls=[(Tool.RECOMMEND_PRODUCT, {"product_ids": hits[0].product_id})],
            reasoning="Recommending the first result.",
        )
    yield Step(
        calls=[(Tool.TERMINATE, {"status": "success" if hits else "failure"})],
        reasoning="Done.",
    )
