"""The ``openai:MODEL@URL`` spec that names a model behind an OpenAI-compatible server.

Policies (`--policy`) and judges (`--judge`) are both named this way; one parser serves both.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from shopbench.errors import ShopbenchError

OPENAI_PREFIX = "openai:"


def split_openai_spec(
    spec: str, *, kind: str, example: str, error: type[ShopbenchError]
) -> tuple[str, str]:
    """(model, base URL) of ``openai:MODEL@URL`` (the prefix may be absent).

    Raises `error` saying which part is wrong, naming the spec as a `kind` ("policy",
    "judge") and showing `example`, a well-formed spec.
    """
    body = spec[len(OPENAI_PREFIX) :] if spec.startswith(OPENAI_PREFIX) else spec
    model, sep, url = body.rpartition("@")
    if not sep or not model:
        raise error(f"{kind} {spec!r}: expected openai:MODEL@URL, e.g. {example}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        example_url = example.rpartition("@")[2]
        raise error(f"{kind} {spec!r}: {url!r} is not an http(s) URL (e.g. {example_url})")
    return model, url
