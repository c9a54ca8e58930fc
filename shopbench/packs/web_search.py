"""The web-search pack: ``web_search`` over the catalog's knowledge pages, offered on
knowledge tasks as ShoppingBench offers it on its ``web`` tasks.

Its calls are plain tool calls in every layer (each hook is the default); its handler is
:mod:`shopbench.env.web_search`.
"""

from __future__ import annotations

from shopbench.packs.pack import ToolPack
from shopbench.records.tools import Tool

PACK = ToolPack(name="web_search", tools=(Tool.WEB_SEARCH,), handler="shopbench.env.web_search")
