"""Reading an episode back from its messages: the request, the turns so far, their results.

A reference policy keeps no memory between turns: every turn it reads the whole
conversation again, exactly what a model would be shown. This module turns that message
list into typed records — the first user message, and per earlier assistant turn the calls
it made and what each returned (search hits, product details, web pages, or an error), read
with the environment's own result models (:mod:`shopbench.env.results`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from shopbench.chat import ChatMessage, read_arguments
from shopbench.env.results import (
    ProductDetails,
    ProductHit,
    WebResult,
    parse_product_details,
    parse_search_results,
    parse_web_results,
)
from shopbench.records.tools import Tool

DEFAULT_MAX_TURNS = 30
# The system prompt states the episode's turn budget ("at most 30 turns").
_TURN_BUDGET = re.compile(r"at most (\d+) turns")


@dataclass(frozen=True, slots=True)
class CallResult:
    """A tool call of an earlier turn and what the environment answered."""

    name: str
    arguments: dict[str, Any]
    text: str
    error: str | None = None
    hits: tuple[ProductHit, ...] = ()
    details: tuple[ProductDetails, ...] = ()
    pages: tuple[WebResult, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None


@dataclass(slots=True)
class Conversation:
    """The request and the earlier turns of an episode, as a policy reads them."""

    query: str
    tools: tuple[str, ...]
    turns: list[list[CallResult]] = field(default_factory=list)
    max_turns: int = 30


def read_conversation(messages: list[ChatMessage], tools: list[dict[str, Any]]) -> Conversation:
    """The first user message, the offered tool names, every earlier turn's results, and
    the turn budget the system prompt states.

    A turn is an assistant message; its results are the tool messages answering its calls
    (matched by tool_call_id, in call order). A call with no answer reads as an error.
    """
    query = next((m.content or "" for m in messages if m.role == "user"), "")
    system = next((m.content or "" for m in messages if m.role == "system"), "")
    budget = _TURN_BUDGET.search(system)
    names = tuple(
        t.get("function", {}).get("name", "") for t in tools if isinstance(t, dict)
    )
    turns = [
        turn_results(messages, i) for i, m in enumerate(messages) if m.role == "assistant"
    ]
    max_turns = int(budget.group(1)) if budget else DEFAULT_MAX_TURNS
    return Conversation(query=query, tools=names, turns=turns, max_turns=max_turns)


def turn_results(messages: list[ChatMessage], index: int) -> list[CallResult]:
    """The results of the calls of the assistant message at `index`, in call order: the
    tool messages after it answering them by tool_call_id (a call with none reads as an
    error)."""
    turn = messages[index]
    answers: dict[str, ChatMessage] = {}
    for m in messages[index + 1 :]:
        if m.role == "assistant":
            break
        if m.role == "tool" and m.tool_call_id:
            answers.setdefault(m.tool_call_id, m)
    results: list[CallResult] = []
    for call in turn.tool_calls or []:
        answer = answers.get(call.id)
        text = (answer.content or "") if answer is not None else "Error: no result"
        results.append(_result(call.function.name, call.function.arguments, text))
    return results


def _result(name: str, arguments: str, text: str) -> CallResult:
    args = _arguments(arguments)
    if text.startswith("Error:"):
        return CallResult(name=name, arguments=args, text=text, error=text[6:].strip())
    if name == Tool.FIND_PRODUCT:
        return CallResult(name=name, arguments=args, text=text, hits=_hits(text))
    if name == Tool.VIEW_PRODUCT_INFORMATION:
        return CallResult(name=name, arguments=args, text=text, details=_details(text))
    if name == Tool.WEB_SEARCH:
        return CallResult(name=name, arguments=args, text=text, pages=_pages(text))
    return CallResult(name=name, arguments=args, text=text)


# Parsing is cached by text: a policy re-reads the same observations on every turn.
@lru_cache(maxsize=4096)
def _arguments(text: str) -> dict[str, Any]:
    return dict(read_arguments(text)[0] or {})


@lru_cache(maxsize=2048)
def _hits(text: str) -> tuple[ProductHit, ...]:
    return tuple(parse_search_results(text))


@lru_cache(maxsize=2048)
def _details(text: str) -> tuple[ProductDetails, ...]:
    return tuple(parse_product_details(text))


@lru_cache(maxsize=1024)
def _pages(text: str) -> tuple[WebResult, ...]:
    return tuple(parse_web_results(text))


def all_hits(turns: list[list[CallResult]]) -> list[ProductHit]:
    """Every search hit shown so far, first showing first, each product once."""
    seen: dict[str, ProductHit] = {}
    for turn in turns:
        for r in turn:
            for h in r.hits:
                seen.setdefault(h.product_id, h)
    return list(seen.values())


def all_details(turns: list[list[CallResult]]) -> dict[str, ProductDetails]:
    """Every product viewed so far, by product_id."""
    out: dict[str, ProductDetails] = {}
    for turn in turns:
        for r in turn:
            for d in r.details:
                out[d.product_id] = d
    return out
