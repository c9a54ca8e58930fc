"""The conversation: the chat message types every layer shares, and every limit of an episode.

This is the bottom layer of shopbench (it imports nothing of it). The environment, the
policies, the episode loop, the judges, the trajectory record and the wire protocol all
speak these types, and every size bound they enforce is declared here once
(DESIGN.md, "Limits of an episode"). Sizes of text are UTF-8 bytes, everywhere.

The message shapes mirror the OpenAI chat-completions format (and what vLLM returns), so a
miner can forward a request to its model server almost unchanged.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal, overload

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from shopbench.errors import UnreadableArguments

# -- limits ---------------------------------------------------------------------------------

MAX_TURNS = 30
"""Assistant turns of one episode."""
MAX_TOOL_CALLS = 5
"""Tool calls the environment runs per assistant turn."""
MAX_STORED_CALLS = 16
"""Tool calls of one reply kept in the record (more are dropped; only MAX_TOOL_CALLS run)."""
MAX_TEXT_BYTES = 16 * 1024
"""UTF-8 bytes of an assistant message's reasoning, and of its content."""
MAX_ARGUMENTS_BYTES = 4 * 1024
"""UTF-8 bytes of one tool call's arguments as JSON text."""
MAX_TOOL_NAME = 64
"""Characters of a tool name (ASCII by the schema's pattern)."""
MAX_CALL_ID = 128
"""Characters of a tool call id."""
MAX_VIEW_IDS = 10
"""Product ids per view_product_information call."""
MAX_REQUEST_BYTES = 1024 * 1024
"""Bytes of one validator → miner request."""
MAX_ARGUMENTS_DEPTH = 16
"""Nesting of objects and arrays in one tool call's arguments (ShoppingBench's tools take
flat objects of strings and numbers; deeper text is refused before any parser recurses)."""


def utf8_size(text: str) -> int:
    """The length of `text` in UTF-8 bytes."""
    return len(text.encode("utf-8"))


@overload
def cut_utf8(text: str, cap: int) -> str: ...


@overload
def cut_utf8(text: None, cap: int) -> None: ...


def cut_utf8(text: str | None, cap: int) -> str | None:
    """`text` cut to at most `cap` UTF-8 bytes, never splitting a character."""
    if text is None:
        return None
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    return data[:cap].decode("utf-8", errors="ignore")


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the last one ``…`` when it was cut (for a reader:
    a report, a diagnosis, a mismatch)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def utf8_at_most(limit: int) -> AfterValidator:
    """A pydantic validator rejecting strings longer than `limit` UTF-8 bytes."""

    def check(value: str | None) -> str | None:
        if value is not None and utf8_size(value) > limit:
            raise ValueError(f"is {utf8_size(value)} bytes; the limit is {limit}")
        return value

    return AfterValidator(check)


Text16K = Annotated[str | None, utf8_at_most(MAX_TEXT_BYTES)]
"""Assistant reasoning or content: at most 16 KB of UTF-8."""
ArgumentsText = Annotated[str, utf8_at_most(MAX_ARGUMENTS_BYTES)]
"""A tool call's arguments as JSON text: at most 4 KB of UTF-8."""
ToolName = Annotated[str, Field(max_length=MAX_TOOL_NAME)]
"""The name of the tool a call asks for: at most MAX_TOOL_NAME characters."""
CallId = Annotated[str, Field(max_length=MAX_CALL_ID)]
"""A tool call's id (and a tool message's ``tool_call_id``): at most MAX_CALL_ID characters."""


def arguments_as_text(value: object) -> object:
    """Tool-call arguments given as an object (as some servers and policies send them)
    re-encoded as the JSON text the chat types hold; any other value is returned unchanged.

    An object JSON cannot encode becomes its ``str``, so a bad call stays readable."""
    if not isinstance(value, dict):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


# -- tool-call arguments: the one reader ---------------------------------------------------


MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer every JSON reader carries exactly (JavaScript's, DuckDB's, Arrow's)."""
_SAFE_INT_DIGITS = 16


def load_json(text: str, max_depth: int = MAX_ARGUMENTS_DEPTH) -> Any:
    """Any JSON value from `text`, refused (:class:`UnreadableArguments`) when it is not
    JSON, nests deeper than `max_depth` (checked by a linear scan before any parser
    recurses) or holds a number that is not finite (``NaN``, ``Infinity``, ``1e400``) or an
    integer too long to read. Never raises anything else."""
    if _text_depth(text, max_depth) > max_depth:
        raise UnreadableArguments(f"nested more than {max_depth} levels deep")
    try:
        return json.loads(
            text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_safe_int
        )
    except json.JSONDecodeError as e:
        raise UnreadableArguments(f"not valid JSON ({e.msg} at {e.pos})") from None
    except (ValueError, RecursionError) as e:
        raise UnreadableArguments(f"holds a value JSON cannot carry ({e})") from None


def parse_arguments(value: object, max_depth: int = MAX_ARGUMENTS_DEPTH) -> dict[str, Any]:
    """Tool-call arguments as a dict: the JSON text an agent wrote (or an object already
    decoded), checked to be a JSON object of finite numbers, strings, booleans and nulls
    nested at most `max_depth` deep. Empty text is ``{}``.

    This is the one reader of arguments an agent wrote: the environment runs calls through
    it and every later reader (pages, diffs, exports, training rows, curation) shows or
    keeps as text what it refuses. Raises :class:`UnreadableArguments`, never anything
    else, and never recurses deeper than `max_depth` whatever the input.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        try:
            parsed = load_json(value, max_depth)
        except UnreadableArguments as e:
            raise UnreadableArguments(f"arguments are {e}") from None
    else:
        parsed = value
        _check_value(parsed, max_depth)
    if not isinstance(parsed, dict):
        raise UnreadableArguments("arguments must be a JSON object of named arguments")
    return parsed


def read_arguments(value: object) -> tuple[dict[str, Any] | None, str | None]:
    """For readers of a record: ``(arguments, None)`` when :func:`parse_arguments` reads
    them, else ``(None, why)``; the caller shows or keeps the original text as inert data."""
    try:
        return parse_arguments(value), None
    except UnreadableArguments as e:
        return None, str(e)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:40]} is not a finite number")
    return number


def _safe_int(text: str) -> int:
    if len(text.lstrip("-")) > _SAFE_INT_DIGITS or abs(number := int(text)) > MAX_SAFE_INTEGER:
        raise ValueError(f"the integer {clip(text, 24)} is beyond ±2^53, which JSON readers carry")
    return number


def _text_depth(text: str, limit: int) -> int:
    """The deepest nesting of `[`/`{` in JSON `text` outside strings, counted up to one
    past `limit` (a linear scan; no recursion)."""
    if text.count("[") + text.count("{") <= limit:
        return 0
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _check_value(value: object, max_depth: int) -> None:
    """Refuse a decoded value that JSON cannot carry: too deep, a non-finite number, a key
    that is not a string, or a type JSON has no name for (iteratively; no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                raise UnreadableArguments(f"arguments are nested more than {max_depth} levels deep")
            if isinstance(item, dict):
                if not all(isinstance(k, str) for k in item):
                    raise UnreadableArguments("argument names must be strings")
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise UnreadableArguments(f"arguments hold {item}, not a finite number")
        elif isinstance(item, int) and not isinstance(item, bool):
            if abs(item) > MAX_SAFE_INTEGER:
                raise UnreadableArguments("arguments hold an integer beyond ±2^53")
        elif item is not None and not isinstance(item, str | int | bool):
            raise UnreadableArguments(f"arguments hold a {type(item).__name__}, not a JSON value")


class EpisodeLimits(BaseModel):
    """Every bound an episode enforces; the defaults are the subnet's consensus values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = Field(default=MAX_TURNS, ge=1, description="assistant turns per episode")
    max_calls_per_turn: int = Field(
        default=MAX_TOOL_CALLS, ge=1, description="tool calls per turn"
    )
    max_view_ids: int = Field(
        default=MAX_VIEW_IDS, ge=1, description="product ids per view_product_information call"
    )
    max_recommend_ids: int = Field(
        default=10, ge=1, description="product ids in the one recommend_product call"
    )
    max_web_results: int = Field(default=10, ge=1, description="upper bound of max_results")
    max_string_chars: int = Field(
        default=500, ge=1, description="characters in any one string argument (q, ids, ...)"
    )
    max_arguments_bytes: int = Field(
        default=MAX_ARGUMENTS_BYTES, ge=64, description="bytes of one call's arguments as JSON"
    )
    max_tool_name_chars: int = Field(
        default=MAX_TOOL_NAME, ge=1, description="characters in a tool name"
    )
    max_description_chars: int = Field(
        default=4000, ge=100, description="a viewed product's description is cut to this length"
    )
    max_snippet_chars: int = Field(
        default=600, ge=50, description="characters of page text per web_search result"
    )
    max_content_bytes: int = Field(
        default=MAX_TEXT_BYTES, ge=1, description="bytes of an assistant message's content"
    )
    max_reasoning_bytes: int = Field(
        default=MAX_TEXT_BYTES, ge=1, description="bytes of an assistant message's reasoning"
    )

    def message_violation(self, reasoning: str | None, content: str | None) -> str | None:
        """Why an assistant message is over its size limits, or None when it fits."""
        for name, text, cap in (
            ("reasoning_content", reasoning, self.max_reasoning_bytes),
            ("content", content, self.max_content_bytes),
        ):
            if text is not None and utf8_size(text) > cap:
                return f"{name} is {utf8_size(text)} bytes; the limit is {cap}"
        return None


# -- messages -------------------------------------------------------------------------------


class FunctionCall(BaseModel):
    """A function the model asks to call; `arguments` is the JSON text the model wrote."""

    model_config = ConfigDict(extra="ignore")

    name: ToolName
    arguments: ArgumentsText = "{}"


class ToolCall(BaseModel):
    """One tool call of an assistant turn."""

    model_config = ConfigDict(extra="ignore")

    id: CallId = ""
    type: Literal["function"] = "function"
    function: FunctionCall

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict (:func:`parse_arguments`); raises UnreadableArguments
        (a ValueError) when they are not a readable JSON object."""
        return parse_arguments(self.function.arguments)


class AssistantMessage(BaseModel):
    """What a policy returns for one turn: reasoning and content at most 16 KB of UTF-8
    each, at most MAX_TOOL_CALLS tool calls."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["assistant"] = "assistant"
    content: Text16K = None
    reasoning_content: Text16K = None
    tool_calls: list[ToolCall] | None = Field(default=None, max_length=MAX_TOOL_CALLS)


class ChatMessage(BaseModel):
    """Any message of the conversation: system, user, assistant or tool."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The dict an OpenAI-compatible server accepts (unset fields omitted)."""
        return self.model_dump(exclude_none=True)
