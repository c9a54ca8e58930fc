"""Versioned system prompts; the version is recorded in every episode.

A prompt file may hold ``{max_turns}``-style placeholders, filled from the episode limits.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from shopbench.env.errors import EnvError

SYSTEM_PROMPT_VERSION = "v2"
"""The release's prompt: v1 with when to ask the shopper of a clarify task (v1 told an agent
never to ask); v1 stays packaged for replaying older records."""


@cache
def load_system_prompt(version: str = SYSTEM_PROMPT_VERSION) -> str:
    """The text of `system_<version>.txt`; EnvError naming the known versions if absent."""
    name = f"system_{version}.txt"
    folder = resources.files(__name__)
    path = folder / name
    if not path.is_file():
        known = sorted(
            p.name[len("system_") : -len(".txt")]
            for p in folder.iterdir()
            if p.name.startswith("system_") and p.name.endswith(".txt")
        )
        raise EnvError(f"unknown system prompt version {version!r}; known: {known}")
    return path.read_text(encoding="utf-8").strip()


def render_system_prompt(version: str, **values: int | str) -> str:
    """The prompt of `version` with its ``{name}`` placeholders filled from `values`."""
    text = load_system_prompt(version)
    for name, value in values.items():
        text = text.replace("{" + name + "}", str(value))
    return text
