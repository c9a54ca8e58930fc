"""Credit per task, and who follows whom decided on evidence.

A newcomer that plays like an earlier miner except where it does better keeps what it adds:
only its tasks with the earlier miner's decisions count 0 (real episodes: `greedy`, and a
miner that plays greedy's episodes except on three tasks greedy fails, where it plays
`careful`'s). A
relay registered before the miner it relays answers every shared task later than that
miner, so it is the follower, whoever registered first; without clear timing evidence the
earlier registration leads.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.reference.careful import CarefulPolicy
from shopbench.agents.reference.greedy import GreedyPolicy
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy
from shopbench.agents.registry import make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.copies import (
    CopyBook,
    CopyRules,
    TaskDecisions,
    credited_score,
    round_decisions,
)
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode

RULES = CopyRules()


def _script(policy: ScriptedPolicy, ctx: Context) -> Script:
    """`policy`'s script for this request, as that policy plays it with the same seed."""
    inner = Context(
        query=ctx.query, tools=ctx.tools, seed=ctx.seed, max_turns=ctx.max_turns,
        rng=random.Random(f"{policy.name}|{ctx.seed}|{ctx.query}"),
    )  # fmt: skip
    return policy.script(inner)


class Improver(ScriptedPolicy):
    """``greedy``'s episode, except on the requests it knows better: there ``careful``'s."""

    name = "improver"
    better: frozenset[str] = frozenset()

    def script(self, ctx: Context) -> Script:
        kind = CarefulPolicy if ctx.query in self.better else GreedyPolicy
        yield from _script(kind(seed=ctx.seed), ctx)


def _scored(t: Trajectory) -> Trajectory:
    """The outcome as score, and every turn answered in the same time: in-process policies
    answer in microseconds, where whichever played first (its caches cold) would look the
    slower on nearly every task; the timing evidence has tests of its own below."""
    turns = [turn.model_copy(update={"policy_ms": 1.0}) for turn in t.timings.turns]
    timings = t.timings.model_copy(update={"turns": turns})
    return t.model_copy(update={"score": 1.0 if t.success else 0.0, "timings": timings})


@pytest.fixture(scope="module")
def rounds(catalog_dir: Path, catalog: Any) -> tuple[list[Task], dict[str, list[Trajectory]]]:
    env = ShoppingEnv(catalog)
    tasks = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product"], n=24, seed=9)).tasks

    def play(policy: Any, key: bytes) -> list[Trajectory]:
        return [_scored(asyncio.run(run_episode(env, t, policy, key=key))) for t in tasks]

    original = play(make_policy("greedy", seed=1), b"o" * 32)
    failed = [t.query for t, e in zip(tasks, original, strict=True) if not e.success]
    assert len(failed) >= 3  # greedy fails some: room to do better
    improver = Improver(seed=1)
    improver.better = frozenset(failed[:3])  # better on 3 of 24 tasks only
    return tasks, {
        "greedy": original,
        "improver": play(improver, b"n" * 32),
        "copycat": play(Improver(seed=1), b"c" * 32),  # greedy's decisions, nothing better
    }


def test_a_miner_better_on_some_tasks_keeps_those_and_a_copy_keeps_nothing(
    rounds: tuple[list[Task], dict[str, list[Trajectory]]],
) -> None:
    tasks, played = rounds
    book = CopyBook()
    decisions = {name: round_decisions(eps) for name, eps in played.items()}
    for uid, name in enumerate(played):
        book.record(uid, f"hk{uid}", 0, decisions[name], RULES.window_rounds)
    groups = book.groups(RULES, {0: 10, 1: 11, 2: 12})
    assert {u: g.of_uid for u, g in groups.items()} == {1: 0, 2: 0}
    assert {g.by for g in groups.values()} == {"registration"}  # equal times: no evidence
    credit = {}
    for uid, name in enumerate(played):
        copied = book.copied_tasks(uid, groups[uid].of_uid, 0) if uid in groups else []
        credit[name] = credited_score(decisions[name], len(tasks), copied)
    improved = [e for e, o in zip(played["improver"], played["greedy"], strict=True)
                if e.success and not o.success]  # fmt: skip
    assert improved  # it did better where careful failed ...
    assert len(book.copied_tasks(1, 0, 0)) == len(tasks) - len(improved)  # ... and only there
    assert credit["copycat"] == 0.0 < credit["improver"]
    assert credit["improver"] == pytest.approx(sum(e.score or 0 for e in improved) / len(tasks))
    assert credit["greedy"] == credited_score(decisions["greedy"], len(tasks), []) > 0
    assert credit["improver"] > credit["copycat"]  # more than copying would have earned


def _stream(latency: float, n: int = 16) -> dict[str, TaskDecisions]:
    return {f"t{i}": TaskDecisions(core=f"c{i}", parts=[f"s{i}"], score=0.5,
                                   latency_ms=latency + i) for i in range(n)}  # fmt: skip


def test_a_relay_registered_first_follows_the_miner_it_relays() -> None:
    book = CopyBook()
    newcomer = _stream(200.0)
    relay = {k: d.model_copy(update={"latency_ms": d.latency_ms + 15.0})  # one hop more
             for k, d in newcomer.items()}  # fmt: skip
    book.record(2, "relay", 0, relay, 8)
    book.record(5, "newcomer", 0, newcomer, 8)
    groups = book.groups(RULES, {2: 100, 5: 900})  # the relay registered long before
    assert list(groups) == [2] and groups[2].of_uid == 5 and groups[2].by == "timing"
    assert (groups[2].timed, groups[2].later) == (16, 16)
    assert credited_score(relay, 16, book.copied_tasks(2, 5, 0)) == 0.0
    assert 5 not in groups  # the relayed miner keeps its score


def test_without_clear_timing_the_earlier_registration_leads() -> None:
    book = CopyBook()
    first = _stream(200.0)
    # The same policy elsewhere: faster on 12 of 16 tasks, slower on 4 (below 0.9 of them).
    second = {k: d.model_copy(update={"latency_ms": d.latency_ms + (-9.0 if i < 12 else 9.0)})
              for i, (k, d) in enumerate(first.items())}  # fmt: skip
    book.record(1, "first", 0, first, 8)
    book.record(7, "second", 0, second, 8)
    groups = book.groups(RULES, {1: 100, 7: 900})
    assert list(groups) == [7] and groups[7].of_uid == 1 and groups[7].by == "registration"
    # too few tasks with known times are no evidence either
    few = CopyBook()
    few.record(1, "first", 0, _stream(200.0, n=10), 8)
    few.record(7, "second", 0, {k: d.model_copy(update={"latency_ms": 1.0})
                                for k, d in _stream(200.0, n=10).items()}, 8)  # fmt: skip
    assert few.groups(RULES, {1: 100, 7: 900})[7].by == "registration"
