"""An optional paraphraser: rewrites template queries through an OpenAI-compatible endpoint.

The template writer is the default and needs no model. A paraphrase is accepted only if it
keeps, verbatim, every fragment the task's grading depends on — the product phrases, the
attribute and SKU values, every price number, a recognisable name for every service, the
knowledge question's facts — and does not reveal a knowledge task's answer; otherwise the
template query stays. A voucher task's rule block is never sent: it is kept unchanged after
the rewritten body. Paraphrases depend on the model, so a paraphrased file is reproducible
only with the same endpoint and sampling settings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from importlib import resources

import httpx
from pydantic import BaseModel, ConfigDict, Field

from shopbench.tasks.model import Task
from shopbench.tasks.queries import product_phrase
from shopbench.tasks.satisfy import slot_pairs

_SERVICE_NAMES = {
    "official": re.compile(r"official store|lazmall", re.I),
    "freeShipping": re.compile(r"free shipping|free delivery", re.I),
    "COD": re.compile(r"cash on delivery|\bcod\b", re.I),
    "flashsale": re.compile(r"flash ?sale|lazflash", re.I),
}


class ParaphraseConfig(BaseModel):
    """Where and how to paraphrase."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(description="API root of an OpenAI-compatible server, e.g. .../v1")
    model: str = Field(min_length=1, description="model name the server serves")
    api_key: str | None = Field(default=None, description="bearer token, if the server wants one")
    temperature: float = Field(default=0.7, ge=0, le=2, description="sampling temperature")
    timeout_s: float = Field(default=60.0, gt=0, description="per-request timeout")
    max_tokens: int = Field(default=512, ge=16, description="longest rewrite accepted")


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
    """Rewrites task queries through one OpenAI-compatible chat endpoint."""

    def __init__(self, config: ParaphraseConfig, client: httpx.Client | None = None) -> None:
        self.config = config
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._client = client or httpx.Client(timeout=config.timeout_s, headers=headers)
        self._system = _prompt()

    def close(self) -> None:
        """Release the HTTP connections."""
        self._client.close()

    def _ask(self, body: str, keep: list[str]) -> str:
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
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        r = self._client.post(url, json=payload)
        r.raise_for_status()
        return str(r.json()["choices"][0]["message"]["content"] or "")

    def rewrite(self, task: Task) -> tuple[Task, str | None]:
        """The task with a paraphrased query, or unchanged with the reason it was kept."""
        body, rules = split_rules(task.query)
        try:
            text = self._ask(body, must_keep(task)).strip()
        except httpx.HTTPError as e:
            return task, f"endpoint error ({type(e).__name__})"
        except (KeyError, IndexError, TypeError, ValueError):
            return task, "malformed reply"
        why = acceptable(task, text)
        if why is not None:
            return task, why
        query = f"{text}\n\n{rules.lstrip()}" if rules else text
        meta = {**task.meta, "paraphrased": self.config.model}
        return task.model_copy(update={"query": query, "meta": meta}), None

    def rewrite_all(self, tasks: Sequence[Task]) -> tuple[list[Task], ParaphraseReport]:
        """Every task, paraphrased where a paraphrase is acceptable."""
        out: list[Task] = []
        kept: Counter[str] = Counter()
        for task in tasks:
            new, why = self.rewrite(task)
            out.append(new)
            if why is not None:
                kept[why] += 1
        return out, ParaphraseReport(rewritten=len(out) - sum(kept.values()), kept=dict(kept))
