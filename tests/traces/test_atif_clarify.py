"""A clarify episode in ATIF: each answer of the shopper is a user step right after the
agent step that asked, naming the call; nothing else of the conversation moves. In the
browser, the episode page shows the conversation with the shopper."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from markupsafe import escape
from support.api_archives import VALIDATOR, store
from support.keyed_hash import KeyedHash

from shopbench.agents.registry import make_policy
from shopbench.archive.signing import sign_trajectory
from shopbench.env.env import ShoppingEnv
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.server import serving
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


def test_the_browser_shows_the_conversation_with_the_shopper(
    env: ShoppingEnv, catalog_dir: Path, tmp_path: Path
) -> None:
    task = build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=1, seed=3)).tasks[0]
    played = asyncio.run(run_episode(env, task, make_policy("careful"), key=b"b" * 32))
    signed = sign_trajectory(played.model_copy(update={"validator_hotkey": VALIDATOR}),
                             KeyedHash(VALIDATOR))  # fmt: skip
    root = store([signed], tmp_path / "archive", lifted=True)
    with serving(create_app(ApiConfig(root=str(root)))) as url, httpx.Client(base_url=url) as c:
        page = c.get(f"/episodes/{played.episode_id}", headers={"accept": "text/html"})
    assert page.status_code == 200
    html = page.text
    assert "Conversation with the shopper" in html and 'id="dialogue"' in html
    dialogue = played.outcome.dialogue
    assert dialogue is not None and dialogue.questions > 0
    for m in played.messages:
        if m.role == "tool" and m.name == "ask_shopper":
            assert str(escape(m.content or "")) in html
    assert html.count('class="shopper') == dialogue.questions
