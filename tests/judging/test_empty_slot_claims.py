"""A claim of success with a slot of the task left empty is false from rubric v4 on, and
`verify` replays each record under the rubric version it was judged by."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.registry import make_policy
from shopbench.chat import AssistantMessage, ChatMessage
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.file import DEFAULT_RUBRIC
from shopbench.judging.rubric.judge import RubricJudge, load_rubric
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.trajectory.loop import run_episode
from shopbench.verify.regrade import judgement, rubric_judge

RECOMMEND = "recommend_product"


class LeavesSlotTwoEmpty:
    """The careful shopper, whose recommendation leaves the task's second slot empty; it
    still terminates with status success."""

    name = "careful-slot-two-empty"

    def __init__(self) -> None:
        self.inner = make_policy("careful", seed=1)

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        reply = await self.inner.act(messages, tools)
        calls = []
        for call in reply.tool_calls or []:
            if call.function.name == RECOMMEND:
                args = json.loads(call.function.arguments)
                ids = str(args["product_ids"]).split(",")
                args["product_ids"] = ",".join(i if n != 1 else "" for n, i in enumerate(ids))
                call = call.model_copy(
                    update={"function": call.function.model_copy(
                        update={"arguments": json.dumps(args)})}
                )  # fmt: skip
            calls.append(call)
        return reply.model_copy(update={"tool_calls": calls or None})


def _packaged(name: str) -> Path:
    return Path(str(resources.files("shopbench.judging.rubric").joinpath("data", name)))


@pytest.fixture(scope="module")
def short(catalog: Any, catalog_dir: Path) -> list[Trajectory]:
    """Shop episodes whose recommendation fills the first slot and leaves the second empty."""
    tasks = build_tasks(BuildConfig(catalog=catalog_dir, intents=["shop"], n=4, seed=11)).tasks
    env = ShoppingEnv(catalog)
    policy = LeavesSlotTwoEmpty()

    async def go() -> list[Trajectory]:
        return [await run_episode(env, t, policy, key=bytes([i]) * 32)
                for i, t in enumerate(tasks)]  # fmt: skip

    played = asyncio.run(go())
    kept = [
        t for t in played
        if len(t.outcome.slots) >= 2 and t.outcome.slots[0].product_id is not None
        and t.outcome.slots[1].product_id is None
    ]  # fmt: skip
    assert kept, "no shop episode left its second slot empty"
    return kept


def test_success_declared_with_a_slot_empty_fails_claims_supported_from_v4(
    short: list[Trajectory],
) -> None:
    v3 = RubricJudge(load_rubric(_packaged("rubric_v3.toml")))
    v4 = RubricJudge(load_rubric(_packaged("rubric_v4.toml")))
    for t in short:
        old, new = v3.judge(t), v4.judge(t)
        assert old.gates["claims_supported"]  # v3 let it through: "N claims, none false"
        assert not new.gates["claims_supported"], new.criterion("claims_supported")
        evidence = new.criterion("claims_supported").evidence  # type: ignore[union-attr]
        assert "claims success" in evidence and "no product for slot 2 of" in evidence
        assert new.score <= min(old.score, 0.3)  # the gate's fail score, or an earlier one


def test_the_release_judges_by_v4_and_verify_replays_each_version(
    short: list[Trajectory],
) -> None:
    assert DEFAULT_RUBRIC == "rubric_v4.toml"
    t = short[0]
    released = RubricJudge().judge(t)
    assert released.rubric_version == "4" and not released.gates["claims_supported"]
    old = rubric_judge("3").judge(t)
    assert old.rubric_version == "3" and old.gates["claims_supported"]
    # verify re-derives each recorded verdict with the rubric it names
    for recorded in (released, old):
        derived, _rule = judgement(t, recorded)
        assert derived.rubric.rubric_version == recorded.rubric_version
        assert derived.rubric.gates == recorded.gates
        assert derived.rubric.score == recorded.score
