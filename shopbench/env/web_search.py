"""The web-search pack's handler: ``web_search`` over the catalog's knowledge pages.

The pack (:mod:`shopbench.packs.web_search`) is offered on knowledge tasks; each episode
that offers it searches the environment's knowledge index (:mod:`.knowledge_index`, built
on the first such episode).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from shopbench.chat import EpisodeLimits
from shopbench.env.errors import ArgumentError
from shopbench.env.knowledge_index import KnowledgeIndex
from shopbench.env.packs import PackHandler, PackSession
from shopbench.env.results import WebResult
from shopbench.env.toolkit import Toolkit, tool
from shopbench.packs.web_search import PACK

if TYPE_CHECKING:
    from shopbench.env.packs import Setting
    from shopbench.tasks.model import Task


class WebSearchTools(Toolkit):
    """``web_search``, bound to the environment's knowledge index."""

    def __init__(self, knowledge: Callable[[], KnowledgeIndex], limits: EpisodeLimits) -> None:
        self._knowledge = knowledge
        self._limits = limits

    @tool
    def web_search(self, q: str, max_results: int = 10) -> list[WebResult]:
        """Search the web for information and return the matching pages (url, title, content).

        Args:
            q: What to look up, e.g. "where does the brand Kalibo Trail come from".
            max_results: How many results to return, from 1 to 10 (default 10).
        """
        cap = self._limits.max_web_results
        if not 1 <= max_results <= cap:
            raise ArgumentError(
                f"web_search: argument 'max_results' must be from 1 to {cap}, got {max_results}"
            )
        if not q.strip():
            raise ArgumentError("web_search: argument 'q' is empty; give the words to search")
        return self._knowledge().search(q, max_results, self._limits.max_snippet_chars)


def _open(env: Setting, task: Task, dialogue_id: str) -> PackSession:
    return PackSession(WebSearchTools(env.knowledge_index, env.limits))


HANDLER = PackHandler(pack=PACK, toolkit=WebSearchTools, open=_open)
