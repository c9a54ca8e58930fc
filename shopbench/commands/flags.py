"""Command-line options derived from the typed configs, so each bound is declared once.

A command names the config field an option sets; the option's default, help text and
closed numeric bounds come from that field, and the config built from the parsed values is
validated by the same model every other caller uses. A value the model refuses becomes a
usage error naming the flag, never a traceback::

    EVAL = Flags(EvalConfig)

    def eval_command(samples: int = EVAL.option("samples", "--samples")) -> None:
        config = EVAL.build(samples=samples)

:meth:`Flags.block` goes one step further: every field of the model becomes an option
(``--field-name``, or the field's ``json_schema_extra={"flag": ...}``; a bool a
``--x/--no-x`` switch, a list a repeatable option) and the command receives the validated
config whole (:func:`shopbench.commands.blocks.takes`). :class:`Spell` states the few ways a
command spells a field differently (a list as one comma-separated value, a parser, its own
default).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from shopbench import settings
from shopbench.commands.blocks import Block, option
from shopbench.errors import first_error, first_problem

ModelT = TypeVar("ModelT", bound=BaseModel)
_UNSET: Any = object()


@dataclass(frozen=True)
class Spell:
    """How a command spells one field where the field's own type and default do not say it.

    `comma`: a list given as one comma-separated value (``--sizes 4000,16000``); `parse`:
    turns the flag's value into the field's (a ShopbenchError it raises is the command's
    error); `default`: the flag's default where the command's differs from the field's;
    `help`: the help where the field's description is not the flag's."""

    comma: bool = False
    parse: Callable[[Any], Any] | None = None
    default: Any = _UNSET
    help: str | None = None


def flag_of(name: str, info: FieldInfo) -> str:
    """The flag of field `name`: ``--name-with-dashes``, or ``--`` and the field's
    ``json_schema_extra`` ``flag``."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    return "--" + str(extra.get("flag") or name.replace("_", "-"))


def _flag_type(model: type[BaseModel], name: str, annotation: Any, parsed: bool = False) -> Any:
    """The type typer parses for a field: the field's own, a Literal as its values' type, a
    list, tuple or set as a repeatable list; a section or a mapping as text when the
    command parses it (`parsed`), else TypeError."""
    optional = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        if len(args) != 1:
            raise TypeError(f"{model.__name__}.{name}: a union has no flag type; spell it")
        annotation = args[0]

    def scalar(t: Any) -> Any:
        if typing.get_origin(t) is Literal:
            return type(typing.get_args(t)[0])
        if isinstance(t, type) and issubclass(t, BaseModel) or typing.get_origin(t) is dict:
            if parsed:
                return str
            raise TypeError(f"{model.__name__}.{name}: a section has no flag; exclude it")
        return t

    if typing.get_origin(annotation) in (list, tuple, set, frozenset):
        inner = typing.get_args(annotation)[:1] or (str,)
        flag_type: Any = list[scalar(inner[0])]  # type: ignore[misc]
    else:
        flag_type = scalar(annotation)
    return flag_type | None if optional else flag_type


class Flags(Generic[ModelT]):
    """Typer options for the fields of one config model, and the model built from them."""

    def __init__(self, model: type[ModelT]) -> None:
        self.model = model
        self._flag_of: dict[str, str] = {}

    def _info(self, field: str) -> FieldInfo:
        try:
            return self.model.model_fields[field]
        except KeyError:
            known = ", ".join(self.model.model_fields)
            name = self.model.__name__
            raise KeyError(f"{name} has no field {field!r} (fields: {known})") from None

    def option(
        self, field: str, *decls: str, default: Any = _UNSET, help: str | None = None,
        bounds: bool = True,
    ) -> Any:  # fmt: skip
        """A ``typer.Option`` for `field` under the names `decls` (the first is the flag shown
        in errors). The field's default, description and ``ge``/``le`` bounds are used unless
        `default` or `help` override them (`bounds` False: the config alone checks them, so
        :meth:`build` names a bad value in one line); KeyError names an unknown field."""
        info = self._info(field)
        if default is _UNSET:
            required = info.default is PydanticUndefined and info.default_factory is None
            default = ... if required else info.get_default(call_default_factory=True)
        lo, hi = settings.bounds(info)
        shown = decls[0] if decls else flag_of(field, info)
        self._flag_of[field] = shown.split("/")[0]
        if not bounds:
            lo = hi = None
        return typer.Option(
            default, *decls, help=help if help is not None else info.description, min=lo, max=hi
        )

    def override(self, field: str, *decls: str, of: str = "the config") -> Any:
        """An option for `field` that defaults to None: given, it overrides the value `of`
        names (a config file's); the config checks it."""
        info = self._info(field)
        return self.option(
            field, *decls, default=None, help=f"{info.description} (overrides {of})",
            bounds=False,
        )  # fmt: skip

    def block(
        self, name: str = "config", *, exclude: Sequence[str] = (),
        spell: Mapping[str, Spell] | None = None, fixed: Mapping[str, Any] | None = None,
    ) -> Block:  # fmt: skip
        """Every field of the model (but `exclude` and `fixed`) as an option, built into the
        validated model under keyword `name`; `fixed` fields take the values given here,
        `spell` says how a field's flag differs from what its type gives (:class:`Spell`)."""
        spell, fixed = dict(spell or {}), dict(fixed or {})
        for field in [*spell, *exclude, *fixed]:
            self._info(field)  # a misspelt field name fails at start, not at run
        parameters = []
        for field, info in self.model.model_fields.items():
            if field in exclude or field in fixed:
                continue
            how = spell.get(field, Spell())
            flag_type = (
                str | None if how.comma
                else _flag_type(self.model, field, info.annotation, how.parse is not None)
            )  # fmt: skip
            default = how.default
            if default is _UNSET and not (
                info.default is PydanticUndefined and info.default_factory is None
            ):
                default = info.get_default(call_default_factory=True)
                if how.comma and default is not None:
                    default = ",".join(str(x) for x in default)
            decl = flag_of(field, info)
            if settings.kind_of(info) == "bool":
                decl = f"{decl}/--no-{decl[2:]}"
            text = how.help or info.description or field.replace("_", " ")
            flag = self.option(field, decl, default=default, help=text + (
                " (comma-separated)" if how.comma and not how.help else ""))  # fmt: skip
            parameters.append(option(field, flag_type, flag))

        def build(**values: Any) -> ModelT:
            for field, how in spell.items():
                value = values.get(field)
                if how.comma and isinstance(value, str):
                    value = [x.strip() for x in value.split(",") if x.strip()]
                if how.parse is not None and value is not None:
                    value = how.parse(value)
                if field in values:
                    values[field] = value
            return self.build(**fixed, **values)

        return Block(name, parameters, build)

    def build(self, **values: Any) -> ModelT:
        """The config from the parsed option values (and any other fields given); a value
        the model refuses raises ``typer.BadParameter`` naming its flag and the reason."""
        return self.build_or(None, **values)

    def build_or(self, error: type[Exception] | None, **values: Any) -> ModelT:
        """:meth:`build`, raising `error` instead (a shopbench error: one line, exit 2) with
        the flag, the reason and the value refused."""
        try:
            return self.model(**values)
        except ValidationError as e:
            field = first_error(e).field
            flags = {f: self._flag_of.get(f) or f"--{f.replace('_', '-')}" for f in values}
            if error is not None:
                # a rule over several fields has no flag: its own words say which
                raise error(first_problem(e, names=flags, given=bool(field))) from None
            where = flags.get(field) or (f"--{field.replace('_', '-')}" if field else None)
            raise typer.BadParameter(
                first_problem(e, located=False), param_hint=where or self.model.__name__
            ) from None
