"""Whether an episode's first search reads the request's filters.

A small tuned model's searches mostly use the request's words; where it fails is the filters:
a price bound the customer never gave, an upper bound written as a lower one, a service left
out. :func:`filters_read` says, for a one-item product episode, whether its first
``find_product`` call's ``price`` and ``service`` are the ones the request states, as the
reference reader reads them (:func:`~shopbench.agents.reference.query_reading.read_query`,
what ``first_hit_filtered`` searches with): the price as the same range (``"0-500"`` and
``"-500"`` are one bound), the services as the same set. It is a diagnosis of how a model
reads a request, not a grade: the grader decides success.
"""

from __future__ import annotations

from typing import Any

from shopbench.agents.reference.query_reading import read_query
from shopbench.agents.reference.session import Session
from shopbench.catalog.search.filters import parse_price
from shopbench.errors import ShopbenchError
from shopbench.records.tools import Tool
from shopbench.records.trajectory import Trajectory

Filters = tuple[tuple[float, float | None] | None, frozenset[str]]
"""A search's price range (low, high; no low reads as 0) and its services."""
READ_INTENTS = frozenset({"product"})
"""Intents with one item to find, whose first search the request's filters describe."""
_NO_SERVICE = frozenset({"", "default"})


def search_filters(arguments: dict[str, Any]) -> Filters | None:
    """The filters of find_product `arguments`; None when its price is not a range the
    search reads."""
    price = arguments.get("price")
    bounds: tuple[float, float | None] | None = None
    if price not in (None, ""):
        try:
            lo, hi = parse_price(str(price))
        except ShopbenchError:
            return None
        bounds = (lo or 0.0, hi)
    service = str(arguments.get("service") or "")
    return bounds, frozenset(s.strip() for s in service.split(",")) - _NO_SERVICE


def requested_filters(query: str) -> Filters:
    """The filters the request states for its first item (none when it names no item)."""
    items = read_query(query).items
    if not items:
        return None, frozenset()
    found = search_filters(Session.search_args(items[0], items[0].phrase))
    return found if found is not None else (None, frozenset())


def filters_read(t: Trajectory) -> bool | None:
    """Whether `t`'s first search used the request's price and services; None when `t` is
    not a one-item product episode or searched nothing."""
    if t.intent not in READ_INTENTS:
        return None
    first = next((e for e in t.tool_log if e.name == Tool.FIND_PRODUCT), None)
    if first is None or not isinstance(first.arguments, dict):
        return None
    return search_filters(first.arguments) == requested_filters(t.query)
