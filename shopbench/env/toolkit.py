"""Tools as typed, documented methods: the `@tool` decorator and the schemas it yields.

A tool's OpenAI function schema is generated from its signature and its Google-style
docstring (summary, then an ``Args:`` section), so the code is the one source of truth:

* ``str`` → ``"string"``, ``int`` → ``"integer"``, ``Literal["a", "b"]`` → a string enum;
* a parameter that has a default, or whose type admits ``None``, is optional;
* the docstring's text before its first section is the tool's description, each
  ``name: text`` entry under ``Args:`` the parameter's description (continuation lines are
  joined; lines that start with ``- `` stay on their own line, for option lists).

The same spec checks a call's arguments (:func:`bind_arguments`) before the tool runs.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from shopbench.env.errors import ArgumentError

F = TypeVar("F", bound=Callable[..., Any])

_TOOL_FLAG = "__shopbench_tool__"
_SECTIONS = ("Args:", "Arguments:", "Returns:", "Raises:", "Yields:", "Examples:", "Notes:")
_ARG_LINE = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_INT_TEXT = re.compile(r"^\s*[+-]?\d{1,18}\s*$")

JsonType = Literal["string", "integer"]


def tool(fn: F) -> F:
    """Mark a toolkit method as a tool; its schema comes from its signature and docstring."""
    setattr(fn, _TOOL_FLAG, True)
    return fn


class ParamSpec(BaseModel):
    """One parameter of a tool, as the agent sees it and as calls are checked against."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: JsonType
    description: str
    required: bool
    enum: tuple[str, ...] | None = None
    default: str | int | None = None

    def json_schema(self) -> dict[str, Any]:
        """This parameter's JSON-schema property."""
        prop: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.enum is not None:
            prop["enum"] = list(self.enum)
        return prop


class ToolSpec(BaseModel):
    """A tool's name, description and parameters, generated from the method."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    params: tuple[ParamSpec, ...]

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {p.name: p.json_schema() for p in self.params},
                    "required": [p.name for p in self.params if p.required],
                },
            },
        }


def _join(lines: list[str]) -> str:
    """Join wrapped docstring lines; a blank line or a line starting with '- ' breaks."""
    text = ""
    for raw in lines:
        line = raw.strip()
        if not line:
            text += "\n" if text and not text.endswith("\n") else ""
        elif not text:
            text = line
        elif text.endswith("\n") or line.startswith("- "):
            text = text.rstrip("\n") + "\n" + line
        else:
            text += " " + line
    return text.strip()


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {argument: description})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    args: dict[str, list[str]] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = 0
    for line in lines:
        stripped = line.strip()
        if stripped in _SECTIONS and not line.startswith(" "):
            section, current = stripped, None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args:", "Arguments:") and stripped:
            indent = len(line) - len(line.lstrip())
            m = _ARG_LINE.match(stripped)
            if m and (current is None or indent <= arg_indent):
                current, arg_indent = m.group(1), indent
                args[current] = [m.group(2)]
            elif current is not None:
                args[current].append(stripped)
    return _join(summary), {k: _join(v) for k, v in args.items()}


def _json_type(annotation: Any, where: str) -> tuple[JsonType, tuple[str, ...] | None, bool]:
    """(JSON type, enum, admits None) of a supported annotation; TypeError otherwise."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"{where}: only `X | None` unions are supported")
        json_type, enum, _ = _json_type(members[0], where)
        return json_type, enum, True
    if origin is Literal:
        values = typing.get_args(annotation)
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"{where}: Literal values must be strings")
        return "string", tuple(values), False
    if annotation is str:
        return "string", None, False
    if annotation is int:
        return "integer", None, False
    raise TypeError(f"{where}: unsupported parameter type {annotation!r} (str, int, Literal)")


def spec_from_function(fn: Callable[..., Any]) -> ToolSpec:
    """Build a tool's spec from its signature and docstring; TypeError if either falls short.

    Every parameter (but `self`) needs a supported type hint and an ``Args:`` entry, and the
    tool a description: a missing one is a programming error caught at import time.
    """
    name = fn.__name__
    description, arg_docs = parse_docstring(fn.__doc__)
    if not description:
        raise TypeError(f"tool {name}: the docstring needs a description")
    hints = typing.get_type_hints(fn)
    params: list[ParamSpec] = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self":
            continue
        where = f"tool {name}, parameter {p.name}"
        if p.name not in hints:
            raise TypeError(f"{where}: missing type hint")
        if p.name not in arg_docs:
            raise TypeError(f"{where}: missing from the docstring's Args section")
        json_type, enum, nullable = _json_type(hints[p.name], where)
        has_default = p.default is not inspect.Parameter.empty
        params.append(
            ParamSpec(
                name=p.name,
                type=json_type,
                description=arg_docs[p.name],
                required=not (has_default or nullable),
                enum=enum,
                default=p.default if has_default else None,
            )
        )
    return ToolSpec(name=name, description=description, params=tuple(params))


def _type_name(value: Any) -> str:
    """The JSON name of a Python value's type, for messages the agent reads."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def _coerce(spec: ParamSpec, value: Any, tool_name: str, max_chars: int) -> str | int:
    """The argument as the tool's type, or ArgumentError saying what was expected."""
    where = f"{tool_name}: argument '{spec.name}'"
    if spec.type == "integer":
        # Models often quote numbers ("page": "2"); ShoppingBench's server accepts that too.
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT_TEXT.match(value):
            return int(value)
        shown = value if isinstance(value, str | int | float) else _type_name(value)
        raise ArgumentError(f"{where} must be an integer, got {_short(shown)}")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # digit ids emitted as JSON numbers
    if not isinstance(value, str):
        raise ArgumentError(f"{where} must be a string, got {_type_name(value)}")
    if len(value) > max_chars:
        raise ArgumentError(f"{where} is {len(value)} characters long; the limit is {max_chars}")
    if spec.enum is not None and value not in spec.enum:
        raise ArgumentError(f"{where} must be one of {', '.join(spec.enum)}; got {_short(value)}")
    return value


def _short(value: Any, n: int = 60) -> str:
    """A value quoted for a message, cut so that a huge argument cannot flood it."""
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def bind_arguments(spec: ToolSpec, arguments: Any, max_chars: int) -> dict[str, str | int]:
    """Check a call's arguments against the spec and return the keyword arguments to pass.

    Rejects (ArgumentError naming the argument and what is allowed) a non-object, unknown
    names, missing required ones, wrong types and strings over `max_chars`. A null or absent
    optional argument takes its default. Integers given as digit strings, and strings given
    as integers, are converted, as models emit both.
    """
    if not isinstance(arguments, dict):
        raise ArgumentError(
            f"{spec.name}: arguments must be a JSON object, got {_type_name(arguments)}"
        )
    names = [p.name for p in spec.params]
    unknown = [k for k in arguments if k not in names]
    if unknown:
        raise ArgumentError(
            f"{spec.name}: unknown argument {_short(unknown[0])}; allowed: {', '.join(names)}"
        )
    bound: dict[str, str | int] = {}
    for p in spec.params:
        value = arguments.get(p.name)
        if value is None:
            if p.required:
                raise ArgumentError(f"{spec.name}: missing required argument '{p.name}' ({p.type})")
            continue
        bound[p.name] = _coerce(p, value, spec.name, max_chars)
    return bound


class Toolkit:
    """Base class of a set of tools: the methods marked with :func:`tool`, in class order."""

    turn: int = 0
    """The episode's current assistant turn (the episode sets it before each turn)."""

    @classmethod
    def declared_specs(cls) -> dict[str, ToolSpec]:
        """The specs of the tools this class (with its bases) declares, by name, in
        definition order (computed once per class)."""
        return _specs_of(cls)

    @classmethod
    def tool_specs(cls) -> dict[str, ToolSpec]:
        """Every tool's spec by name: those it declares, unless a toolkit offers more."""
        return cls.declared_specs()

    def invoke(self, name: str, arguments: dict[str, str | int]) -> Any:
        """Run the tool `name` with already-bound arguments."""
        return getattr(self, name)(**arguments)


_SPECS: dict[type, dict[str, ToolSpec]] = {}


def _specs_of(cls: type) -> dict[str, ToolSpec]:
    if cls in _SPECS:
        return _SPECS[cls]
    specs: dict[str, ToolSpec] = {}
    for klass in reversed(cls.__mro__):
        for attr, fn in vars(klass).items():
            if callable(fn) and getattr(fn, _TOOL_FLAG, False):
                specs[attr] = spec_from_function(fn)
    _SPECS[cls] = specs
    return specs
