"""An optional paraphraser: rewrites template queries through an OpenAI-compatible endpoint.

The template writer is the default and needs no model. A paraphrase is accepted only if it
keeps, verbatim, every fragment the task's grading depends on — the product phrases, the
attribute and SKU values, every price number, a recognisable name for every service, the
knowledge question's facts — and does not reveal a knowledge task's answer; otherwise the
template query stays. A voucher task's rule block is never sent: it is kept unchanged after
the rewritten body. Paraphrases depend on the model, so a paraphrased file is reproducible
only with the same endpoint and sampling settings.

Requests go through the shared :class:`~shopbench.openai_compat.client.OpenAIClient` (the
retries, ``Retry-After`` and backoff the policy and the judge have). :class:`Paraphraser` is
async; :func:`paraphrase` is the blocking entry point for the task-building command.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from shopbench.openai_compat.client import OpenAIClient, Sleep
from shopbench.openai_compat.config import EndpointSettings
from shopbench.openai_compat.errors import EndpointFailure, MalformedReply
from shopbench.tasks.model import Task
from shopbench.tasks.queries import product_phrase
from shopbench.tasks.satisfy import slot_pairs

_SERVICE_NAMES = {
    "official": re.compile(r"official store|lazmall", re.I),
    "freeShipping": re.compile(r"free shipping|free delivery", re.I),
    "COD": re.compile(r"cash on delivery|\bcod\b", re.I),
    "flashsale": re.compile(r"flash ?sale|lazflash", re.I),
}
API_KEY_VARIABLES = ("SHOPBENCH_PARAPHRASE_KEY",)
"""Environment variables read, in order, for the paraphrasing endpoint's bearer token (by
:func:`shopbench.openai_compat.keys.api_key_from_env`)."""
_MAX_CONNECTIONS = 4


class ParaphraseConfig(EndpointSettings):
    """Where and how to paraphrase."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(description="API root of an OpenAI-compatible server, e.g. .../v1")
    model: str = Field(min_length=1, description="model name the server serves")
    api_key: str | None = Field(default=None, description="bearer token, if the server wants one")
    temperature: float = Field(default=0.7, ge=0, le=2, description="sampling temperature")
    request_timeout_s: float = Field(default=60.0, gt=0, description="seconds per request")
    connect_timeout_s: float = Field(default=60.0, gt=0, description="seconds to connect")
    max_tokens: int = Field(default=512, ge=16, description="longest rewrite accepted")
    max_response_bytes: int = Field(
        default=1 << 20, ge=1024,
        description="reply size cap (a rewrite is at most max_tokens long; this stops a flood)",
    )  # fmt: skip


class ParaphraseReport(BaseModel):
    """How many queries were rewritten, and why the others kept their template text."""

    rewritten: int = 0
    kept: dict[str, int] = Field(default_factory=dict, description="reason -> count")


def split_rules(query: str) -> tuple[str, str]:
    """A voucher query's body and its rule block (``""`` when there is none)."""
    head, sep, rules = query.partition("\n\nMy budget is only `")
    return (head, sep + rules) if sep else (query, "")


def must_keep(task: Task) -> list[str]:
    """The fragments a paraphrase of `task` must contain verbatim."""
    keep: list[str] = []
    for i, slot in enumerate(task.reward):
        # The words the query names the item with (a knowledge item's leave its answer out).
        if task.phrases is not None:
            keep.append(task.phrases[i])
        else:
            keep.append(product_phrase(slot.title[0], drop=task.knowledge_attribute or ""))
        keep += [v for _, v in slot_pairs(slot)]
    # The facts a knowledge question is built on (see gen_knowledge).
    keep += [str(v) for k, v in sorted(task.meta.items()) if k.startswith("knowledge_fact_")]
    return [k for k in dict.fromkeys(keep) if k]


def _numbers(slot_bounds: Sequence[float | None]) -> list[str]:
    return [str(int(n)) for n in slot_bounds if n is not None]


def acceptable(task: Task, rewrite: str) -> str | None:
    """Why `rewrite` cannot replace the body of `task`'s query; None if it can."""
    text = rewrite.strip()
    if not text:
        return "empty rewrite"
    for frag in must_keep(task):
        if frag not in text:
            return "a required fragment was changed"
    digits = text.replace(",", "")
    for slot in task.reward:
        for b in slot.price or []:
            for n in _numbers([b.lo, b.hi]):
                if not re.search(rf"(?<!\d){n}(?!\d)", digits):
                    return "a price number was changed"
        for s in slot.service or []:
            if not _SERVICE_NAMES[s].search(text):
                return "a service was dropped"
    named = {s for s, p in _SERVICE_NAMES.items() if p.search(text)}
    asked = {s for slot in task.reward for s in slot.service or []}
    if named - asked:
        return "a service was added"
    if task.knowledge_attribute and task.knowledge_attribute.lower() in text.lower():
        return "the rewrite reveals the answer"
    if "My budget is only" in text:
        return "the rewrite repeats the voucher rules"
    return None


def _prompt() -> str:
    return resources.files("shopbench.tasks").joinpath("data/paraphrase_prompt.txt").read_text()


class Paraphraser:
    """Rewrites task queries through one OpenAI-compatible chat endpoint.

    `sleep` waits between retries (``asyncio.sleep`` unless a test injects another). Call
    :meth:`aclose` from the loop that used it last.
    """

    def __init__(self, config: ParaphraseConfig, *, sleep: Sleep | None = None) -> None:
        self.config = config
        self._client = OpenAIClient(config.client_config(_MAX_CONNECTIONS), sleep=sleep)
        self._system = _prompt()

    async def aclose(self) -> None:
        """Release the HTTP connections."""
        await self._client.aclose()

    async def _ask(self, body: str, keep: list[str]) -> str:
        listing = "\n".join(f"- {k}" for k in keep) or "- (nothing)"
        payload = {
            "model": self.config.model,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            "messages": [
                {"role": "system", "content": self._system},
                {"role": "user", "content": f"Keep verbatim:\n{listing}\n\nRequest:\n{body}"},
            ],
        }
        data = await self._client.chat(
            self.config.base_url, payload, api_key=self.config.api_key
        )
        return str(data["choices"][0]["message"]["content"] or "")

    async def rewrite(self, task: Task) -> tuple[Task, str | None]:
        """The task with a paraphrased query, or unchanged with the reason it was kept."""
        body, rules = split_rules(task.query)
        try:
            text = (await self._ask(body, must_keep(task))).strip()
        except MalformedReply:
            return task, "malformed reply"
        except EndpointFailure as e:
            return task, f"endpoint error ({e.kind})"
        except (KeyError, IndexError, TypeError):
            return task, "malformed reply"
        why = acceptable(task, text)
        if why is not None:
            return task, why
        query = f"{text}\n\n{rules.lstrip()}" if rules else text
        meta = {**task.meta, "paraphrased": self.config.model}
        return task.model_copy(update={"query": query, "meta": meta}), None

    async def rewrite_all(self, tasks: Sequence[Task]) -> tuple[list[Task], ParaphraseReport]:
        """Every task, paraphrased where a paraphrase is acceptable, one request at a time."""
        out: list[Task] = []
        kept: Counter[str] = Counter()
        for task in tasks:
            new, why = await self.rewrite(task)
            out.append(new)
            if why is not None:
                kept[why] += 1
        return out, ParaphraseReport(rewritten=len(out) - sum(kept.values()), kept=dict(kept))


def paraphrase(
    config: ParaphraseConfig, tasks: Sequence[Task], *, sleep: Sleep | None = None
) -> tuple[list[Task], ParaphraseReport]:
    """Every task, paraphrased where acceptable: :meth:`Paraphraser.rewrite_all`, blocking.

    Runs its own event loop (so it is for callers outside one, as the CLI is) and closes
    the connections before it returns.
    """

    async def run() -> tuple[list[Task], ParaphraseReport]:
        para = Paraphraser(config, sleep=sleep)
        try:
            return await para.rewrite_all(tasks)
        finally:
            await para.aclose()

    return asyncio.run(run())
