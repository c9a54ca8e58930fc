"""A person as the policy: typed tool calls in, exactly the agent's observations out.

:class:`HumanPolicy` plays through :func:`shopbench.trajectory.loop.run_episode` like any
other agent, so a human episode becomes a graded ``Trajectory``. Each turn it shows the
messages that arrived since its last turn (tool results, the loop's error nudges) and reads
one line, which is one assistant turn with one tool call, written either as
``name key=value ...`` (shell quoting: ``find_product q="steel bottle" price=0-500``) or as
``name {json}`` — the JSON text goes to the episode as a model would send it, so a person
sees the very error observations an agent would. ``help``, ``tools`` and ``prompt`` are
answered locally and cost no turn.

``quit`` (or the end of the input) is not dressed up as an agent's ``terminate``: the policy
raises :class:`PlayerQuit`, and the loop records the episode as ended by the policy
(termination ``policy_error``, the detail saying the player quit), grading whatever was
recommended. So the record shows what happened: the person stopped, no agent gave up.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from shopbench.agents.errors import PlayerQuit, PlayInputError
from shopbench.chat import MAX_TURNS, AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.errors import first_problem

HUMAN_TURN_TIMEOUT_S = 24 * 3600.0
"""Seconds a person may take over one turn: a day, so nobody at a prompt runs into it."""

COMMANDS_HELP = """\
Type one tool call per line; each line is one turn.
  find_product q="steel bottle" page=1 price=0-500 sort=priceasc service=COD
  view_product_information product_ids=1234567890,2345678901
  recommend_product product_ids=1234567890
  terminate status=success
  find_product {"q": "steel bottle", "page": 1}     (JSON arguments, as a model sends them)
Other commands: help, tools (the JSON schemas), prompt (the system prompt), quit."""

QUIT_WORDS = ("quit", "exit")

T = TypeVar("T")


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


async def _off_the_loop(fn: Callable[[str], T], arg: str) -> T:
    """`fn(arg)` in a daemon thread, awaited without blocking the event loop.

    Not ``asyncio.to_thread``: its worker is joined at exit, so Ctrl-C at a prompt would
    wait for one more Enter. A daemon thread dies with the process, and it blocks SIGINT so
    that Ctrl-C reaches the main thread, where the event loop turns it into
    KeyboardInterrupt at once.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the turn was cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        if hasattr(signal, "pthread_sigmask"):  # POSIX; elsewhere signals go to the main thread
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            result, error = fn(arg), None
        except BaseException as e:  # EOFError and the like travel to the awaiting turn
            result, error = None, e
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop closed while the person was typing
            return

    threading.Thread(target=work, name="human-input", daemon=True).start()
    return await future


class HumanPolicy:
    """A person at a prompt: each turn shows what is new and reads one typed tool call.

    `read(prompt)` returns one line (EOFError: the input ended) and blocks; it runs off the
    event loop. `write(text)` shows text. `intent` and `prompt_version` only label what is
    shown (the task itself is never given to a policy); `max_turns` numbers the prompt.
    """

    name = "human"

    def __init__(
        self,
        read: Callable[[str], str] = input,
        write: Callable[[str], None] = print,
        *,
        intent: str | None = None,
        prompt_version: str | None = None,
        max_turns: int = MAX_TURNS,
    ) -> None:
        self.read = read
        self.write = write
        self.intent = intent
        self.prompt_version = prompt_version
        self.max_turns = max_turns
        self.quit = False
        self._shown = 0

    def show(self, messages: list[ChatMessage]) -> None:
        """Write the messages not shown yet: the user's request on the first turn, then tool
        results and the loop's notes; the system prompt (see ``prompt``) and the person's own
        turns are not echoed. Call it with the final messages to show how the episode ended."""
        for i in range(self._shown, len(messages)):
            message = messages[i]
            if message.role == "system":
                continue
            if message.role == "user" and i <= 1:
                label = f"task ({self.intent})" if self.intent else "task"
                self.write(f"{label}: {message.content}")
            elif message.role in ("user", "tool"):
                self.write(message.content or "")
        self._shown = len(messages)

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        """Show what is new, then read lines until one is a tool call and return it as the
        turn's assistant message. Raises PlayerQuit on ``quit`` or at the end of the input."""
        opening = not any(m.role == "assistant" for m in messages)
        if opening:  # a new episode
            self._shown, self.quit = 0, False
        self.show(messages)
        if opening:
            names = ", ".join(str(t.get("function", {}).get("name", "?")) for t in tools)
            self.write(f"tools: {names}    (type 'help' for examples)")
        turn = sum(1 for m in messages if m.role == "assistant") + 1
        while True:
            try:
                line = await _off_the_loop(self.read, f"[turn {turn}/{self.max_turns}] > ")
            except EOFError:
                self.write("")
                self.quit = True
                raise PlayerQuit(f"the input ended at turn {turn}") from None
            line = line.strip()
            if not line:
                continue
            if line in QUIT_WORDS:
                self.quit = True
                raise PlayerQuit(f"the player quit at turn {turn}")
            if self._local(line, messages, tools):
                continue
            try:
                return _turn(turn, *parse_command(line))
            except PlayInputError as e:
                self.write(f"! {e}")

    def _local(self, line: str, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> bool:
        """Answer help, tools and prompt; False for anything else."""
        if line == "help":
            self.write(COMMANDS_HELP)
        elif line == "tools":
            self.write(json.dumps(tools, indent=2))
        elif line == "prompt":
            system = next((m.content for m in messages if m.role == "system"), None) or ""
            version = f"system prompt {self.prompt_version}" if self.prompt_version else (
                "system prompt"
            )
            self.write(f"({version})\n{system}")
        else:
            return False
        return True


def _turn(turn: int, name: str, arguments: dict[str, Any] | str) -> AssistantMessage:
    """One typed call as the assistant message a model would send; PlayInputError when it
    breaks the message's own limits (a tool name or arguments too long)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    try:
        call = ToolCall(id=f"human-{turn}", function=FunctionCall(name=name, arguments=text))
    except ValidationError as e:
        raise PlayInputError(f"not sent: {first_problem(e, default='call')}") from None
    return AssistantMessage(tool_calls=[call])
