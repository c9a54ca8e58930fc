"""The browser's Jinja environment, shared by the served pages and the offline miner report.

Autoescaped everywhere, strict about undefined names; nothing here marks text safe. It
needs only ``jinja2`` (the ``api`` extra), not the web framework, so a report can be
rendered where nothing is served.
"""

from __future__ import annotations

import json

from jinja2 import Environment, PackageLoader, StrictUndefined

from shopbench.chat import load_json, read_arguments
from shopbench.errors import UnreadableArguments

COLLAPSE_CHARS = 400
"""Longer arguments and observations start collapsed."""
PRETTY_DEPTH = 64
"""Nesting indented at most (the validator's observations nest a few levels)."""


def pretty(text: str | None) -> str:
    """JSON text indented for reading when the bounded reader reads it
    (:func:`~shopbench.chat.load_json`: no depth or number can break it); any other text,
    such as arguments no reader can trust, as it is."""
    if not text:
        return ""
    try:
        parsed = load_json(text, PRETTY_DEPTH)
    except UnreadableArguments:
        return text
    return json.dumps(parsed, indent=2, ensure_ascii=False)


def unreadable(text: str | None) -> str | None:
    """Why arguments an agent wrote cannot be read (shown beside them as a note), or None."""
    return read_arguments(text)[1] if text else None


env = Environment(
    loader=PackageLoader("shopbench.traces.api", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
"""The one environment every template renders in."""
env.filters["pretty"] = pretty
env.filters["unreadable"] = unreadable
env.globals["COLLAPSE_CHARS"] = COLLAPSE_CHARS
