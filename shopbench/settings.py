"""The settable fields of a typed config: the one walk every command line is derived from.

:func:`settings` lists a pydantic config's fields — sections (nested models) flattened into
dotted paths — each with its flag name, its environment variable, its field info (the help
text is the field's description) and its kind (a switch, a list, a scalar); :func:`bounds`
gives a field's declared ``ge``/``le``. Both command lines build on it: ``shopbench``'s typer
options (:mod:`shopbench.commands.flags`, :mod:`shopbench.commands.blocks`) and the neurons'
bittensor-style flags, environment variables and config files (``template.base.options``).
So a field's name, help and bounds are declared once, on the config.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

ENV_PREFIX = "SHOPBENCH_"
"""The prefix of every setting's environment variable (``SHOPBENCH_WALLET_NAME``)."""


class Setting(typing.NamedTuple):
    """One settable field: its flag, its environment variable and where it lives."""

    path: tuple[str, ...]
    flag: str
    env: str
    info: FieldInfo
    kind: str  # "bool", "list" or "scalar"


def _unwrap(annotation: Any) -> Any:
    """The annotation without ``| None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _section(annotation: Any) -> type[BaseModel] | None:
    inner = _unwrap(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _kind(annotation: Any) -> str:
    inner = _unwrap(annotation)
    if inner is bool:
        return "bool"
    if typing.get_origin(inner) in (list, tuple, set, frozenset):
        return "list"
    return "scalar"


def settings(model: type[BaseModel], fixed: frozenset[str] = frozenset()) -> list[Setting]:
    """Every settable field of `model`, sections flattened, `fixed` sections left out.

    A field may name its own flag with ``json_schema_extra={"flag": "local"}`` (so the
    miner's ``--local`` switch can sit beside its ``--local.allow``).
    """
    found: list[Setting] = []

    def walk(m: type[BaseModel], prefix: tuple[str, ...]) -> None:
        for name, info in m.model_fields.items():
            if not prefix and name in fixed:
                continue
            path = (*prefix, name)
            section = _section(info.annotation)
            if section is not None:
                walk(section, path)
                continue
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            flag = str(extra.get("flag") or ".".join(path))
            env = ENV_PREFIX + "_".join(path).upper()
            found.append(Setting(path, f"--{flag}", env, info, _kind(info.annotation)))

    walk(model, ())
    return found


def kind_of(info: FieldInfo) -> str:
    """``"bool"``, ``"list"`` or ``"scalar"``: how a field is given on a command line."""
    return _kind(info.annotation)


def bounds(info: FieldInfo) -> tuple[Any, Any]:
    """The field's declared (``ge``, ``le``), each None where it declares none."""
    lo = hi = None
    for bound in info.metadata:
        if isinstance(bound, annotated_types.Ge):
            lo = bound.ge
        elif isinstance(bound, annotated_types.Le):
            hi = bound.le
    return lo, hi
