"""What a tool pack declares, and the one registry of packs.

A :class:`ToolPack` is the low-floor half of a capability that spans the layers: the tools
it offers an agent (their schemas are generated from its handler's typed methods, at the
environment's floor) and one hook per layer that renders or re-reads a log entry of them.
Every hook has a default that treats the pack's calls as plain tool calls, so a pack states
only where it differs. The layers ask :func:`pack_of` which pack owns a tool and call its
hook; none tests a tool's name.

The registry is ordered (the built-in packs first, in :data:`BUILTIN`'s order, then those
registered later); looking up a name it lacks is an error that lists the names it has.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shopbench.chat import ChatMessage
from shopbench.records.outcome import Outcome
from shopbench.records.trajectory import ToolLogEntry, Trajectory


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
"""The modules of :mod:`shopbench.packs` that declare a pack (``PACK``), in order."""

_PACKS: dict[str, ToolPack] = {}
_BUILTIN_NAMES: set[str] = set()


def _packs() -> dict[str, ToolPack]:
    if not _PACKS:
        for module in BUILTIN:
            pack: ToolPack = importlib.import_module(f"shopbench.packs.{module}").PACK
            _PACKS[pack.name] = pack
            _BUILTIN_NAMES.add(pack.name)
    return _PACKS


def register_pack(pack: ToolPack) -> None:
    """Add `pack` after the packs already registered; ValueError if its name or one of its
    tools is taken."""
    packs = _packs()
    if pack.name in packs:
        raise ValueError(f"tool pack {pack.name!r} is already registered")
    for tool in pack.tools:
        owner = pack_of(tool)
        if owner is not None:
            raise ValueError(f"tool {tool!r} already belongs to the tool pack {owner.name!r}")
    packs[pack.name] = pack


def unregister_pack(name: str) -> None:
    """Remove the pack `name` (a test's toy pack); ValueError for a built-in or unknown one."""
    packs = _packs()
    if name not in packs or name in _BUILTIN_NAMES:
        raise ValueError(f"tool pack {name!r} is not a registered add-on pack")
    del packs[name]


def tool_packs() -> tuple[ToolPack, ...]:
    """Every registered pack, built-in ones first."""
    return tuple(_packs().values())


def tool_pack(name: str) -> ToolPack:
    """The pack `name`; ValueError naming the registered ones when there is none."""
    pack = _packs().get(name)
    if pack is None:
        raise ValueError(f"unknown tool pack {name!r} (registered: {', '.join(_packs())})")
    return pack


def pack_of(tool: str) -> ToolPack | None:
    """The pack that offers `tool`; None for a tool every task has, or no tool at all."""
    return next((p for p in _packs().values() if p.owns(tool)), None)


def pack_facts(outcome: Outcome | None, recommend_turn: int | None) -> list[str]:
    """Every pack's lines for the LLM judge's facts, in pack order."""
    return [line for p in tool_packs() for line in p.facts(outcome, recommend_turn)]


def pack_page_rows(trajectory: Trajectory) -> list[dict[str, Any]]:
    """Every pack's rows for the episode page's conversation section, in pack order."""
    return [row for p in tool_packs() for row in p.page_rows(trajectory)]


def tools_of(packs: Sequence[ToolPack]) -> frozenset[str]:
    """The tools `packs` offer together."""
    return frozenset(t for p in packs for t in p.tools)
