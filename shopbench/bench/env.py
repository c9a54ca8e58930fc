"""Benchmark of the shopping environment: tool calls through episodes, as agents make them.

Plays `episodes` scripted episodes on a catalog — searches drawn from the catalog's own
titles (some with price, service, sort and shop filters, some on page 2), views of shown
products, an occasional malformed call, one recommendation and terminate — and reports
calls per second and per-tool latency from the episodes' own logs. It then isolates the
cost of episode tokens: minting the shown ids and resolving them, against the raw
``SearchIndex.find`` call they wrap, on the same queries.
"""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.bench.stats import percentile
from shopbench.catalog.schema import Product
from shopbench.env.env import ShoppingEnv
from shopbench.env.episode import Episode
from shopbench.env.results import parse_search_results
from shopbench.env.tokens import TokenBook
from shopbench.outcome.spec import Slot
from shopbench.records.tools import Tool
from shopbench.tasks.model import Task

_WORD = re.compile(r"[A-Za-z]{3,}")
_SORTS = ("priceasc", "pricedesc", "order")


def _sample_products(env: ShoppingEnv, rng: random.Random, n: int) -> list[Product]:
    """Up to `n` products from the first batches of the catalog, sampled with `rng`."""
    pool: list[Product] = []
    for batch in env.catalog.iter_products(batch_size=5000):
        pool.extend(batch)
        if len(pool) >= 5 * n:
            break
    return rng.sample(pool, min(n, len(pool)))


def _search_args(p: Product, rng: random.Random) -> dict[str, Any]:
    """A realistic find_product call aimed at product `p`: 2-4 of its title words + filters."""
    words = [w.lower() for w in _WORD.findall(p.title)] or ["shop"]
    start = rng.randrange(len(words))
    args: dict[str, Any] = {"q": " ".join(words[start : start + rng.randint(2, 4)]), "page": 1}
    if rng.random() < 0.3:
        args["price"] = f"{int(p.price * 0.5)}-{int(p.price * 1.5) + 1}"
    if p.service and rng.random() < 0.15:
        args["service"] = rng.choice(p.service)
    if rng.random() < 0.2:
        args["sort"] = rng.choice(_SORTS)
    return args


def _play(ep: Episode, p: Product, rng: random.Random) -> None:
    """One scripted episode: search, browse, view, maybe err, recommend, terminate."""
    ep.begin_turn()
    first = _search_args(p, rng)
    found = ep.call(Tool.FIND_PRODUCT, first)
    hits = parse_search_results(found.content)
    if rng.random() < 0.3:
        ep.call(Tool.FIND_PRODUCT, {**first, "page": 2})
    if hits and rng.random() < 0.25:
        ep.begin_turn()
        ep.call(Tool.FIND_PRODUCT, {"q": first["q"], "page": 1, "shop_id": hits[0].shop_id})
    if rng.random() < 0.1:  # agents do send invented ids
        ep.call(Tool.VIEW_PRODUCT_INFORMATION, {"product_ids": "1234567890"})
    if hits:
        ep.begin_turn()
        picked = [h.product_id for h in hits[: rng.randint(1, 3)]]
        ep.call(Tool.VIEW_PRODUCT_INFORMATION, {"product_ids": ",".join(picked)})
        ep.begin_turn()
        ep.call(Tool.RECOMMEND_PRODUCT, json.dumps({"product_ids": picked[0]}))
    ep.call(Tool.TERMINATE, {"status": "success" if hits else "failure"})


def _token_overhead(
    env: ShoppingEnv, products: list[Product], rng: random.Random
) -> dict[str, float]:
    """Raw find vs. the token work the environment wraps around it, on the same queries.

    Token work is what find_product adds for ids: minting a token for every shown product
    and shop, then resolving them back (as a view or a recommendation does). Each query is
    searched once, as agents' queries are fresh; the sums over all queries are compared, so
    load from other processes falls on both sides alike. The whole find_product call through
    an episode is timed too (a second search of the same query), for the full cost of the
    boundary: arguments, tokens, JSON.
    """
    index = env.catalog.index
    search_ns = token_ns = call_ns = 0
    task = Task(id="bench", intent="product", query="bench", reward=[Slot(title=["bench"])])
    for p in products:
        args = _search_args(p, rng)
        filters = {k: args[k] for k in ("price", "service", "sort") if k in args}
        book = TokenBook(rng.randbytes(32))  # one per episode, not per call
        ep = env.new_episode(task, key=rng.randbytes(32))
        t0 = time.perf_counter_ns()
        hits = index.find(args["q"], 1, **filters)
        t1 = time.perf_counter_ns()
        shown = book.show_all("product", [h.product_id for h in hits])
        shops = book.show_all("shop", [h.shop_id for h in hits])
        for product, shop in zip(shown, shops, strict=True):
            book.resolve(product, "product")
            book.resolve(shop, "shop")
        t2 = time.perf_counter_ns()
        ep.call(Tool.FIND_PRODUCT, args)
        t3 = time.perf_counter_ns()
        search_ns += t1 - t0
        token_ns += t2 - t1
        call_ns += t3 - t2
    n = max(len(products), 1)
    return {
        "raw_find_mean_ms": search_ns / n / 1e6,
        "token_mean_ms": token_ns / n / 1e6,
        "find_call_mean_ms": call_ns / n / 1e6,
        "token_overhead_pct": 100.0 * token_ns / max(search_ns, 1),
        "call_overhead_pct": 100.0 * (call_ns - search_ns) / max(search_ns, 1),
    }


class EnvBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog: Path = Field(description="catalog directory")
    episodes: int = Field(default=200, ge=1, description="episodes to play")
    seed: int = Field(default=0, description="seed of the queries and the call mix")


def run(catalog_dir: str | Path, episodes: int = 200, seed: int = 0) -> dict[str, Any]:
    """Play `episodes` scripted episodes and measure; the result is one flat-ish JSON object."""
    env = ShoppingEnv.open(catalog_dir)
    rng = random.Random(seed)
    products = _sample_products(env, rng, episodes)
    played: list[Episode] = []
    start = time.perf_counter()
    for p in products:
        task = Task(
            id=f"bench-{p.product_id}",
            intent="product",
            query=p.title,
            reward=[Slot(title=[p.title])],
        )
        ep = env.new_episode(task, key=rng.randbytes(32))
        _play(ep, p, rng)
        played.append(ep)
    wall = time.perf_counter() - start
    latencies: dict[str, list[float]] = {}
    errors = internal = 0
    for ep in played:
        for rec in ep.log:
            latencies.setdefault(rec.name, []).append(rec.latency_ms)
            errors += rec.error is not None
            internal += rec.error == "internal"
    calls = sum(len(v) for v in latencies.values())
    return {
        "products": len(env.catalog),
        "episodes": len(played),
        "calls": calls,
        "error_calls": errors,
        "internal_errors": internal,
        "calls_per_s": calls / wall if wall else 0.0,
        "tools": {
            name: {
                "calls": len(v),
                "p50_ms": percentile(v, 0.5),
                "p99_ms": percentile(v, 0.99),
            }
            for name, v in sorted(latencies.items())
        },
        **_token_overhead(env, products, random.Random(seed + 1)),
    }
