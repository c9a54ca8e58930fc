"""The shopping tools, with ShoppingBench's names, arguments and result shapes.

Each tool is a typed method whose docstring is the description the agent reads (see
:mod:`shopbench.env.toolkit`). Tools return the typed results of :mod:`shopbench.env.results`
(the episode renders them to the text the agent sees) or raise a
:class:`~shopbench.env.errors.ToolError` saying what was wrong. Every id a tool shows is an
episode token; every id it accepts must be one this episode has shown.

These are the tools every task offers; an intent's extra tools come with its pack, their
handler's toolkit registered at :mod:`shopbench.env.packs` (``web_search``,
:mod:`shopbench.env.web_search`; ``ask_shopper``, :mod:`shopbench.env.shopper`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from shopbench.catalog.errors import SearchError
from shopbench.catalog.schema import SERVICES, Product
from shopbench.catalog.search.filters import MAX_PAGE, parse_price
from shopbench.chat import EpisodeLimits
from shopbench.env.errors import ArgumentError, InvalidIdError, LimitError, NotAllowedError
from shopbench.env.packs import handler_for, pack_specs
from shopbench.env.results import (
    SEARCH_RESULTS,
    VIEW_RESULTS,
    ProductDetails,
    ProductHit,
    Recommendation,
    Status,
    Termination,
)
from shopbench.env.tokens import TokenBook, TokenKind, token_digits
from shopbench.env.toolkit import Toolkit, ToolSpec, tool
from shopbench.packs.pack import tool_packs
from shopbench.records.tools import Tool

if TYPE_CHECKING:
    from shopbench.catalog.search.index import SearchIndex

Sort = Literal["priceasc", "pricedesc", "order", "default"]


class ShopTools(Toolkit):
    """The tools every task offers, bound to one episode's token book and its
    recommendation state."""

    def __init__(self, index: SearchIndex, tokens: TokenBook, limits: EpisodeLimits) -> None:
        self._index = index
        self._tokens = tokens
        self._limits = limits
        self.recommended: list[str] | None = None  # by position, "" where left empty
        self.status: str | None = None

    @classmethod
    def tool_specs(cls) -> dict[str, ToolSpec]:
        """Every tool of the arena by name: these, then every registered pack's, in
        ShoppingBench's order (what a miner may be offered on some task)."""
        return {**cls.declared_specs(), **pack_specs()}

    # -- the tools -------------------------------------------------------------------------

    @tool
    def find_product(
        self,
        q: str,
        page: int,
        shop_id: str | None = None,
        price: str | None = None,
        sort: Sort | None = None,
        service: str | None = None,
    ) -> list[ProductHit]:
        """Search the marketplace and return up to 10 products per page, each with its
        product_id, shop_id, title, price, service and sold_count.

        Args:
            q: What to search for, in words, e.g. "nike shoes" or "backpack for college student".
            page: Which page of results to return, from 1 to 5; change it to see more products
                for the same search.
            shop_id: Only search the products of this shop (a shop_id from earlier results).
            price: A price range in pesos written "lo-hi", e.g. "0-100", "100-1000" or "1000-".
            sort: How to order the results:
                - default: by relevance to q.
                - priceasc: by price, lowest first.
                - pricedesc: by price, highest first.
                - order: by number sold, highest first.
            service: Keep only products offering all of these services, comma-separated:
                - official: sold by an official store (authenticity guarantee, easy returns).
                - freeShipping: shipped for free.
                - COD: cash on delivery accepted.
                - flashsale: on a limited-time flash sale.
                - default: no service filter.
        """
        if not q.strip():
            raise ArgumentError("find_product: argument 'q' is empty; give the words to search")
        if not 1 <= page <= MAX_PAGE:
            raise ArgumentError(
                f"find_product: argument 'page' must be from 1 to {MAX_PAGE}, got {page}"
            )
        shop = self._resolve("shop", shop_id, Tool.FIND_PRODUCT, "shop_id") if shop_id else None
        bounds = _parse_price(price) if price else None
        services = _parse_services(service) if service else ()
        try:
            hits = self._index.find(
                q, page=page, shop_id=shop, price=bounds, service=services, sort=sort or "default"
            )
        except SearchError as e:
            raise ArgumentError(f"find_product: {e}") from None
        products = self._tokens.show_all("product", [h.product_id for h in hits])
        shops = self._tokens.show_all("shop", [h.shop_id for h in hits])
        return SEARCH_RESULTS.validate_python([
            {
                "product_id": product,
                "shop_id": shop,
                "title": h.title,
                "price": h.price,
                "service": h.service,
                "sold_count": h.sold_count,
            }
            for h, product, shop in zip(hits, products, shops, strict=True)
        ])

    @tool
    def view_product_information(self, product_ids: str) -> list[ProductDetails]:
        """Show the details of products: title, price, service, descriptions, SKU options and
        attributes, to check them against the request.

        Args:
            product_ids: Comma-separated product_ids from earlier results, at most 10.
        """
        tokens = self._split_ids(
            product_ids, Tool.VIEW_PRODUCT_INFORMATION, self._limits.max_view_ids
        )
        tokens = list(dict.fromkeys(tokens))  # viewing one product twice shows it once
        ids = self._resolve_all(tokens, Tool.VIEW_PRODUCT_INFORMATION)
        products = self._index.get(ids)
        return VIEW_RESULTS.validate_python(
            [self._details(t, p) for t, p in zip(tokens, products, strict=True) if p]
        )

    @tool
    def recommend_product(self, product_ids: str) -> Recommendation:
        """Recommend products to the customer. Allowed only once per episode.

        Args:
            product_ids: Comma-separated product_ids:
                - for one product, the id that best matches the request;
                - for several products, one id per requested item, in the order the request
                  lists them;
                - for several products from one shop, one id per item in that order, all
                  with the same shop_id.
        """
        if self.recommended is not None:
            raise NotAllowedError(
                "recommend_product can be used only once per episode; already recommended: "
                + ",".join(self.recommended)
            )
        # Positions count, as in ShoppingBench: "a,,c" leaves the second one empty.
        tokens = self._split_ids(
            product_ids, Tool.RECOMMEND_PRODUCT, self._limits.max_recommend_ids, positions=True
        )
        self._resolve_all([t for t in tokens if t], Tool.RECOMMEND_PRODUCT)
        self.recommended = tokens
        return Recommendation(product_ids=tuple(tokens))

    @tool
    def terminate(self, status: Status) -> Termination:
        """End the episode and declare whether the task was completed.

        Args:
            status: "success" when the request has been met, "failure" when it cannot be.
        """
        self.status = status
        return Termination(status=status)

    # -- helpers ---------------------------------------------------------------------------

    def _details(self, token: str, p: Product) -> dict[str, Any]:
        """A product's :class:`ProductDetails` fields, as the row to validate."""
        cap = self._limits.max_description_chars
        description = p.description if len(p.description) <= cap else p.description[:cap] + "..."
        return {
            "product_id": token,
            "shop_id": self._tokens.show("shop", p.shop_id),
            "title": p.title,
            "price": p.price,
            "service": p.service,
            "short_description": p.short_description,
            "description": description,
            "sku_options": p.sku_options,
            "attributes": p.attributes,
        }

    def _split_ids(
        self, text: str, tool_name: str, limit: int, *, positions: bool = False
    ) -> list[str]:
        """The comma-separated ids, empty entries skipped; with `positions`, every position
        up to the last id, "" for an empty one. ArgumentError when no id is given,
        LimitError past `limit` of them (positions, with `positions`)."""
        tokens = [t.strip() for t in text.split(",")]
        if positions:
            while tokens and not tokens[-1]:
                tokens.pop()
        else:
            tokens = [t for t in tokens if t]
        if not tokens:
            raise ArgumentError(
                f"{tool_name}: argument 'product_ids' is empty; give comma-separated product_ids"
            )
        if len(tokens) > limit:
            raise LimitError(
                f"{tool_name}: at most {limit} product_ids per call, got {len(tokens)}"
            )
        return tokens

    def _resolve_all(self, tokens: list[str], tool_name: str) -> list[str]:
        ids: list[str] = []
        unknown: list[str] = []
        for t in tokens:
            found = self._resolve("product", t, tool_name, "product_ids", raise_unknown=False)
            if found is None:
                unknown.append(t)
            else:
                ids.append(found)
        if unknown:
            raise InvalidIdError(
                f"{tool_name}: product_ids not shown in this episode: {', '.join(unknown[:10])}"
                " (ids are valid only in the episode whose results showed them; use ids from"
                " find_product results)"
            )
        return ids

    def _resolve(
        self,
        kind: TokenKind,
        token: str,
        tool_name: str,
        arg: str,
        *,
        raise_unknown: bool = True,
    ) -> str | None:
        token = token.strip()
        if not token.isdigit() or not token.isascii():
            raise ArgumentError(
                f"{tool_name}: {token[:40]!r} in '{arg}' is not an id; ids are the"
                f" {token_digits(kind)}-digit {kind}_ids shown in results"
            )
        found = self._tokens.resolve(token, kind)
        if found is None and raise_unknown:
            raise InvalidIdError(
                f"{tool_name}: {kind}_id {token} was not shown in this episode (ids are valid"
                f" only in the episode whose results showed them)"
            )
        return found


def tool_method(name: str) -> Callable[..., Any]:
    """The typed method that declares the tool `name` (its signature and docstring are the
    tool's schema); KeyError naming every tool when there is none."""
    if name in ShopTools.declared_specs():
        return getattr(ShopTools, name)  # type: ignore[no-any-return]
    for pack in tool_packs():
        if pack.owns(name):
            return getattr(handler_for(pack).toolkit, name)  # type: ignore[no-any-return]
    raise KeyError(f"no tool {name!r} (tools: {', '.join(ShopTools.tool_specs())})")


def _parse_price(text: str) -> tuple[float | None, float | None]:
    try:
        return parse_price(text)
    except SearchError as e:
        raise ArgumentError(f"find_product: {e}") from None


def _parse_services(text: str) -> tuple[str, ...]:
    wanted: list[str] = []
    for raw in text.split(","):
        s = raw.strip()
        if not s or s == "default":
            continue
        if s not in SERVICES:
            raise ArgumentError(
                f"find_product: unknown service {s[:40]!r}; allowed: "
                + ", ".join((*SERVICES, "default"))
            )
        if s not in wanted:
            wanted.append(s)
    return tuple(wanted)
