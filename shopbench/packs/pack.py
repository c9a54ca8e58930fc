"""What a tool pack declares, and the one registry of packs.

A :class:`ToolPack` is the low-floor half of a capability that spans the layers: the tools
it offers an agent (their schemas are generated from its handler's typed methods, at the
environment's floor) and one hook per layer that renders or re-reads a log entry of them.
Every hook has a default that treats the pack's calls as plain tool calls, so a pack states
only where it differs. The layers ask :func:`pack_of` which pack owns a tool and call its
hook; none tests a tool's name.

The packs are :data:`PACKS`, the one registry idiom (:class:`shopbench.registry.Registry`):
the built-in packs first, in :data:`BUILTIN`'s order, each loaded on first use from the
module of its name, then those registered (:func:`register_pack`, ``before=`` / ``after=``
a pack named); looking up a name it lacks is a RegistryError naming the packs it has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shopbench.chat import ChatMessage
from shopbench.errors import RegistryError
from shopbench.records.outcome import Outcome
from shopbench.records.trajectory import ToolLogEntry, Trajectory
from shopbench.registry import Registry, declared_in


@dataclass(frozen=True)
class Voice:
    """A tool message that is someone's words in the conversation (an ATIF ``user`` step)
    rather than the agent's observation: the words, and the step's extra fields."""

    message: str
    extra: dict[str, Any]


def _no_voice(message: ChatMessage, entry: ToolLogEntry) -> Voice | None:
    return None


def _no_rows(trajectory: Trajectory) -> list[dict[str, Any]]:
    return []


def _no_facts(outcome: Outcome | None, recommend_turn: int | None) -> list[str]:
    return []


def _no_rewordings(record: Trajectory) -> list[str | None]:
    return []


@dataclass(frozen=True)
class ToolPack:
    """An intent's extra tools and how each layer shows their calls (see the module).

    `handler` is the module of the environment's floor whose ``HANDLER`` runs the tools
    (:class:`shopbench.env.packs.PackHandler`); it is imported on the first episode that
    offers them.
    """

    name: str
    tools: tuple[str, ...]
    handler: str
    voice: Callable[[ChatMessage, ToolLogEntry], Voice | None] = field(default=_no_voice)
    """ATIF (:mod:`shopbench.traces.atif`): a tool message the log backs, as the words of
    someone in the conversation, after the agent step that asked; None keeps it the agent's
    observation."""
    page_rows: Callable[[Trajectory], list[dict[str, Any]]] = field(default=_no_rows)
    """The trace browser (:mod:`shopbench.traces.api.pages`): the rows of the episode page's
    conversation with someone other than the agent, in order."""
    facts: Callable[[Outcome | None, int | None], list[str]] = field(default=_no_facts)
    """The LLM judge (:mod:`shopbench.judging.llm.facts`): lines the prompt's facts end with,
    from the graded outcome and the turn (0-based) of the recommendation."""
    rewordings: Callable[[Trajectory], list[str | None]] = field(default=_no_rewordings)
    """The replay (:mod:`shopbench.verify.replay`): per call of the pack's tools the record
    answered without error, in order, the archived words to offer the episode in place of
    its own answer (:meth:`shopbench.env.episode.Episode.accept_rewording`), None where its
    own answer stood."""

    def owns(self, tool: str) -> bool:
        """Whether `tool` is one of this pack's tools."""
        return tool in self.tools


BUILTIN: tuple[str, ...] = ("web_search", "shopper")
"""The built-in packs, in order: each the ``PACK`` of the module of the same name in
:mod:`shopbench.packs`."""


def _pack_name(pack: ToolPack) -> str:
    return pack.name


def _builtin() -> list[ToolPack]:
    return declared_in("shopbench.packs", BUILTIN, "PACK", _pack_name, kind="tool pack")


class PackRegistry(Registry[ToolPack]):
    """The packs in order: the one registry idiom (:class:`shopbench.registry.Registry`)
    with a pack's own check on top (:meth:`admit`: a tool belongs to one pack)."""

    def admit(self, name: str, entry: ToolPack, at: int) -> None:
        """RegistryError for a tool another pack offers."""
        for tool in entry.tools:
            owner = self.owner(tool)
            if owner is not None:
                raise self.error(f"tool {str(tool)!r} already belongs to the pack {owner.name!r}")

    def owner(self, tool: str) -> ToolPack | None:
        """The pack that offers `tool`; None when none does."""
        return next((p for p in self.values() if p.owns(tool)), None)


PACKS = PackRegistry("tool pack", key=_pack_name, load=_builtin)
"""Every tool pack, built-in ones first (loaded on first use), then those registered."""


def register_pack(
    pack: ToolPack, *, before: str | None = None, after: str | None = None
) -> ToolPack:
    """Add `pack` after the packs already registered (or before or after the one named);
    RegistryError if its name or one of its tools is taken."""
    return PACKS.register(pack, before=before, after=after)


def unregister_pack(name: str) -> None:
    """Remove the pack `name` (a test's toy pack); RegistryError for a built-in or unknown
    one."""
    if name in BUILTIN or name not in PACKS:
        raise RegistryError(f"tool pack {name!r} is not a registered add-on pack")
    PACKS.unregister(name)


def tool_packs() -> tuple[ToolPack, ...]:
    """Every registered pack, in the registry's order."""
    return tuple(PACKS.values())


def tool_pack(name: str) -> ToolPack:
    """The pack `name`; RegistryError naming the registered ones when there is none."""
    return PACKS.lookup(name)


def pack_of(tool: str) -> ToolPack | None:
    """The pack that offers `tool`; None for a tool every task has, or no tool at all."""
    return PACKS.owner(tool)


def pack_facts(outcome: Outcome | None, recommend_turn: int | None) -> list[str]:
    """Every pack's lines for the LLM judge's facts, in pack order."""
    return [line for p in tool_packs() for line in p.facts(outcome, recommend_turn)]


def pack_page_rows(trajectory: Trajectory) -> list[dict[str, Any]]:
    """Every pack's rows for the episode page's conversation section, in pack order."""
    return [row for p in tool_packs() for row in p.page_rows(trajectory)]


def tools_of(packs: Sequence[ToolPack]) -> frozenset[str]:
    """The tools `packs` offer together."""
    return frozenset(t for p in packs for t in p.tools)
