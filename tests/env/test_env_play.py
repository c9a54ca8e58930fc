"""`shopbench play`: a person as the policy of `run_episode`; typed calls in, the agent's
observations out, the episode recorded as a Trajectory; task files by line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from shopbench.agents.errors import PlayerQuit, PlayInputError
from shopbench.agents.human import HumanPolicy, parse_command
from shopbench.archive.jsonl import read_trajectories
from shopbench.chat import ChatMessage
from shopbench.cli import app
from shopbench.commands.env import free_task, play_key
from shopbench.env.env import ShoppingEnv
from shopbench.env.tokens import TokenBook
from shopbench.outcome.spec import Slot
from shopbench.records.trajectory import TerminationReason, Trajectory
from shopbench.tasks.errors import TaskError
from shopbench.tasks.io import read_task_at
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode


def test_parse_command_reads_key_values_and_json() -> None:
    assert parse_command('find_product q="steel bottle" price=0-500 page=2') == (
        "find_product",
        {"q": "steel bottle", "price": "0-500", "page": "2"},
    )
    assert parse_command('find_product {"q": "x", "page": 1}') == (
        "find_product",
        '{"q": "x", "page": 1}',
    )
    assert parse_command("terminate") == ("terminate", {})
    with pytest.raises(PlayInputError, match="expected key=value, got 'steel'"):
        parse_command("find_product steel")
    with pytest.raises(PlayInputError, match="cannot read the arguments"):
        parse_command('find_product q="open')


def _task_file(tmp_path: Path) -> Path:
    tasks = [
        Task(id="a", intent="product", query="first", reward=[Slot(title=["x"])]),
        Task(id="b", intent="product", query="second", reward=[Slot(title=["y"])]),
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks) + "\n{bad json}\n")
    return path


def test_read_task_at_by_line_and_its_errors(tmp_path: Path) -> None:
    path = _task_file(tmp_path)
    assert read_task_at(path, 2).id == "b"
    assert read_task_at(path, 1).id == "a"
    with pytest.raises(TaskError, match=r"tasks.jsonl:3: blank line"):
        read_task_at(path, 3)
    with pytest.raises(TaskError, match=r"tasks.jsonl:4: not a task \(not JSON"):
        read_task_at(path, 4)
    with pytest.raises(TaskError, match="has no line 9"):
        read_task_at(path, 9)
    with pytest.raises(TaskError, match="line numbers start at 1"):
        read_task_at(path, 0)
    with pytest.raises(TaskError, match="task file not found"):
        read_task_at(tmp_path / "missing.jsonl", 1)


def test_free_task_uses_the_typed_query_or_the_example() -> None:
    assert free_task("red umbrella").query == "red umbrella"
    assert free_task("  ").query.startswith("I need a stainless steel water bottle")
    assert free_task("red umbrella").id == free_task("red umbrella").id


def _script(lines: Iterable[str], out: list[str]) -> Callable[[str], str]:
    """A person who types `lines`, then closes the input; prompts go to `out`."""
    pending = iter(lines)

    def read(prompt: str) -> str:
        out.append(prompt)
        line = next(pending, None)
        if line is None:
            raise EOFError
        return line

    return read


def _query(catalog: Any) -> str:
    title = next(iter(catalog.iter_products(batch_size=50)))[0].title
    return " ".join(title.split()[:3])


def test_human_policy_shows_exactly_the_observations(catalog: Any) -> None:
    env = ShoppingEnv(catalog)
    q = _query(catalog)
    twin = env.new_episode(free_task(q), key=b"p" * 32)  # same key: same observations
    out: list[str] = []
    read = _script([f'find_product q="{q}" page=1', "help", "find_product page=9 q=x"], out)
    policy = HumanPolicy(read, out.append, intent="product")
    t = asyncio.run(run_episode(env, free_task(q), policy, key=b"p" * 32))
    policy.show(t.messages)

    expected = twin.call("find_product", {"q": q, "page": "1"}).content
    assert out[0] == f"task (product): {q}"
    assert out[1].startswith("tools: find_product, view_product_information")
    assert expected in out
    assert "[turn 1/30] > " in out and "[turn 2/30] > " in out and "[turn 3/30] > " in out
    assert any("view_product_information product_ids=" in o for o in out)  # the help text
    assert "Error: find_product: argument 'page' must be from 1 to 5, got 9" in out
    # the typed lines are the record's tool calls; the end of the input ends the episode
    calls = [c.function for m in t.messages if m.role == "assistant" for c in m.tool_calls or []]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("find_product", {"q": q, "page": "1"}),
        ("find_product", {"page": "9", "q": "x"}),
    ]
    assert policy.quit and t.termination is TerminationReason.policy_error
    assert t.termination_detail == "PlayerQuit: the input ended at turn 3"
    assert t.agent == "human" and t.tool_calls == 2 and not t.success


def test_human_policy_answers_local_commands_and_returns_one_call() -> None:
    out: list[str] = []
    lines = ["", "tools", "prompt", "find_product steel", 'find_product {"q": "mug"}']
    policy = HumanPolicy(_script(lines, out), out.append, prompt_version="v9", max_turns=7)
    messages = [
        ChatMessage(role="system", content="You are a shopping assistant."),
        ChatMessage(role="user", content="a mug"),
    ]
    tools = [{"type": "function", "function": {"name": "find_product", "parameters": {}}}]
    reply = asyncio.run(policy.act(messages, tools))
    assert reply.tool_calls is not None and len(reply.tool_calls) == 1
    assert reply.tool_calls[0].function.name == "find_product"
    assert reply.tool_calls[0].function.arguments == '{"q": "mug"}'
    assert out[0] == "task: a mug" and out[1].startswith("tools: find_product ")
    assert json.dumps(tools, indent=2) in out
    assert "(system prompt v9)\nYou are a shopping assistant." in out
    assert "! expected key=value, got 'steel' (e.g. q=\"steel bottle\")" in out
    assert out.count("[turn 1/7] > ") == 5  # local commands and bad lines cost no turn

    with pytest.raises(PlayerQuit, match="the player quit at turn 1"):
        asyncio.run(HumanPolicy(_script(["quit"], []), print).act(messages, tools))


def _invoke(args: list[str], lines: list[str]) -> Any:
    return CliRunner().invoke(app, args, input="".join(line + "\n" for line in lines))


def test_play_command_records_a_graded_trajectory(catalog_dir: Path, tmp_path: Path) -> None:
    catalog = ShoppingEnv.open(catalog_dir).catalog
    q = _query(catalog)
    call = f"find_product {json.dumps({'q': q, 'page': 1})}"
    result = _invoke(["play", "--catalog", str(catalog_dir), "--query", q, "--seed", "3"], [call])
    assert result.exit_code == 0, result.output
    assert f"task (product): {q}" in result.output
    shown = json.loads(result.output.split("> ", 1)[1].splitlines()[0])
    assert shown and len(shown[0]["product_id"]) == 10
    token = shown[0]["product_id"]
    product = catalog.index.find(q)[0]
    assert TokenBook(play_key(3)).show("product", product.product_id) == token

    # the same seed replays the same ids: recommend one from a task file, then terminate
    task_file = tmp_path / "t.jsonl"
    target = Slot(product_id=product.product_id, title=[product.title])
    task = Task(id="f", intent="product", query=q, reward=[target])
    task_file.write_text(task.model_dump_json() + "\n")
    out = tmp_path / "human" / "played.jsonl"
    script = [
        f'find_product q="{q}" page=1',
        f"recommend_product product_ids={token}",
        "terminate status=success",
    ]
    args = ["play", "--catalog", str(catalog_dir), "--task", f"{task_file}:1", "--seed", "3",
            "--out", str(out)]
    result = _invoke(args, script)
    assert result.exit_code == 0, result.output
    assert f"Having recommended the products to the user: {token}." in result.output
    assert "episode over: terminated; 3 turns, 3 calls" in result.output
    assert f"recommended {token} = catalog product {product.product_id}: {product.title}" in (
        result.output
    )
    # the task's only slot asks for exactly this product's title: the grader says success
    assert "graded: success; rule scores [1.00]" in result.output
    assert f"wrote the trajectory to {out}" in result.output

    [t] = list(read_trajectories(out))
    assert Trajectory.model_validate_json(t.model_dump_json()) == t
    assert t.task_id == "f" and t.agent == "human" and t.success
    assert t.termination is TerminationReason.terminated and t.status == "success"
    assert t.recommended == [token] and t.recommended_ids == [product.product_id]
    calls = [c.function for m in t.messages if m.role == "assistant" for c in m.tool_calls or []]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("find_product", {"q": q, "page": "1"}),
        ("recommend_product", {"product_ids": token}),
        ("terminate", {"status": "success"}),
    ]
    assert [e.name for e in t.tool_log] == ["find_product", "recommend_product", "terminate"]

    # a human episode is judged like any other
    judged = CliRunner().invoke(app, ["judge", "show", str(out), "--json"])
    assert judged.exit_code == 0, judged.output
    assert 0.0 <= json.loads(judged.output.splitlines()[0])["score"] <= 1.0


def test_quit_mid_episode_is_recorded_and_not_a_success(
    catalog_dir: Path, tmp_path: Path
) -> None:
    q = _query(ShoppingEnv.open(catalog_dir).catalog)
    task = Task(id="g", intent="product", query=q, reward=[Slot(title=[q])])
    task_file = tmp_path / "t.jsonl"
    task_file.write_text(task.model_dump_json() + "\n")
    out = tmp_path / "played.jsonl"
    # a real process reading a real pipe: the typed lines, then quit
    command = [sys.executable, "-m", "shopbench.cli", "play", "--catalog", str(catalog_dir),
               "--task", str(task_file), "--out", str(out)]
    typed = f'find_product q="{q}"\nquit\nterminate status=success\n'
    done = subprocess.run(command, input=typed, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "episode over: stopped by the player; 1 turns, 1 calls" in done.stdout
    assert "nothing was recommended" in done.stdout
    assert "graded: failure (" in done.stdout

    [t] = list(read_trajectories(out))
    assert t.task_id == "g" and not t.success and t.status is None
    assert t.termination is TerminationReason.policy_error
    assert t.termination_detail == "PlayerQuit: the player quit at turn 2"
    assert [e.name for e in t.tool_log] == ["find_product"]  # nothing after quit ran


def test_play_command_names_a_bad_task_line(catalog_dir: Path, tmp_path: Path) -> None:
    path = _task_file(tmp_path)
    result = _invoke(["play", "--catalog", str(catalog_dir), "--task", f"{path}:3"], [])
    assert isinstance(result.exception, TaskError)
    assert "tasks.jsonl:3: blank line, no task" in str(result.exception)
    result = _invoke(["play", "--catalog", str(catalog_dir), "--task", str(path)], ["quit"])
    assert result.exit_code == 0, result.output
    assert "task (product): first" in result.output  # FILE alone is its first line


def test_play_command_rejects_a_bad_catalog(tmp_path: Path) -> None:
    result = _invoke(["play", "--catalog", str(tmp_path / "nope"), "--query", "x"], [])
    assert result.exit_code != 0
    assert "catalog directory does not exist" in str(result.exception)

