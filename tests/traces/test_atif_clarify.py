"""A clarify episode in ATIF: each answer of the shopper is a user step right after the
agent step that asked, naming the call; nothing else of the conversation moves."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shopbench.agents.registry import make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.traces.atif import atif_document
from shopbench.trajectory.loop import run_episode


def test_the_shoppers_answers_are_user_steps(env: ShoppingEnv, catalog_dir: Path) -> None:
    task = build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=1, seed=3)).tasks[0]
    t = asyncio.run(run_episode(env, task, make_policy("careful"), key=b"a" * 32))
    asked = {
        c.id: c for m in t.messages if m.role == "assistant" for c in m.tool_calls or []
        if c.function.name == "ask_shopper"
    }
    answers = [m for m in t.messages if m.role == "tool" and m.tool_call_id in asked]
    assert answers
    steps = atif_document(t)["steps"]
    users = [s for s in steps if s["source"] == "user" and s.get("extra", {}).get(
        "shopbench", {}).get("shopper")]  # fmt: skip
    assert [s["message"] for s in users] == [m.content for m in answers]
    for s in users:
        before = steps[s["step_id"] - 2]
        call_id = s["extra"]["shopbench"]["tool_call_id"]
        while before["source"] == "user":  # several questions in one turn
            before = steps[before["step_id"] - 2]
        assert before["source"] == "agent"
        assert call_id in {c["tool_call_id"] for c in before["tool_calls"]}
        results = (before.get("observation") or {}).get("results", [])
        assert call_id not in {r.get("source_call_id") for r in results}
    tool_results = sum(
        len((s.get("observation") or {}).get("results", [])) for s in steps
    )
    tool_messages = sum(1 for m in t.messages if m.role == "tool")
    assert tool_results + len(users) == tool_messages
