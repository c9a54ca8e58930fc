"""Where an OpenAI-compatible server's routes are, given its API root."""

from __future__ import annotations

from urllib.parse import urlsplit

_CHAT = "/chat/completions"


def api_root(base_url: str) -> str:
    """The API root: `base_url` without a trailing slash, ``/v1`` added when it has no path."""
    base = base_url.rstrip("/")
    return base + "/v1" if urlsplit(base).path in ("", "/") else base


def chat_url(base_url: str) -> str:
    """The chat-completions URL of `base_url` (which may already be that URL)."""
    base = base_url.rstrip("/")
    return base if base.endswith(_CHAT) else api_root(base) + _CHAT


def models_url(base_url: str) -> str:
    """The model-list URL (``GET /v1/models``) of `base_url`."""
    return api_root(base_url) + "/models"
