"""`shopbench play`: typed calls in, the agent's observations out; task files by line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from shopbench.commands import env as env_commands
from shopbench.env import ShoppingEnv
from shopbench.env.play import (
    PlayInputError,
    free_task,
    load_task,
    parse_command,
    play,
    play_key,
)
from shopbench.env.tokens import TokenBook
from shopbench.errors import TaskError
from shopbench.outcome.spec import Slot
from shopbench.tasks.model import Task


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


def test_load_task_by_line_and_its_errors(tmp_path: Path) -> None:
    path = _task_file(tmp_path)
    assert load_task(f"{path}:2").id == "b"
    assert load_task(str(path)).id == "a"
    with pytest.raises(TaskError, match=r"tasks.jsonl:3: blank line"):
        load_task(f"{path}:3")
    with pytest.raises(TaskError, match=r"tasks.jsonl:4: not a task"):
        load_task(f"{path}:4")
    with pytest.raises(TaskError, match="has no line 9"):
        load_task(f"{path}:9")
    with pytest.raises(TaskError, match="task file not found"):
        load_task(f"{tmp_path / 'missing.jsonl'}:1")


def test_free_task_uses_the_typed_query_or_the_example() -> None:
    assert free_task("red umbrella").query == "red umbrella"
    assert free_task("  ").query.startswith("I need a stainless steel water bottle")
    assert free_task("red umbrella").id == free_task("red umbrella").id


def test_play_shows_exactly_the_observations(catalog: Any) -> None:
    env = ShoppingEnv(catalog)
    title = next(iter(catalog.iter_products(batch_size=50)))[0].title
    q = " ".join(title.split()[:3])
    ep = env.new_episode(free_task(q), key=b"p" * 32)
    twin = env.new_episode(free_task(q), key=b"p" * 32)  # same key: same observations
    lines = iter([f'find_product q="{q}" page=1', "help", "find_product page=9 q=x"])
    out: list[str] = []

    def read(prompt: str) -> str:
        out.append(prompt)
        line = next(lines, None)
        if line is None:
            raise EOFError
        return line

    play(ep, read, out.append)
    expected = twin.call("find_product", {"q": q, "page": "1"}).content
    assert expected in out
    assert "[turn 1/30] > " in out and "[turn 2/30] > " in out
    assert any("view_product_information product_ids=" in o for o in out)  # the help text
    assert "Error: find_product: argument 'page' must be from 1 to 5, got 9" in out
    assert ep.turn == 2 and "nothing was recommended" in out[-1]


def _app() -> typer.Typer:
    app = typer.Typer()
    bench_app = typer.Typer()
    app.add_typer(bench_app, name="bench")
    env_commands.register(app, bench_app)
    return app


def test_play_command_on_a_fresh_catalog(catalog_dir: Path, tmp_path: Path) -> None:
    catalog = ShoppingEnv.open(catalog_dir).catalog
    title = next(iter(catalog.iter_products(batch_size=50)))[0].title
    q = " ".join(title.split()[:3])
    call = f"find_product {json.dumps({'q': q, 'page': 1})}\n"
    args = ["play", "--catalog", str(catalog_dir), "--query", q, "--seed", "3"]
    result = CliRunner().invoke(_app(), args, input=call)
    assert result.exit_code == 0, result.output
    assert f"task (product): {q}" in result.output
    shown = json.loads(result.output.split("> ", 1)[1].splitlines()[0])
    assert shown and len(shown[0]["product_id"]) == 10
    token = shown[0]["product_id"]
    first_id = catalog.index.find(q)[0].product_id
    assert TokenBook(play_key(3)).show("product", first_id) == token

    # the same seed replays the same ids: recommend one from a task file, then terminate
    task_file = tmp_path / "t.jsonl"
    product = catalog.index.find(q)[0]
    target = Slot(product_id=product.product_id, title=[product.title])
    task = Task(id="f", intent="product", query=q, reward=[target])
    task_file.write_text(task.model_dump_json() + "\n")
    script = [
        f'find_product q="{q}" page=1',
        f"recommend_product product_ids={token}",
        "terminate status=success",
    ]
    args = ["play", "--catalog", str(catalog_dir), "--task", f"{task_file}:1", "--seed", "3"]
    result = CliRunner().invoke(_app(), args, input="\n".join(script) + "\n")
    assert result.exit_code == 0, result.output
    assert f"Having recommended the products to the user: {token}." in result.output
    assert "episode over: terminated; 3 turns, 3 calls" in result.output
    assert f"recommended {token} = catalog product {product.product_id}: {product.title}" in (
        result.output
    )
    # the task's only slot asks for exactly this product's title: the grader says success
    assert "graded: success; rule scores [1.00]" in result.output


def test_play_command_rejects_a_bad_catalog(tmp_path: Path) -> None:
    args = ["play", "--catalog", str(tmp_path / "nope"), "--query", "x"]
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code != 0
    assert "catalog directory does not exist" in str(result.exception)
