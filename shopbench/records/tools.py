"""The tools' names: the one vocabulary every layer spells a tool with.

An agent calls a tool by name, the validator's log records the name, and the rubric, the
trace browser, curation and the reference agents read it back. :class:`Tool` is that name,
typed: a :class:`~enum.StrEnum`, so a member *is* its string (``Tool.TERMINATE ==
"terminate"``) and a record, an export or a schema written with one holds the same bytes
as with the plain name.

The environment declares each tool once, as a typed method whose name is the member's
value (:mod:`shopbench.env.tools`; an intent's extra tools in their pack's handler,
:mod:`shopbench.packs`); ``tests/env/test_env_toolkit.py`` holds the two equal.
"""

from __future__ import annotations

from enum import StrEnum


class Tool(StrEnum):
    """Every tool the arena offers, in ShoppingBench's order."""

    FIND_PRODUCT = "find_product"
    """Search the marketplace (every task)."""
    VIEW_PRODUCT_INFORMATION = "view_product_information"
    """Open products' details (every task)."""
    RECOMMEND_PRODUCT = "recommend_product"
    """The one recommendation of an episode (every task)."""
    TERMINATE = "terminate"
    """End the episode (every task)."""
    WEB_SEARCH = "web_search"
    """Look a fact up in the knowledge pages (knowledge tasks: the web-search pack)."""
    ASK_SHOPPER = "ask_shopper"
    """Ask the customer what the request held back (clarify tasks: the shopper pack)."""


BASE_TOOLS: tuple[Tool, ...] = (
    Tool.FIND_PRODUCT,
    Tool.VIEW_PRODUCT_INFORMATION,
    Tool.RECOMMEND_PRODUCT,
    Tool.TERMINATE,
)
"""The tools every task offers; the others come with an intent's pack."""

SEARCHES: frozenset[str] = frozenset({Tool.FIND_PRODUCT, Tool.WEB_SEARCH})
"""The tools that search: their results are what an agent has seen, not what it chose."""
