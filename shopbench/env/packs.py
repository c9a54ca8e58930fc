"""The environment's side of the tool packs: each pack's handler, and the one registry of them.

A pack's declaration (:class:`~shopbench.packs.pack.ToolPack`) sits below the environment;
its handler sits here, because running the tools may need the task's gold data (the
shopper reads the hidden card). A :class:`PackHandler` holds the pack's toolkit (the typed
``@tool`` methods their schemas are generated from, :mod:`shopbench.env.toolkit`) and how an
episode opens it: a :class:`PackSession`, one episode's toolkit and state. The environment
offers an intent's packs (``IntentSpec.packs``) and the episode runs their calls through
their sessions; nothing here or in the episode tests a tool's name.

A handler is found by its pack in :data:`HANDLERS`, the one registry idiom
(:class:`shopbench.registry.Registry`): registered with :func:`register_handler`, or, for a
pack that names its handler's module (``ToolPack.handler``), that module's ``HANDLER``,
imported and registered on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from shopbench.env.toolkit import Toolkit, ToolSpec
from shopbench.packs.pack import ToolPack, tool_packs
from shopbench.registry import Registry

if TYPE_CHECKING:
    from shopbench.catalog.store import Catalog
    from shopbench.chat import EpisodeLimits
    from shopbench.env.knowledge_index import KnowledgeIndex
    from shopbench.records.dialogue import Dialogue
    from shopbench.tasks.model import Task


class Rephraser(Protocol):
    """A model that rewords one answer of a pack's tool (the LLM shopper); raises on any
    failure, and the pack's own words stand."""

    async def rephrase(self, answer: str) -> str: ...


class Setting(Protocol):
    """What a pack's handler reads of the environment an episode is made in
    (:class:`~shopbench.env.env.ShoppingEnv`)."""

    @property
    def catalog(self) -> Catalog: ...

    @property
    def limits(self) -> EpisodeLimits: ...

    @property
    def rephraser(self) -> Rephraser | None: ...

    def knowledge_index(self) -> KnowledgeIndex: ...


class PackSession:
    """One episode's side of a pack: the toolkit its calls run on, and what the pack keeps
    of the episode. The defaults are those of a pack that keeps nothing and never rewords."""

    def __init__(self, toolkit: Toolkit) -> None:
        self.toolkit = toolkit

    def dialogue(self) -> Dialogue | None:
        """The conversation the outcome records (the shopper's log); None when none."""
        return None

    async def reword(self) -> str | None:
        """Other words for the answer to the last call, awaited after it (an LLM's); None:
        the answer stands."""
        return None

    def accept(self, text: str) -> bool:
        """Take `text` as the wording of the last call's answer (a replay passes archived
        words); False: the answer stands."""
        return False


Opener = Callable[["Setting", "Task", str], PackSession]
"""Opens a pack for one episode: the environment, the task, and the episode's dialogue id
(the archived episode's id on a replay under another key)."""


@dataclass(frozen=True)
class PackHandler:
    """A pack's tools as they run: its toolkit class and how an episode opens it."""

    pack: ToolPack
    toolkit: type[Toolkit]
    open: Opener

    def __post_init__(self) -> None:
        offered = list(self.toolkit.tool_specs())
        if offered != list(self.pack.tools):
            raise TypeError(
                f"tool pack {self.pack.name}: its toolkit offers {offered}, the pack declares "
                f"{list(self.pack.tools)}"
            )


def _handled_pack(handler: PackHandler) -> str:
    return handler.pack.name


HANDLERS: Registry[PackHandler] = Registry("tool pack handler", key=_handled_pack)
"""The handlers by their pack's name, in the order they were registered or first used."""


def register_handler(
    handler: PackHandler, *, before: str | None = None, after: str | None = None
) -> PackHandler:
    """Register `handler` for its pack (placed as :meth:`Registry.register` places it);
    RegistryError if the pack has one already."""
    return HANDLERS.register(handler, before=before, after=after)


def unregister_handler(name: str) -> None:
    """Remove the handler of the pack `name` (a test's toy pack), if it has one."""
    if name in HANDLERS:
        HANDLERS.unregister(name)


def handler_for(pack: ToolPack) -> PackHandler:
    """The handler of `pack`: the registered one, else its handler module's ``HANDLER``
    (registered then)."""
    handler = HANDLERS.get(pack.name)
    if handler is None:
        found: PackHandler = importlib.import_module(pack.handler).HANDLER
        if found.pack is not pack:
            raise TypeError(
                f"{pack.handler}.HANDLER handles {found.pack.name!r}, not {pack.name!r}"
            )
        handler = register_handler(found)
    return handler


def pack_specs(packs: tuple[ToolPack, ...] | None = None) -> dict[str, ToolSpec]:
    """The schemas of `packs`' tools (every registered pack's when None), in pack order."""
    out: dict[str, ToolSpec] = {}
    for pack in tool_packs() if packs is None else packs:
        out.update(handler_for(pack).toolkit.tool_specs())
    return out
