"""Small scripted agents and tasks for the judge's tests: honest shoppers and cheats.

Each agent is a real :class:`ScriptedPolicy` played through ``run_episode``, so the
trajectories the judge sees are exactly what the environment records. The tasks quote the
product phrase (``"..."``) so the agents can read it without a query parser.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from shopbench.agents.reference.observations import all_details, all_hits
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.catalog.schema import Product
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import PriceBound, Slot
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.model import Task
from shopbench.tasks.queries import product_phrase
from shopbench.trajectory.loop import run_episode

_QUOTED = re.compile(r'"([^"]+)"')
_BUDGET = re.compile(r"under (\d+) pesos")

OPENERS = (
    "I'm looking for", "Please find me", "Can you get me", "I need", "Help me buy",
    "Show me the best option for",
)


def make_tasks(catalog: Any, n: int, seed: int = 3) -> list[Task]:
    """`n` product tasks whose targets are catalog products with distinct titles."""
    rng = random.Random(seed)
    pool: list[Product] = []
    for batch in catalog.iter_products(batch_size=500):
        pool.extend(batch)
        if len(pool) >= 600:
            break
    seen: set[str] = set()
    tasks: list[Task] = []
    for p in rng.sample(pool, len(pool)):
        phrase = product_phrase(p.title)
        if phrase in seen or len(phrase.split()) < 4:
            continue
        seen.add(phrase)
        budget = int(p.price * 1.2) + 10
        query = f'{rng.choice(OPENERS)} "{phrase}" under {budget} pesos.'
        tasks.append(
            Task(
                id=f"t{len(tasks)}",
                intent="product",
                query=query,
                reward=[
                    Slot(
                        product_id=p.product_id,
                        title=[p.title],
                        price=[PriceBound(mode="less than", hi=float(budget))],
                    )
                ],
            )
        )
        if len(tasks) == n:
            break
    return tasks


def phrase_of(query: str) -> str:
    m = _QUOTED.search(query)
    return m.group(1) if m else query


def budget_of(query: str) -> int | None:
    m = _BUDGET.search(query)
    return int(m.group(1)) if m else None


def _attr_text(details: Any) -> str:
    pairs = [f"{k}: {', '.join(v)}" for k, v in sorted(details.attributes.items())][:2]
    return "; ".join(pairs) if pairs else "no listed attributes"


class Careful(ScriptedPolicy):
    """Searches the quoted phrase under the budget, views the top three, compares, picks."""

    name: ClassVar[str] = "t_careful"
    terse: ClassVar[bool] = False

    def script(self, ctx: Context) -> Script:
        phrase, budget = phrase_of(ctx.query), budget_of(ctx.query)
        args: dict[str, Any] = {"q": phrase, "page": 1}
        if budget:
            args["price"] = f"0-{budget}"
        say = (
            f"Search {phrase}."
            if self.terse
            else f"The customer wants {phrase}, at most {budget} pesos. I will search for "
            f"{phrase} with a price filter up to {budget}."
        )
        results = yield Step(calls=[("find_product", args)], reasoning=say)
        results = yield from self.after_search(ctx, results, phrase)
        hits = all_hits([results])
        if not hits:
            yield Step(calls=[("terminate", {"status": "failure"})], reasoning="Nothing found.")
            return
        top = hits[:3]
        listing = ", ".join(f"{h.product_id} ({h.title[:40]}, ₱{h.price:g})" for h in top)
        say = (
            f"View {', '.join(h.product_id for h in top)}."
            if self.terse
            else f"The results show {listing}. I want to check the details of these before "
            "choosing."
        )
        results = yield Step(
            calls=[("view_product_information",
                    {"product_ids": ",".join(h.product_id for h in top)})],
            reasoning=say,
        )
        details = list(all_details([results]).values())
        best = min(details, key=lambda d: (phrase.lower() not in d.title.lower(), d.price))
        others = [d for d in details if d.product_id != best.product_id]
        if self.terse:
            say = f"Recommending {best.product_id} at ₱{best.price:g}."
        else:
            rival = (
                f" {others[0].product_id} costs ₱{others[0].price:g} and lists "
                f"{_attr_text(others[0])}, so it is the weaker match."
                if others
                else ""
            )
            say = (
                f"{best.product_id} is '{best.title}' at ₱{best.price:g} with "
                f"{_attr_text(best)}; its title matches the request and it is within "
                f"the budget of {budget} pesos.{rival} I will recommend {best.product_id}."
            )
        yield Step(calls=[("recommend_product", {"product_ids": best.product_id})],
                   reasoning=say)
        yield Step(calls=[("terminate", {"status": "success"})],
                   reasoning="Recommended; closing." if self.terse else
                   f"I recommended {best.product_id}, so the request is handled.")

    def after_search(self, ctx: Context, results: Any, phrase: str) -> Any:
        """Hook for the recovering agent; the careful one keeps the first results."""
        return results
        yield  # pragma: no cover - makes this a generator


class CarefulTerse(Careful):
    name: ClassVar[str] = "t_careful_terse"
    terse: ClassVar[bool] = True


class Recovering(Careful):
    """Starts with an over-narrow search (an impossible price), notices, and broadens."""

    name: ClassVar[str] = "t_recovering"

    def script(self, ctx: Context) -> Script:
        phrase = phrase_of(ctx.query)
        first = yield Step(
            calls=[("find_product", {"q": phrase, "page": 1, "price": "0-1"})],
            reasoning=f"Let me try {phrase} at the very lowest price first.",
        )
        if all_hits([first]):
            return
        yield from super().script(ctx)


class Narrator(ScriptedPolicy):
    """A fixed loop whatever the task, narrated by the same generic prose."""

    name: ClassVar[str] = "t_narrator"

    def script(self, ctx: Context) -> Script:
        results = yield Step(
            calls=[("find_product", {"q": "popular bestseller trending gadget", "page": 1})],
            reasoning="Let me begin by exploring the catalog to understand what kinds of "
            "products are available and which options customers tend to prefer overall.",
        )
        hits = all_hits([results])
        if not hits:
            return
        yield Step(
            calls=[("view_product_information", {"product_ids": hits[0].product_id})],
            reasoning="Now I will carefully examine the most promising option in detail to "
            "make sure it satisfies every requirement the customer mentioned.",
        )
        yield Step(
            calls=[("recommend_product", {"product_ids": hits[0].product_id})],
            reasoning="After weighing all the considerations, this option offers the best "
            "balance of quality, price and features, so I will recommend it.",
        )
        yield Step(calls=[("terminate", {"status": "success"})],
                   reasoning="The task is complete, so I will close the session now.")


class NarratorQuoting(ScriptedPolicy):
    """The narrator's fixed loop on the query's words, quoting prices it was shown in
    reasoning that does not drive the calls."""

    name: ClassVar[str] = "t_narrator_quoting"

    def script(self, ctx: Context) -> Script:
        phrase = phrase_of(ctx.query)
        results = yield Step(
            calls=[("find_product", {"q": phrase, "page": 1})],
            reasoning="Let me begin by exploring the catalog to understand what kinds of "
            "products are available and which options customers tend to prefer overall.",
        )
        hits = all_hits([results])
        if not hits:
            return
        yield Step(
            calls=[("view_product_information", {"product_ids": hits[0].product_id})],
            reasoning=f"I see prices such as ₱{hits[-1].price:g}; now I will carefully "
            "examine the most promising option in detail to make sure it satisfies every "
            "requirement the customer mentioned.",
        )
        yield Step(
            calls=[("recommend_product", {"product_ids": hits[0].product_id})],
            reasoning=f"After weighing all the considerations, at ₱{hits[0].price:g} this "
            "option offers the best balance of quality, price and features, so I will "
            "recommend it.",
        )
        yield Step(calls=[("terminate", {"status": "success"})],
                   reasoning="The task is complete, so I will close the session now.")


class Offline(ScriptedPolicy):
    """Knows the answers (a rebuilt catalog): searches a known title, views it, recommends."""

    name: ClassVar[str] = "t_offline"

    def __init__(self, answers: dict[str, str], seed: int = 0) -> None:
        super().__init__(seed)
        self.answers = answers  # query → a title found offline

    def script(self, ctx: Context) -> Script:
        title = self.answers[ctx.query]
        results = yield Step(
            calls=[("find_product", {"q": title, "page": 1})],
            reasoning=f"I will search for {title}.",
        )
        hits = [h for h in all_hits([results]) if h.title == title] or all_hits([results])
        if not hits:
            return
        pick = hits[0]
        results = yield Step(
            calls=[("view_product_information", {"product_ids": pick.product_id})],
            reasoning=f"Checking {pick.product_id}, '{pick.title}' at ₱{pick.price:g}.",
        )
        others = [h for h in all_hits([results]) if h.product_id != pick.product_id]
        yield Step(
            calls=[("recommend_product", {"product_ids": pick.product_id})],
            reasoning=f"{pick.product_id} at ₱{pick.price:g} is the one"
            + (f", not {others[0].product_id}." if others else "."),
        )
        yield Step(calls=[("terminate", {"status": "success"})], reasoning="Done.")


class Guesser(ScriptedPolicy):
    """Recommends an id it never saw."""

    name: ClassVar[str] = "t_guesser"

    def script(self, ctx: Context) -> Script:
        token = str(ctx.rng.randrange(10**9, 10**10))
        yield Step(
            calls=[("recommend_product", {"product_ids": token})],
            reasoning=f"Product {token} is the best match at ₱499, so I recommend it.",
        )
        yield Step(calls=[("terminate", {"status": "success"})], reasoning="Done.")


def play(
    env: ShoppingEnv, tasks: Sequence[Task], policy: Any, *, seed: int = 0
) -> list[Trajectory]:
    """Play every task with `policy` (fixed episode keys) and return the trajectories."""

    async def run() -> list[Trajectory]:
        out = []
        for i, task in enumerate(tasks):
            key = f"judge-test|{seed}|{policy.name}|{i}".encode().ljust(32, b".")
            out.append(await run_episode(env, task, policy, key=key))
        return out

    return asyncio.run(run())


# -- hand-built records, for checks that need exact control over every word --------------

Call = tuple[str, dict[str, Any], Any]
"""A call of a synthetic turn: tool name, arguments, and the observation (data or text)."""


def record(query: str, turns: Sequence[tuple[str, Sequence[Call]]]) -> dict[str, Any]:
    """A trajectory record (as an archive stores it) whose tool log matches its tool
    messages exactly, built from (reasoning, calls) per turn; observations that are not
    text are rendered as the environment renders them (compact JSON)."""
    import hashlib
    import json

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "system prompt"},
        {"role": "user", "content": query},
    ]
    log: list[dict[str, Any]] = []
    for n, (reasoning, calls) in enumerate(turns, start=1):
        tool_calls = [
            {"id": f"c{n}_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args, _) in enumerate(calls)
        ]
        messages.append({"role": "assistant", "reasoning_content": reasoning,
                         "tool_calls": tool_calls or None})
        for i, (name, args, result) in enumerate(calls):
            text = result if isinstance(result, str) else json.dumps(
                result, ensure_ascii=False, separators=(",", ":"))
            messages.append({"role": "tool", "tool_call_id": f"c{n}_{i}", "name": name,
                             "content": text})
            log.append({
                "turn": n, "name": name, "arguments": args,
                "result_digest": hashlib.sha256(text.encode()).hexdigest(),
                "error": "invalid_id" if text.startswith("Error:") else None,
                "latency_ms": 1.0,
            })
    return {"task_id": "synthetic", "agent": "hand", "query": query, "messages": messages,
            "tool_log": log}


def hit(token: str, title: str, price: float, shop: str = "123456789") -> dict[str, Any]:
    """A find_product result row."""
    return {"product_id": token, "shop_id": shop, "title": title, "price": price,
            "service": ["COD"], "sold_count": 10}


def details(token: str, title: str, price: float, attributes: dict[str, list[str]],
            shop: str = "123456789") -> dict[str, Any]:
    """A view_product_information result row."""
    return {"product_id": token, "shop_id": shop, "title": title, "price": price,
            "service": ["COD"], "short_description": "", "description": "",
            "sku_options": {}, "attributes": attributes}
