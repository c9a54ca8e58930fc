"""Copies that pad: careful's episodes with `"sort": "default"` added to every search (the
same results), one more product the search showed opened, or one refused call added. Each
is played through real episodes (its own key, so its tokens differ from careful's) and is
one decision stream with careful, in the weights' book and in curation's comparison; the
honest `careful`, `trial_and_error`, `greedy` and `narrator` are never grouped.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.reference.copies import careful_script
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.agents.registry import make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.records.decisions import episode_decisions, same_decisions
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.copies import CopyBook, CopyRules, TaskDecisions, round_decisions
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.trajectory.loop import run_episode

FIND = "find_product"
VIEW = "view_product_information"
RECOMMEND = "recommend_product"


class _Padding(ScriptedPolicy):
    """Careful's episode for the same seed, changed by :meth:`pad` turn by turn."""

    def script(self, ctx: Context) -> Script:
        careful = careful_script(ctx, ctx.seed)
        shown: list[str] = []
        try:
            step = next(careful)
            for turn in range(ctx.max_turns):
                for extra in self.pad(step, shown, turn):  # noqa: UP028 (a list cannot be sent to)
                    yield extra  # what the extra call answers is not passed on
                results = yield step
                shown += [h.product_id for r in results for h in r.hits]
                step = careful.send(results)
        except StopIteration:
            return

    def pad(self, step: Step, shown: list[str], turn: int) -> list[Step]:
        return []


class SortPadder(_Padding):
    """Every search that names no order asks for the default one: the same results."""

    name = "sort_padder"

    def pad(self, step: Step, shown: list[str], turn: int) -> list[Step]:
        step.calls = [(n, {"sort": "default", **a}) if n == FIND and isinstance(a, dict) else (n, a)
                      for n, a in step.calls]  # fmt: skip
        return []


class Opener(_Padding):
    """Before recommending, opens one product a search showed that it will not pick."""

    name = "opener"

    def pad(self, step: Step, shown: list[str], turn: int) -> list[Step]:
        for n, a in step.calls:
            if n == RECOMMEND and isinstance(a, dict):
                picked = str(a.get("product_ids", "")).split(",")
                other = next((p for p in shown if p not in picked), None)
                if other is not None:
                    return [Step(calls=[(VIEW, {"product_ids": other})], reasoning="A look.")]
        return []


class Refuser(_Padding):
    """Adds one call the environment refuses, a turn of its own before careful's first."""

    name = "refuser"

    def pad(self, step: Step, shown: list[str], turn: int) -> list[Step]:
        if turn:
            return []
        return [Step(calls=[(VIEW, {"product_ids": "1234567890"})], reasoning="A look.")]


HONEST = ("careful", "trial_and_error", "greedy", "narrator")
PADDED = {"sort_padder": SortPadder, "opener": Opener, "refuser": Refuser}


@pytest.fixture(scope="module")
def played(catalog_dir: Path, catalog: Any) -> dict[str, list[Trajectory]]:
    env = ShoppingEnv(catalog)
    tasks = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product"], n=16, seed=5)).tasks
    assert len(tasks) >= 12
    policies: dict[str, Any] = {n: make_policy(n, seed=1) for n in HONEST}
    policies |= {n: cls(seed=1) for n, cls in PADDED.items()}
    out: dict[str, list[Trajectory]] = {name: [] for name in policies}
    keys = {name: bytes([m + 1]) * 32 for m, name in enumerate(policies)}
    names = list(policies)
    for n, task in enumerate(tasks):  # task by task, each policy first in turn: no one is
        for name in names[n % len(names) :] + names[: n % len(names)]:  # always the warm-up
            out[name].append(asyncio.run(run_episode(env, task, policies[name], key=keys[name])))
    return out


def _shares(a: list[Trajectory], b: list[Trajectory]) -> int:
    return sum(same_decisions(episode_decisions(x), episode_decisions(y))
               for x, y in zip(a, b, strict=True))  # fmt: skip


def test_each_padding_is_the_same_decisions_as_careful_on_every_task(
    played: dict[str, list[Trajectory]],
) -> None:
    careful = played["careful"]
    for name in PADDED:
        padded = played[name]
        assert [t.recommended_ids for t in padded] == [t.recommended_ids for t in careful]
        assert _shares(careful, padded) == len(careful), name
    # they really did pad: more calls than careful, or other arguments
    assert any('"sort"' in str(e.arguments) or "sort" in e.arguments
               for t in played["sort_padder"] for e in t.tool_log if e.name == FIND)  # fmt: skip
    assert sum(e.error is not None for t in played["refuser"] for e in t.tool_log) >= len(careful)
    assert sum(len(t.tool_log) for t in played["opener"]) > sum(len(t.tool_log) for t in careful)


def test_the_book_groups_the_padded_copies_and_never_the_honest_policies(
    played: dict[str, list[Trajectory]],
) -> None:
    names = list(played)
    book = CopyBook()
    for uid, name in enumerate(names):
        book.record(uid, f"hk{uid}", 0, round_decisions(played[name]), 8)
    groups = book.groups(CopyRules(), {uid: uid for uid in range(len(names))})
    grouped = {names[uid]: names[g.of_uid] for uid, g in groups.items()}
    assert grouped == {name: "careful" for name in PADDED}
    # pairwise, the honest policies share few decisions (the figures in docs/validator.md)
    for i, a in enumerate(HONEST):
        for b in HONEST[i + 1 :]:
            assert _shares(played[a], played[b]) < 0.8 * len(played[a]), (a, b)


def test_a_book_of_another_normalisation_starts_afresh() -> None:
    old = {"miners": {"3": {"hotkey": "hk3", "rounds": {"0": {"t": {
        "core": "c", "searches": ["s"], "empty": False}}}}}}  # fmt: skip
    assert CopyBook.model_validate(old).miners == {}
    kept = CopyBook()
    kept.record(3, "hk3", 0, {"t": TaskDecisions(core="c", parts=["p"])}, 8)
    assert CopyBook.model_validate(kept.model_dump()).miners[3].hotkey == "hk3"
