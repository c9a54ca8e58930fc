"""Checking the arguments of a search: price ranges, services, shop ids, sorts and pages.

Each function returns the value in the form the index uses, or raises
:class:`~shopbench.catalog.errors.SearchError` with a one-line message naming the argument,
the value given and what is allowed, so the message can go back to an agent or a user
unchanged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from shopbench.catalog.errors import SearchError
from shopbench.catalog.schema import SERVICES, SORTS

PriceRange = tuple[float | None, float | None]
"""(low, high), both inclusive; None leaves that side open."""

PAGE_SIZE = 10
MAX_PAGE = 5
WINDOW = PAGE_SIZE * MAX_PAGE
"""ShoppingBench's find_product ranks the top 50 and shows them 10 per page."""

_NUMBER = r"\d+(?:\.\d+)?|\.\d+"
_PRICE = re.compile(rf"^\s*(?P<lo>{_NUMBER})?\s*-\s*(?P<hi>{_NUMBER})?\s*$")
_ID = re.compile(r"^[0-9]{1,20}$")
PRICE_FORM = '"lo-hi", "lo-" or "-hi" with non-negative numbers, e.g. "0-500"'


def parse_price(text: str) -> PriceRange:
    """Parse ``"lo-hi"``, ``"lo-"`` or ``"-hi"`` into an inclusive (low, high) range.

    ``"0-500"`` → ``(0.0, 500.0)``, ``"500-"`` → ``(500.0, None)``, ``"-500"`` →
    ``(None, 500.0)``. Anything else — no bound, a negative or non-numeric bound,
    low above high — raises SearchError naming the value and the allowed form.
    """
    m = _PRICE.match(text) if isinstance(text, str) else None
    if m is None or (m["lo"] is None and m["hi"] is None):
        raise SearchError(f"price {text!r} is not a price range; use {PRICE_FORM}")
    lo = float(m["lo"]) if m["lo"] is not None else None
    hi = float(m["hi"]) if m["hi"] is not None else None
    return check_price((lo, hi))


def check_price(price: PriceRange | str | None) -> PriceRange | None:
    """A validated price range (a string is parsed with :func:`parse_price`); None if open.

    Bounds must be finite and non-negative, and low must not exceed high.
    """
    if price is None:
        return None
    if isinstance(price, str):
        return parse_price(price)
    if not isinstance(price, tuple | list) or len(price) != 2:
        raise SearchError(f"price {price!r} is not a price range; use {PRICE_FORM}")
    lo, hi = price
    for name, v in (("low", lo), ("high", hi)):
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0
        ):
            raise SearchError(
                f"price {name} bound {v!r} must be a finite non-negative number; use {PRICE_FORM}"
            )
    if lo is None and hi is None:
        return None
    if lo is not None and hi is not None and lo > hi:
        raise SearchError(f"price range {lo:g}-{hi:g} is empty: low is above high")
    return (None if lo is None else float(lo), None if hi is None else float(hi))


def check_services(service: str | Sequence[str] | None) -> tuple[str, ...]:
    """The required services, deduplicated, in SERVICES order.

    Accepts names or comma-separated names (``"COD,official"``), alone or in a sequence; an
    unknown name raises SearchError listing the allowed names. Matching is exact.
    """
    if service is None:
        return ()
    items = [service] if isinstance(service, str) else list(service)
    names = [n for item in items for n in (item.split(",") if isinstance(item, str) else [item])]
    wanted: set[str] = set()
    for raw in names:
        name = raw.strip() if isinstance(raw, str) else raw
        if name == "":
            continue
        if name not in SERVICES:
            raise SearchError(
                f"service {name!r} is not one of {', '.join(SERVICES)}"
            )
        wanted.add(name)
    return tuple(s for s in SERVICES if s in wanted)


def check_sort(sort: str | None) -> str:
    """The sort name (None means "default"); anything not in SORTS raises SearchError."""
    if sort is None:
        return "default"
    if sort not in SORTS:
        raise SearchError(f"sort {sort!r} is not one of {', '.join(SORTS)}")
    return sort


def check_shop_id(shop_id: str | None) -> str | None:
    """The shop id to filter on (None or "" for every shop); it must be 1-20 digits."""
    if shop_id is None or shop_id == "":
        return None
    if not isinstance(shop_id, str) or not _ID.match(shop_id):
        raise SearchError(f"shop_id {shop_id!r} is not a shop id (1-20 digits)")
    return shop_id


def check_page(page: int) -> int:
    """The page number; it must be an integer from 1 to MAX_PAGE."""
    if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= MAX_PAGE:
        raise SearchError(f"page {page!r} is out of range; pages are 1 to {MAX_PAGE}")
    return page


def check_window(window: int) -> int:
    """The number of ranked hits a search returns; a positive integer up to 1000."""
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= 1000:
        raise SearchError(f"window {window!r} must be an integer from 1 to 1000")
    return window
