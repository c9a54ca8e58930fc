"""The greedy shopper: searches each item's name once and takes the first hit, unchecked.

No filters, no details, no comparison: the baseline a careful agent must beat by a wide
margin on requests with price bounds, services, attribute values, one shop or a budget.
"""

from __future__ import annotations

from shopbench.agents.reference.prose import Writer, listing, money, short_title
from shopbench.agents.reference.query_reading import read_query
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.records.tools import Tool

MAX_ITEMS = 5  # one search per item, all in one turn


class GreedyPolicy(ScriptedPolicy):
    """First hit of a plain search per item; recommends and terminates without checking."""

    name = "greedy"

    def script(self, ctx: Context) -> Script:
        """Search, take the first hits, recommend, terminate."""
        w = Writer(ctx.rng)
        items = read_query(ctx.query, knowledge=ctx.offers(Tool.WEB_SEARCH)).items[:MAX_ITEMS]
        names = listing([f'"{it.phrase}"' for it in items])
        results = yield Step(
            calls=[(Tool.FIND_PRODUCT, {"q": it.phrase, "page": 1}) for it in items],
            reasoning=w.pick(
                f"The customer wants {names}. A quick search should do it.",
                f"Let me search for {names} and pick the top result.",
            ),
        )
        firsts = [r.hits[0] for r in results if r.hits]
        if firsts:
            picked = listing(
                [f'"{short_title(h.title, 50)}" at {money(h.price)}' for h in firsts]
            )
            yield Step(
                calls=[(Tool.RECOMMEND_PRODUCT,
                        {"product_ids": ",".join(h.product_id for h in firsts)})],
                reasoning=w.pick(
                    f"The first result is {picked}. That looks right; recommending it.",
                    f"Top hit: {picked}. Good enough — I'll recommend it.",
                ),
            )
        yield Step(
            calls=[(Tool.TERMINATE, {"status": "success" if firsts else "failure"})],
            reasoning="Done.",
        )
