"""The shopping environment: a catalog opened once, episodes made from it per task."""

from __future__ import annotations

import secrets
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from shopbench.chat import EpisodeLimits
from shopbench.env.episode import Episode
from shopbench.env.errors import EnvError
from shopbench.env.knowledge_index import KnowledgeIndex
from shopbench.env.packs import Rephraser, handler_for, pack_specs
from shopbench.env.prompts import SYSTEM_PROMPT_VERSION, render_system_prompt
from shopbench.env.toolkit import ToolSpec
from shopbench.env.tools import ShopTools

if TYPE_CHECKING:
    from collections.abc import Sequence

    from shopbench.catalog.store import Catalog
    from shopbench.env.tokens import TokenBook
    from shopbench.outcome.title import TitleMatcher
    from shopbench.records.dialogue import Dialogue
    from shopbench.records.outcome import Outcome
    from shopbench.records.task import Intent
    from shopbench.tasks.model import Task

KEY_BYTES = 32


class ShoppingEnv:
    """A catalog with its search index and knowledge corpus, serving many episodes.

    Thread-safe for making and playing episodes concurrently: episodes share only the
    read-only indexes; the knowledge index is built once, on the first knowledge task.
    """

    def __init__(
        self,
        catalog: Catalog,
        limits: EpisodeLimits | None = None,
        prompt_version: str = SYSTEM_PROMPT_VERSION,
        matcher: TitleMatcher | None = None,
        rephraser: Rephraser | None = None,
    ) -> None:
        self.catalog = catalog
        self.matcher = matcher
        self.rephraser = rephraser
        """The LLM shopper's model (:mod:`shopbench.env.shopper.rephrase`); None: the rules'
        words."""
        self.limits = limits or EpisodeLimits()
        self.prompt_version = prompt_version
        self.system_prompt = render_system_prompt(
            prompt_version,
            max_turns=self.limits.max_turns,
            max_calls_per_turn=self.limits.max_calls_per_turn,
        )
        self._knowledge: KnowledgeIndex | None = None
        self._lock = threading.Lock()
        self._siblings: dict[str, ShoppingEnv] = {}

    @classmethod
    def open(
        cls,
        catalog_dir: str | Path,
        limits: EpisodeLimits | None = None,
        prompt_version: str = SYSTEM_PROMPT_VERSION,
    ) -> ShoppingEnv:
        """Open the catalog at `catalog_dir` (CatalogError naming the path if it is not one)."""
        from shopbench.catalog.store import Catalog

        return cls(Catalog.open(catalog_dir), limits, prompt_version)

    def with_prompt(self, version: str) -> ShoppingEnv:
        """This environment (the same catalog, limits and matcher) under the system prompt
        `version` (a replay of a record played under another one), made once per version;
        itself when `version` is its own. EnvError for a version no prompt file has."""
        if version == self.prompt_version:
            return self
        with self._lock:
            sibling = self._siblings.get(version)
            if sibling is None:
                sibling = ShoppingEnv(
                    self.catalog, self.limits, version, self.matcher, self.rephraser
                )
                self._siblings[version] = sibling
            return sibling

    def tool_specs(self, intent: Intent | str) -> dict[str, ToolSpec]:
        """The tools offered on a task of `intent`, by name, in ShoppingBench's order: the
        tools every task gets, then those of the packs the intent declares (ShoppingBench
        offers web search only on knowledge tasks; so do we)."""
        from shopbench.tasks.intent_registry import intent_spec

        return {**ShopTools.declared_specs(), **pack_specs(intent_spec(intent).packs)}

    def knowledge_index(self) -> KnowledgeIndex:
        """The web_search index over the catalog's knowledge pages (built on first use)."""
        with self._lock:
            if self._knowledge is None:
                self._knowledge = KnowledgeIndex(self.catalog.knowledge())
            return self._knowledge

    def new_episode(
        self,
        task: Task,
        key: bytes | None = None,
        tokens: TokenBook | None = None,
        dialogue_id: str | None = None,
    ) -> Episode:
        """A fresh episode for `task`; `key` (≥ 16 bytes) fixes its tokens, none draws one.

        The key decides every id the agent sees and is never shown to it: the same key
        reproduces the same tokens, another key makes every earlier token invalid.
        `tokens` replaces the key's book (a replay's
        :class:`~shopbench.env.tokens.RecordedTokenBook`: the tokens an archived episode showed).
        A clarify task's shopper words its answers from `dialogue_id` (default: the
        episode's id; a replay under another key passes the archived episode's id).
        """
        if key is None:
            key = secrets.token_bytes(KEY_BYTES)
        elif len(key) < 16:
            raise EnvError(f"an episode key needs at least 16 bytes, got {len(key)}")
        from shopbench.env.episode import episode_id
        from shopbench.tasks.intent_registry import intent_spec

        packs = intent_spec(task.intent).packs
        sessions = [handler_for(p).open(self, task, dialogue_id or episode_id(key)) for p in packs]
        return Episode(
            task=task,
            key=key,
            index=self.catalog.index,
            specs=self.tool_specs(task.intent),
            system_prompt=self.system_prompt,
            system_prompt_version=self.prompt_version,
            limits=self.limits,
            tokens=tokens,
            sessions=sessions,
        )

    def grade(
        self,
        task: Task,
        product_ids: Sequence[str | None],
        dialogue: Dialogue | None = None,
    ) -> Outcome:
        """ShoppingBench's outcome rules applied to the recommended catalog ids, in order
        (None, or an id the catalog lacks, is an empty recommendation for its slot), with a
        clarify episode's `dialogue` (:meth:`Episode.dialogue`) for the question cost."""
        from shopbench.outcome.grader import grade

        wanted = [i for i in product_ids if i is not None]
        found = {p.product_id: p for p in self.catalog.get(wanted) if p is not None}
        products = [found.get(i) if i else None for i in product_ids]
        return grade(task, products, self.matcher, dialogue)
