"""Episodes for the distillation tests: reference policies played through ``run_episode`` on
product tasks drawn from the 2,000-product catalog, and curated sets written from them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from shopbench.agents.reference import CarefulPolicy, NarratorPolicy, TrialAndErrorPolicy
from shopbench.chat import ChatMessage
from shopbench.curation.curated import CuratedEpisode, write_curated
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import Slot
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode

POLICIES = (CarefulPolicy, TrialAndErrorPolicy, NarratorPolicy)


def play(env: ShoppingEnv, catalog: Any, n: int) -> list[Trajectory]:
    """`n` episodes, one product task each (cluster ``c<i>``), the policies in turn."""
    products = next(iter(catalog.iter_products(batch_size=max(n, 20))))[:n]
    out = []
    for i, p in enumerate(products):
        task = Task(
            id=f"t-{i}", intent="product", query=f"I'm looking for {p.title}.",
            reward=[Slot(product_id=p.product_id, title=[p.title])], cluster=f"c{i}",
        )  # fmt: skip
        policy = POLICIES[i % len(POLICIES)](seed=i)
        out.append(asyncio.run(run_episode(env, task, policy, key=bytes([i + 1]) * 32)))
    return out


def assistant_turns(t: Trajectory) -> int:
    """Assistant messages of `t`."""
    return sum(1 for m in t.messages if m.role == "assistant")


def with_second_user_turn(t: Trajectory) -> Trajectory:
    """`t` followed by a second user turn: a follow-up question and the agent's answer."""
    follow = [
        ChatMessage(role="user", content="Thanks. Is it sold with cash on delivery?"),
        ChatMessage(role="assistant", reasoning_content="The listing I viewed says COD.",
                    content="Yes, it ships with cash on delivery."),  # fmt: skip
    ]
    return t.model_copy(update={"messages": [*t.messages, *follow]})


def curated_set(out: Path, episodes: list[CuratedEpisode]) -> Path:
    """Write `episodes` as a curated set at `out`; return `out`."""
    write_curated(iter(episodes), out)
    return out
