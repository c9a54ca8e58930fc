"""The optional LLM-backed shopper: a model rewords the deterministic shopper's answer.

The deterministic shopper (:mod:`shopbench.env.shopper.shopper`) decides what is said; a model on
any OpenAI-compatible endpoint (the judge's client, :mod:`shopbench.openai_compat`) only
rewords it, shown that answer and nothing of the task. A rewording is kept only if
:func:`unfaithful_reason` finds no reason to refuse it, that is, it states the same facts
and no other: every number, attribute value and service the answer names, no number,
service, value of the task or word of the target's title that it does not, and nothing
that looks like an id or a link. Any failure — the endpoint down or slow, a malformed
reply, an unfaithful rewording — leaves the deterministic answer, and the shopper's log
records which of the two answered (:class:`~shopbench.records.dialogue.ShopperTurn.by`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from importlib import resources

from pydantic import Field

from shopbench.env.errors import EnvError
from shopbench.openai_compat.client import OpenAIClient
from shopbench.openai_compat.config import EndpointSettings
from shopbench.openai_compat.errors import MalformedReply
from shopbench.openai_compat.keys import api_key_from_env
from shopbench.openai_compat.spec import split_openai_spec

API_KEY_VARIABLES = ("SHOPBENCH_SHOPPER_API_KEY", "OPENAI_API_KEY")
PROMPT_VERSION = "v1"
"""Selects ``prompts/shopper_rephrase_<version>.txt``."""
MAX_REWORDING_CHARS = 300

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_LONG_DIGITS = re.compile(r"\d{6,}")
_LINK = re.compile(r"https?://|www\.|\bproduct[_ ]?id\b|\bshop[_ ]?id\b", re.I)
# A reasoning model's leading block (whatever its tag: the markers belong to agents/format).
_LEADING_BLOCK = re.compile(r"^\s*<([a-z_]+)>.*?</\1>", re.S | re.I)
_SERVICES: dict[str, re.Pattern[str]] = {
    "official": re.compile(r"official|lazmall", re.I),
    "freeShipping": re.compile(r"free (?:shipping|delivery)", re.I),
    "COD": re.compile(r"cash on delivery|\bCOD\b", re.I),
    "flashsale": re.compile(r"flash ?sale|lazflash", re.I),
}


class ShopperLLMConfig(EndpointSettings):
    """The model that rewords the shopper's answers (off unless configured)."""

    base_url: str = Field(min_length=1, description="the endpoint's API root, .../v1")
    model: str = Field(min_length=1, description="the model name sent with each request")
    api_key: str | None = Field(default=None, description="bearer token, if the server wants one")
    request_timeout_s: float = Field(
        default=10.0, gt=0, description="seconds one rewording may take before the rules answer"
    )
    retries: int = Field(default=0, ge=0, description="retries of a transient failure")
    max_tokens: int = Field(default=160, ge=16, description="tokens of one rewording")
    temperature: float = Field(default=0.0, ge=0, le=2, description="sampling temperature")


@cache
def rephrase_prompt(version: str = PROMPT_VERSION) -> str:
    """The system prompt of the rewording model."""
    name = f"shopper_rephrase_{version}.txt"
    return resources.files("shopbench.env.prompts").joinpath(name).read_text("utf-8").strip()


class LLMRephraser:
    """Rewords answers through an OpenAI-compatible endpoint."""

    def __init__(self, config: ShopperLLMConfig, client: OpenAIClient | None = None) -> None:
        self.config = config
        self._client = client or OpenAIClient(config.client_config(max_connections=16))

    async def rephrase(self, answer: str) -> str:
        """The model's rewording of `answer`; MalformedReply when the reply holds none."""
        body = {
            "model": self.config.model,
            "messages": [
                {"role": "system", "content": rephrase_prompt()},
                {"role": "user", "content": f"The answer to give: {answer}"},
            ],
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        data = await self._client.chat(self.config.base_url, body, api_key=self.config.api_key)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise MalformedReply("the rewording reply has no message content") from None
        if not isinstance(content, str):
            raise MalformedReply("the rewording reply's content is not text")
        return _LEADING_BLOCK.sub("", content, count=1).strip().strip("\"'").strip()

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.aclose()


def rephraser_from_spec(spec: str) -> LLMRephraser:
    """The LLM shopper of ``openai:MODEL@URL`` (its key from ``SHOPBENCH_SHOPPER_API_KEY``,
    else ``OPENAI_API_KEY``); EnvError saying what is wrong with the spec."""
    model, url = split_openai_spec(
        spec, kind="shopper", example="openai:Qwen/Qwen3-4B@http://localhost:8000/v1",
        error=EnvError,
    )  # fmt: skip
    key = api_key_from_env(API_KEY_VARIABLES)
    return LLMRephraser(ShopperLLMConfig(base_url=url, model=model, api_key=key))


def _names(text: str, value: str) -> bool:
    """Whether `text` holds `value` as a whole (not inside a longer word)."""
    return re.search(rf"(?<![a-z0-9]){re.escape(value)}(?![a-z0-9])", text) is not None


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text)}


def _services(text: str) -> set[str]:
    return {s for s, p in _SERVICES.items() if p.search(text)}


def unfaithful_reason(
    answer: str, rewording: str, *, values: Iterable[str], forbidden: Iterable[str]
) -> str | None:
    """Why `rewording` does not say what `answer` says and nothing more; None when it does.

    `values` are the task's attribute and SKU values (those the answer names must stay,
    the others must not appear); `forbidden` are words that must never appear unless the
    answer has them (the target's title words)."""
    text = rewording.strip()
    if not text or len(text) > MAX_REWORDING_CHARS or not text.isprintable():
        return "empty, too long or not one printable line"
    if _LONG_DIGITS.search(text) or _LINK.search(text):
        return "it names something like an id or a link"
    if _numbers(text) != _numbers(answer):
        return "its numbers are not the answer's"
    if _services(text) != _services(answer):
        return "its services are not the answer's"
    low, said = text.lower(), answer.lower()
    for value in sorted({v.lower() for v in values if v}):
        if _names(said, value) != _names(low, value):
            return f"value {value!r} is {'dropped' if _names(said, value) else 'added'}"
    words = set(re.findall(r"[a-z]{4,}", low)) - set(re.findall(r"[a-z]{4,}", said))
    leaked = words & {w.lower() for w in forbidden}
    if leaked:
        return f"it names {sorted(leaked)[0]!r}, which the answer does not"
    return None
