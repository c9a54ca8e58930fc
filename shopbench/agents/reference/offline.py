"""The offline cheat: a miner who rebuilt the catalog solves the task without the tools.

``offline`` holds the :class:`~shopbench.catalog.store.Catalog` itself (what a miner who
rebuilt a validator's catalog from a leaked or public seed would have). It reads the
request, finds the best products in its own copy — the catalog's index, the products'
full records, the knowledge pages for the answer — and only then touches the environment:
``find_product`` with each chosen product's exact title and a one-peso price window, to get
the episode's token, then ``recommend_product`` and ``terminate``. It succeeds often; what
gives it away is a search for a title it was never shown. The judge must catch it, not the
grader.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import TYPE_CHECKING

from shopbench.agents.reference.checks import (
    KNOWLEDGE_TITLE_OK,
    TITLE_OK,
    Check,
    Wanted,
    check,
    keys_of,
    worth_opening,
)
from shopbench.agents.reference.knowledge import answer_candidates
from shopbench.agents.reference.prose import Writer, listing, money, short_title
from shopbench.agents.reference.query_reading import (
    ItemNeed,
    Reading,
    read_query,
    requested_pairs,
)
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.catalog.schema import Product
from shopbench.env.results import ProductDetails, WebResult
from shopbench.records.tools import Tool

if TYPE_CHECKING:
    from shopbench.catalog.store import Catalog

WINDOW = 200
MAX_PAGES_READ = 5
COMBO_WIDTH = 6
_WORD = re.compile(r"[^\W_]+")


def _details(p: Product) -> ProductDetails:
    """A catalog product as the details view shows it (catalog ids, not tokens)."""
    return ProductDetails(
        product_id=p.product_id,
        shop_id=p.shop_id,
        title=p.title,
        price=p.price,
        service=tuple(p.service),
        short_description=p.short_description,
        description=p.description,
        sku_options=p.sku_options,
        attributes=p.attributes,
    )


class OfflineSolver:
    """Solves a request against the catalog directly (no episode, no tokens)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._pages: list[tuple[frozenset[str], WebResult]] | None = None

    def candidates(
        self, item: ItemNeed, *, name: str | None = None
    ) -> list[Check]:
        """The catalog's products for one item, checked in full, best first."""
        q = f"{name} {item.phrase}" if name else item.phrase
        wanted: Wanted = (item.phrase, q) if name else item.phrase
        price = (item.price.lo, item.price.hi) if item.price is not None else None
        hits = self.catalog.index.search(
            q, price=price, service=list(item.services), window=WINDOW
        )
        close = [h.product_id for h in hits if worth_opening(wanted, h.title)]
        products = [p for p in self.catalog.get(close) if p is not None]
        details = [_details(p) for p in products]
        pairs = requested_pairs(item.text, keys_of(details))
        title_min = KNOWLEDGE_TITLE_OK if name else TITLE_OK
        checks = [
            check(item, d, pairs, wanted_title=wanted, must_mention=name, title_min=title_min)
            for d in details
        ]
        checks.sort(key=Check.rank)
        return checks

    def answer(self, question: str) -> str | None:
        """The knowledge corpus's answer to `question`, read from the pages directly."""
        if self._pages is None:
            self._pages = [
                (frozenset(w.casefold() for w in _WORD.findall(f"{p.title} {p.text}")),
                 WebResult(url=p.page_id, title=p.title, content=p.text))
                for p in self.catalog.knowledge()
            ]
        asked = {w.casefold() for w in _WORD.findall(question)}
        ranked = sorted(self._pages, key=lambda wp: -len(wp[0] & asked))[:MAX_PAGES_READ]
        found = answer_candidates([page for _, page in ranked], question)
        return found[0][0] if found else None

    def solve(self, reading: Reading) -> tuple[list[Check], bool]:
        """The products to recommend, in item order, and whether all requirements hold."""
        name = self.answer(reading.question) if reading.question else None
        lists = [self.candidates(it, name=name) for it in reading.items]
        if not all(lists):
            return [c[0] for c in lists if c], False
        ok_lists = [[c for c in cs if c.ok] for cs in lists]
        if not all(ok_lists):
            return [(ok or cs)[0] for ok, cs in zip(ok_lists, lists, strict=True)], False
        if reading.voucher is not None:
            return self._basket(reading, ok_lists)
        if reading.same_shop and len(ok_lists) > 1:
            shops = set.intersection(*({c.details.shop_id for c in cs} for cs in ok_lists))
            if not shops:
                return [cs[0] for cs in ok_lists], False
            shop = min(shops)
            return [next(c for c in cs if c.details.shop_id == shop) for cs in ok_lists], True
        return [cs[0] for cs in ok_lists], True

    def _basket(self, reading: Reading, ok_lists: list[list[Check]]) -> tuple[list[Check], bool]:
        v = reading.voucher
        assert v is not None
        # The cheapest candidates of each item, plus each common shop's own, so that a shop
        # voucher can apply.
        pools = [sorted(cs, key=lambda c: c.details.price)[:COMBO_WIDTH] for cs in ok_lists]
        common = set.intersection(*({c.details.shop_id for c in cs} for cs in ok_lists))
        for shop in sorted(common)[:10]:
            for pool, cs in zip(pools, ok_lists, strict=True):
                pool += [c for c in cs if c.details.shop_id == shop and c not in pool][:1]
        best: tuple[float, list[Check]] | None = None
        for combo in itertools.product(*pools):
            total = sum(c.details.price for c in combo)
            pays = v.pays(total, len({c.details.shop_id for c in combo}))
            if pays is not None and (best is None or pays < best[0]):
                best = (pays, list(combo))
        if best is None:
            return [p[0] for p in pools], False
        return best[1], True


class OfflinePolicy(ScriptedPolicy):
    """Solves the task on its own copy of the catalog, then fetches tokens by exact title."""

    name = "offline"
    honest = False
    needs_catalog = True

    def __init__(self, catalog: Catalog, seed: int = 0) -> None:
        super().__init__(seed)
        self.solver = OfflineSolver(catalog)

    def script(self, ctx: Context) -> Script:
        """Two or three turns: exact-title searches, the recommendation, terminate."""
        w = Writer(ctx.rng)
        reading = read_query(ctx.query, knowledge=ctx.offers(Tool.WEB_SEARCH))
        picks, all_ok = self.solver.solve(reading)
        picks = picks[:5]
        if not picks:
            yield Step(calls=[(Tool.TERMINATE, {"status": "failure"})], reasoning="Nothing fits.")
            return
        calls = [
            (Tool.FIND_PRODUCT, {
                "q": c.details.title, "page": 1,
                "price": f"{math.floor(c.details.price)}-{math.ceil(c.details.price)}",
            })
            for c in picks
        ]
        names = listing([f'"{short_title(c.details.title, 60)}"' for c in picks])
        results = yield Step(
            calls=calls,
            reasoning=w.pick(
                f"I know exactly which products fit this request: {names}. Let me pull them up.",
                f"This calls for {names}; I'll search for them directly.",
            ),
        )
        tokens: list[str] = []
        for c, r in zip(picks, results, strict=True):
            same = [h for h in r.hits if h.title == c.details.title
                    and abs(h.price - c.details.price) < 0.005]
            if same:
                tokens.append(same[0].product_id)
            elif r.hits:
                tokens.append(r.hits[0].product_id)
        if tokens:
            prices = listing([money(c.details.price) for c in picks])
            yield Step(
                calls=[(Tool.RECOMMEND_PRODUCT, {"product_ids": ",".join(tokens)})],
                reasoning=w.pick(
                    f"There they are, at {prices}, matching every requirement. Recommending.",
                    f"Found them ({prices}); they satisfy all constraints.",
                ),
            )
        yield Step(
            calls=[(Tool.TERMINATE, {"status": "success" if all_ok and tokens else "failure"})],
            reasoning="Done.",
        )
