"""The browser's Jinja environment, shared by the served pages and the offline miner report.

Autoescaped everywhere, strict about undefined names; nothing here marks text safe. It
needs only ``jinja2`` (the ``api`` extra), not the web framework, so a report can be
rendered where nothing is served.
"""

from __future__ import annotations

import json

from jinja2 import Environment, PackageLoader, StrictUndefined

COLLAPSE_CHARS = 400
"""Longer arguments and observations start collapsed."""


def pretty(text: str | None) -> str:
    """JSON text indented for reading; other text as it is."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return text


env = Environment(
    loader=PackageLoader("shopbench.archive.api", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
"""The one environment every template renders in."""
env.filters["pretty"] = pretty
env.globals["COLLAPSE_CHARS"] = COLLAPSE_CHARS
