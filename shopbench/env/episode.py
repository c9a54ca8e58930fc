"""One episode: the state machine an agent's tool calls run against.

:meth:`Episode.call` is the single boundary where a failing call becomes an error
observation: whatever the agent sends (an unknown tool, broken JSON, a bad argument, an id
it was never shown, a call after the end), the episode answers with text telling it what was
wrong, logs the call, and never raises.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.chat import EpisodeLimits, cut_utf8, parse_arguments, utf8_size
from shopbench.env.errors import (
    ArgumentError,
    EpisodeOverError,
    LimitError,
    UnknownToolError,
    error_code,
)
from shopbench.env.results import render
from shopbench.env.tokens import TokenBook
from shopbench.env.toolkit import Toolkit, ToolSpec, bind_arguments
from shopbench.env.tools import ShopTools
from shopbench.errors import ShopbenchError, UnreadableArguments
from shopbench.records.binding import result_digest
from shopbench.records.tools import Tool

if TYPE_CHECKING:
    from shopbench.catalog.search.index import SearchIndex
    from shopbench.env.packs import PackSession
    from shopbench.records.dialogue import Dialogue
    from shopbench.tasks.model import Task

logger = logging.getLogger(__name__)

EndReason = Literal["terminated", "max_turns", "aborted"]


class Observation(BaseModel):
    """What one tool call returned: `content` is exactly the text the agent sees."""

    model_config = ConfigDict(frozen=True)

    content: str
    error: str | None = Field(
        default=None, description="None on success, else the error code (e.g. invalid_id)"
    )

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None


class ToolCallRecord(BaseModel):
    """One logged call: what was asked, what was answered, how long it took."""

    model_config = ConfigDict(frozen=True)

    turn: int = Field(description="the assistant turn (1-based) the call belongs to")
    name: str = Field(description="the tool name as sent (cut to the name limit)")
    arguments: dict[str, Any] | str = Field(
        description="parsed arguments, or the raw text when it was not a JSON object"
    )
    result: str = Field(description="the observation content")
    error: str | None = None
    latency_ms: float

    @property
    def digest(self) -> str:
        """sha256 of the observation content, for archives that keep only a digest (the one
        digest the tool-log binding checks messages against)."""
        return result_digest(self.result)


def episode_id(key: bytes) -> str:
    """The public id of the episode played with secret `key`: the id the trajectory records
    and the validator sends the miner with every turn (it does not reveal the key)."""
    return hashlib.sha256(b"shopbench-episode:" + key).hexdigest()[:16]


class Episode:
    """A task's episode: the offered tools, its system prompt, its tokens, its log.

    Create with :meth:`shopbench.env.env.ShoppingEnv.new_episode`. The episode loop calls
    :meth:`begin_turn` before each assistant turn and :meth:`call` for each tool call.
    """

    def __init__(
        self,
        task: Task,
        key: bytes,
        index: SearchIndex,
        specs: dict[str, ToolSpec],
        system_prompt: str,
        system_prompt_version: str,
        limits: EpisodeLimits,
        tokens: TokenBook | None = None,
        sessions: Sequence[PackSession] = (),
    ) -> None:
        self.task_id = task.id
        self.intent = task.intent
        self.query = task.query
        self.id = episode_id(key)
        self.system_prompt = system_prompt
        self.system_prompt_version = system_prompt_version
        self.limits = limits
        self._specs = specs
        self._tokens = tokens if tokens is not None else TokenBook(key)
        self._tools = ShopTools(index, self._tokens, limits)
        self._sessions = list(sessions)
        # Which toolkit runs each tool: a pack's tools run on its session's.
        self._toolkits: dict[str, Toolkit] = {name: self._tools for name in specs}
        self._owners: dict[str, PackSession] = {}
        for session in self._sessions:
            for name in session.toolkit.declared_specs():
                self._toolkits[name], self._owners[name] = session.toolkit, session
        self.turn = 0
        self._calls_in_turn = 0
        self.end_reason: EndReason | None = None
        self.log: list[ToolCallRecord] = []

    # -- state -----------------------------------------------------------------------------

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The OpenAI function schemas offered in this episode (fresh copies)."""
        return [s.openai_schema() for s in self._specs.values()]

    @property
    def tool_names(self) -> list[str]:
        """Names of the offered tools."""
        return list(self._specs)

    @property
    def done(self) -> bool:
        """True once the episode has ended (terminate, turn budget, or :meth:`end`)."""
        return self.end_reason is not None

    @property
    def status(self) -> str | None:
        """The status the agent declared with terminate, if it did."""
        return self._tools.status

    @property
    def recommended(self) -> list[str]:
        """The tokens of the one accepted recommend_product call by position, "" where the
        agent left a position empty (empty before the call)."""
        return list(self._tools.recommended or [])

    def recommended_ids(self) -> list[str | None]:
        """The catalog ids behind :attr:`recommended`, in order; None for an empty position."""
        products = self._tokens.mapping("product")
        return [products[t] if t else None for t in self.recommended]

    def resolve(self, token: str) -> str | None:
        """The catalog id of a product or shop token shown in this episode, else None."""
        return self._tokens.resolve(token)

    def dialogue(self) -> Dialogue | None:
        """The shopper's log of a clarify episode (None on other tasks): the first a pack
        of the episode keeps."""
        return next((d for s in self._sessions if (d := s.dialogue()) is not None), None)

    def token_map(self) -> dict[str, str]:
        """Token → catalog id for every product and shop token this episode has shown."""
        return self._tokens.mapping()

    # -- driving ---------------------------------------------------------------------------

    def begin_turn(self) -> bool:
        """Start the next assistant turn; False (and the episode ends) when none is left.

        Returns False without side effects when the episode has already ended.
        """
        if self.done:
            return False
        if self.turn >= self.limits.max_turns:
            self.end_reason = "max_turns"
            return False
        self.turn += 1
        for toolkit in {id(t): t for t in self._toolkits.values()}.values():
            toolkit.turn = self.turn
        self._calls_in_turn = 0
        return True

    def end(self, reason: EndReason = "aborted") -> None:
        """End the episode from outside (a failed agent); later calls get an error."""
        if not self.done:
            self.end_reason = reason

    def call(self, name: str, arguments: dict[str, Any] | str | None = None) -> Observation:
        """Run one tool call and return its observation; never raises for any input.

        `arguments` is a dict or the JSON text a model emits. A call before the first
        :meth:`begin_turn` starts turn 1. Failures of every kind come back as an observation
        whose content starts with ``Error:`` and whose `error` is the failure's code.
        """
        start = time.perf_counter()
        if self.turn == 0:
            self.begin_turn()
        logged_name = name[: self.limits.max_tool_name_chars] if isinstance(name, str) else "?"
        logged_args: dict[str, Any] | str | None = None
        try:
            self._admit()
            spec = self._spec(name)
            args = self._parse_arguments(spec.name, arguments)
            logged_args = dict(args)
            result = self._toolkits[spec.name].invoke(
                spec.name, bind_arguments(spec, args, self.limits.max_string_chars)
            )
            if spec.name == Tool.TERMINATE:
                self.end_reason = "terminated"
            content, code = render(result), None
        except ShopbenchError as e:
            content, code = f"Error: {e}", error_code(e)
        except Exception:  # a bug in a tool must cost the agent one call, not the episode
            logger.exception("tool %s failed in episode %s", logged_name, self.id)
            content = "Error: the tool failed internally; the call was not completed"
            code = "internal"
        if logged_args is None:
            logged_args = _loggable(arguments, self.limits.max_arguments_bytes)
        self.log.append(
            ToolCallRecord(
                turn=self.turn,
                name=logged_name,
                arguments=logged_args,
                result=content,
                error=code,
                latency_ms=(time.perf_counter() - start) * 1000.0,
            )
        )
        return Observation(content=content, error=code)

    async def acall(self, name: str, arguments: dict[str, Any] | str | None = None) -> Observation:
        """:meth:`call`, then, when the call was answered by a pack that rewords its answers
        (the clarify shopper with an LLM), the answer reworded (awaited here, so no HTTP
        blocks the loop) where the pack takes the new words, else its own; never raises."""
        start = time.perf_counter()
        obs = self.call(name, arguments)
        owner = self._owners.get(self.log[-1].name) if obs.error is None else None
        if owner is None:
            return obs
        text = await owner.reword()
        if text is None:
            return obs
        return self._reworded(text, start)

    def accept_rewording(self, text: str) -> bool:
        """Take `text` as the wording of the last call's answer when the pack that answered
        takes it (a replay passes an LLM shopper's archived words here)."""
        owner = self._owners.get(self.log[-1].name) if self.log else None
        if owner is None or not owner.accept(text):
            return False
        self._reworded(text, None)
        return True

    def _reworded(self, text: str, start: float | None) -> Observation:
        """The last log entry with `text` as its result (and the rewording's time added)."""
        last = self.log[-1]
        latency = last.latency_ms if start is None else (time.perf_counter() - start) * 1000.0
        self.log[-1] = last.model_copy(update={"result": text, "latency_ms": latency})
        return Observation(content=text)

    def _parse_arguments(self, tool: str, arguments: dict[str, Any] | str | None) -> dict[str, Any]:
        """The call's arguments as a dict: size checked, then read by the one reader
        (:func:`~shopbench.chat.parse_arguments`: a JSON object of finite values, nested at
        most MAX_ARGUMENTS_DEPTH deep), so that what is logged is what a replay reads."""
        cap = self.limits.max_arguments_bytes
        if isinstance(arguments, str) and len(arguments.encode("utf-8")) > cap:
            raise ArgumentError(f"{tool}: arguments are longer than the limit of {cap} bytes")
        try:
            parsed = parse_arguments(arguments)
        except UnreadableArguments as e:
            raise ArgumentError(f"{tool}: {e}") from None
        if not isinstance(arguments, str):
            size = len(json.dumps(parsed, ensure_ascii=False).encode("utf-8"))
            if size > cap:
                raise ArgumentError(f"{tool}: arguments are longer than the limit of {cap} bytes")
        return parsed

    def _admit(self) -> None:
        """Count the call against its turn; refuse it after the end or over the turn's limit."""
        if self.done:
            raise EpisodeOverError(
                f"the episode has ended ({self.end_reason}); no further tool calls are run"
            )
        self._calls_in_turn += 1
        if self._calls_in_turn > self.limits.max_calls_per_turn:
            raise LimitError(
                f"at most {self.limits.max_calls_per_turn} tool calls per turn; this call was"
                " not run"
            )

    def _spec(self, name: Any) -> ToolSpec:
        spec = self._specs.get(name) if isinstance(name, str) else None
        if spec is None:
            shown = repr(name[:40]) if isinstance(name, str) else "(not a string)"
            raise UnknownToolError(f"unknown tool {shown}; available: {', '.join(self._specs)}")
        return spec


def _loggable(arguments: Any, cap: int) -> dict[str, Any] | str:
    """The arguments as they may be stored in the log: a small dict as is, else text cut to
    `cap` UTF-8 bytes (marked with an ellipsis when cut)."""
    if isinstance(arguments, dict):
        try:
            parse_arguments(arguments)  # JSON carries it exactly: kept as the object
            text = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        except (UnreadableArguments, TypeError, ValueError, RecursionError):
            return _as_text(arguments, cap)
        return arguments if utf8_size(text) <= cap else cut_utf8(text, cap) + "..."
    if isinstance(arguments, str):
        return arguments if utf8_size(arguments) <= cap else cut_utf8(arguments, cap) + "..."
    return "" if arguments is None else cut_utf8(repr(arguments), cap)


def _as_text(arguments: dict[Any, Any], cap: int) -> str:
    """An object JSON cannot carry exactly, as text a reader sees as it was (``NaN`` stays
    ``NaN``, never ``null``), cut to `cap` bytes."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        return f"<{len(arguments)} unserialisable arguments>"
    return text if utf8_size(text) <= cap else cut_utf8(text, cap) + "..."
