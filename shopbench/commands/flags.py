"""Command-line options derived from the typed configs, so each bound is declared once.

A command names the config field an option sets; the option's default, help text and
closed numeric bounds come from that field, and the config built from the parsed values is
validated by the same model every other caller uses. A value the model refuses becomes a
usage error naming the flag, never a traceback::

    EVAL = Flags(EvalConfig)

    def eval_command(samples: int = EVAL.option("samples", "--samples")) -> None:
        config = EVAL.build(samples=samples)
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined

from shopbench import settings

ModelT = TypeVar("ModelT", bound=BaseModel)
_UNSET: Any = object()


class Flags(Generic[ModelT]):
    """Typer options for the fields of one config model, and the model built from them."""

    def __init__(self, model: type[ModelT]) -> None:
        self.model = model
        self._flag_of: dict[str, str] = {}

    def option(
        self, field: str, *decls: str, default: Any = _UNSET, help: str | None = None,
        bounds: bool = True,
    ) -> Any:  # fmt: skip
        """A ``typer.Option`` for `field` under the names `decls` (the first is the flag shown
        in errors). The field's default, description and ``ge``/``le`` bounds are used unless
        `default` or `help` override them (`bounds` False: the config alone checks them, so
        :meth:`build` names a bad value in one line); KeyError names an unknown field."""
        try:
            info = self.model.model_fields[field]
        except KeyError:
            known = ", ".join(self.model.model_fields)
            name = self.model.__name__
            raise KeyError(f"{name} has no field {field!r} (fields: {known})") from None
        if default is _UNSET:
            required = info.default is PydanticUndefined and info.default_factory is None
            default = ... if required else info.get_default(call_default_factory=True)
        lo, hi = settings.bounds(info)
        self._flag_of[field] = decls[0] if decls else f"--{field.replace('_', '-')}"
        if not bounds:
            lo = hi = None
        return typer.Option(
            default, *decls, help=help if help is not None else info.description, min=lo, max=hi
        )

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
            first = e.errors(include_url=False)[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            where = self._flag_of.get(field) or (
                f"--{field.replace('_', '-')}" if field else self.model.__name__
            )
            message = str(first["msg"]).removeprefix("Value error, ")
            if error is not None:
                if not field:  # a rule over several fields: its own words say which
                    raise error(message) from None
                given = f", got {first['input']!r}" if "input" in first else ""
                raise error(f"{where}: {message[:1].lower()}{message[1:]}{given}") from None
            raise typer.BadParameter(message, param_hint=where) from None
