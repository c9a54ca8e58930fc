"""Playing an episode by hand: typed tool calls in, exactly the agent's observations out.

A line is one assistant turn with one tool call, written either as ``name key=value ...``
(shell quoting: ``find_product q="steel bottle" price=0-500``) or as ``name {json}`` — the
JSON text goes to the episode as a model would send it, so a person sees the very error
observations an agent would.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from shopbench.catalog.schema import Product
from shopbench.env.episode import Episode
from shopbench.errors import ShopbenchError, TaskError
from shopbench.outcome.spec import Slot
from shopbench.tasks.model import Task

EXAMPLE_QUERY = "I need a stainless steel water bottle under 500 pesos."
COMMANDS_HELP = """\
Type one tool call per line; each line is one turn.
  find_product q="steel bottle" page=1 price=0-500 sort=priceasc service=COD
  view_product_information product_ids=1234567890,2345678901
  recommend_product product_ids=1234567890
  terminate status=success
  find_product {"q": "steel bottle", "page": 1}     (JSON arguments, as a model sends them)
Other commands: help, tools (the JSON schemas), prompt (the system prompt), quit."""


class PlayInputError(ShopbenchError):
    """A typed line is not a tool call (bad quoting, or a word without key=value)."""


def parse_command(line: str) -> tuple[str, dict[str, Any] | str]:
    """Split a typed line into (tool name, arguments as a dict of strings or raw JSON text)."""
    head, _, rest = line.strip().partition(" ")
    rest = rest.strip()
    if not head:
        raise PlayInputError("empty line: type a tool call, or 'help'")
    if rest.startswith("{"):
        return head, rest
    try:
        words = shlex.split(rest)
    except ValueError as e:
        raise PlayInputError(f"cannot read the arguments: {e}") from None
    args: dict[str, Any] = {}
    for word in words:
        key, eq, value = word.partition("=")
        if not eq or not key:
            raise PlayInputError(f'expected key=value, got {word!r} (e.g. q="steel bottle")')
        args[key] = value
    return head, args


def play_key(seed: int) -> bytes:
    """The episode key of `shopbench play --seed N`: the same seed replays the same ids."""
    return hashlib.sha256(f"shopbench-play:{seed}".encode()).digest()


def free_task(query: str) -> Task:
    """A product task made from a typed query (no known target; nothing to grade)."""
    q = query.strip() or EXAMPLE_QUERY
    digest = hashlib.sha256(q.encode("utf-8")).hexdigest()[:12]
    return Task(id=f"play-{digest}", intent="product", query=q, reward=[Slot(title=[q])])


def load_task(spec: str) -> Task:
    """The task named by ``FILE:N`` (line N, from 1, of a JSONL task file) or ``FILE`` (line 1).

    TaskError names the file and line when the file is missing, the line is out of range,
    blank, or not a valid task.
    """
    path_text, sep, line_text = spec.rpartition(":")
    if not sep or not line_text.isdigit():
        path_text, line_text = spec, "1"
    path, n = Path(path_text), int(line_text)
    if not path.is_file():
        raise TaskError(f"{path}: task file not found")
    if n < 1:
        raise TaskError(f"{spec}: line numbers start at 1")
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if i < n:
                continue
            if not line.strip():
                raise TaskError(f"{path}:{n}: blank line, no task")
            try:
                return Task.model_validate_json(line)
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "record"
                raise TaskError(f"{path}:{n}: not a task ({where}: {first['msg']})") from None
    raise TaskError(f"{path}: has no line {n}")


def outcome_line(
    task: Task, episode: Episode, get: Callable[[list[str]], list[Product | None]]
) -> str:
    """The grader's verdict on the episode's recommendation, in one line."""
    from shopbench.outcome.grader import grade

    outcome = grade(task, get(episode.recommended_ids()))
    scores = ", ".join(f"{s:.2f}" for s in outcome.rule_scores)
    verdict = "success" if outcome.success else f"failure ({outcome.reason})"
    return f"graded: {verdict}; rule scores [{scores}]"


def play(
    episode: Episode,
    read: Callable[[str], str],
    write: Callable[[str], None],
    *,
    describe: Callable[[str], str | None] | None = None,
    verdict: Callable[[Episode], str] | None = None,
) -> None:
    """Run the episode from typed lines until it ends, the input ends, or `quit`.

    `read(prompt)` returns a line (EOFError ends play); `write` prints. `describe(catalog_id)`
    may name a recommended product in the closing summary, and `verdict(episode)` add a
    grade.
    """
    write(f"task ({episode.intent}): {episode.query}")
    write(f"tools: {', '.join(episode.tool_names)}    (type 'help' for examples)")
    while not episode.done:
        try:
            line = read(f"[turn {episode.turn + 1}/{episode.limits.max_turns}] > ").strip()
        except EOFError:
            write("")
            break
        if not line:
            continue
        if line in ("quit", "exit"):
            break
        if line == "help":
            write(COMMANDS_HELP)
            continue
        if line == "tools":
            write(json.dumps(episode.tools, indent=2))
            continue
        if line == "prompt":
            write(f"(system prompt {episode.system_prompt_version})\n{episode.system_prompt}")
            continue
        try:
            name, arguments = parse_command(line)
        except PlayInputError as e:
            write(f"! {e}")
            continue
        if not episode.begin_turn():
            break
        write(episode.call(name, arguments).content)
    write(summary(episode, describe))
    if verdict is not None:
        write(verdict(episode))


def summary(episode: Episode, describe: Callable[[str], str | None] | None = None) -> str:
    """A closing report: how the episode ended and what the recommended tokens stand for."""
    reason = episode.end_reason or "stopped by the player"
    lines = [f"episode over: {reason}; {episode.turn} turns, {len(episode.log)} calls"]
    if not episode.recommended:
        lines.append("nothing was recommended")
    for token, catalog_id in zip(episode.recommended, episode.recommended_ids(), strict=True):
        name = describe(catalog_id) if describe else None
        lines.append(
            f"recommended {token} = catalog product {catalog_id}" + (f": {name}" if name else "")
        )
    return "\n".join(lines)
