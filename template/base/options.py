"""Command-line flags, environment variables and config files from one pydantic model.

A neuron's configuration is a pydantic model whose fields are scalars or sections (nested
models). :func:`parse_config` turns it into bittensor-style flags — ``--netuid`` for a
top-level field, ``--wallet.name`` for a section's — each with the field's description as
its help, and fills the model from four layers, later ones winning: the defaults, a TOML or
JSON file (``--config FILE``, sections as tables), environment variables
(``SHOPBENCH_WALLET_NAME``, ``SHOPBENCH_NETUID``) and the flags. Every error names where the
bad value came from: the flag, the variable or the file.

Sections listed as `fixed` (the consensus parameters) get no flags, and a file or a variable
that sets one is refused: they are the release's, not the operator's.
"""

from __future__ import annotations

import argparse
import json
import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from shopbench.errors import ShopbenchError, first_error
from shopbench.settings import ENV_PREFIX, Setting, settings

ModelT = TypeVar("ModelT", bound=BaseModel)


class ConfigError(ShopbenchError):
    """A flag, environment variable or config file holds a value the config refuses."""


def _help(option: Setting) -> str:
    info = option.info
    text = info.description or ""
    if not info.is_required():
        default = info.get_default(call_default_factory=True)
        if isinstance(default, (list, tuple, set, frozenset)):
            default = ",".join(str(x) for x in default) or "none"
        text += f" (default: {default})"
    return f"{text} [env {option.env}]".replace("%", "%%")


def build_parser(
    model: type[BaseModel], prog: str, description: str, fixed: frozenset[str] = frozenset()
) -> argparse.ArgumentParser:
    """An argparse parser with one flag per option of `model`, plus ``--config FILE``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="a TOML or JSON file of settings, sections as tables (flags and environment "
        f"variables win over it) [env {ENV_PREFIX}CONFIG]",
    )
    for opt in settings(model, fixed):
        dest = ".".join(opt.path)
        if opt.kind == "bool":
            parser.add_argument(
                opt.flag, dest=dest, action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS, help=_help(opt),
            )  # fmt: skip
        else:
            metavar = "A,B" if opt.kind == "list" else opt.path[-1].upper()
            parser.add_argument(
                opt.flag, dest=dest, default=argparse.SUPPRESS, metavar=metavar, help=_help(opt)
            )
    return parser


def _set(tree: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for key in path[:-1]:
        node = tree.setdefault(key, {})
        if not isinstance(node, dict):
            node = tree[key] = {}
        tree = node
    tree[path[-1]] = value


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _list_value(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def read_file(path: str | Path) -> dict[str, Any]:
    """The settings of a TOML (``.toml``) or JSON file; ConfigError naming the file."""
    p = Path(path).expanduser()
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"--config {p}: cannot read it ({e.strerror or e})") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        kind = "JSON" if p.suffix == ".json" else "TOML"
        raise ConfigError(f"--config {p}: not valid {kind}: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {p}: the top level must be a table of settings")
    return data


def _walk_paths(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from _walk_paths(value, (*prefix, key))
        else:
            yield (*prefix, key)


def parse_config(
    model: type[ModelT],
    argv: Sequence[str] | None = None,
    *,
    prog: str = "neuron",
    description: str = "",
    env: Mapping[str, str] | None = None,
    fixed: frozenset[str] = frozenset(),
) -> ModelT:
    """`model` filled from defaults < ``--config`` file < environment < flags.

    ConfigError names the flag, variable or file of a refused value, and refuses any
    attempt to set a `fixed` section.
    """
    env = os.environ if env is None else env
    parser = build_parser(model, prog, description, fixed)
    args = vars(parser.parse_args(argv))
    opts = settings(model, fixed)
    sources: dict[tuple[str, ...], str] = {}
    tree: dict[str, Any] = {}

    config_file = args.pop("config", None) or env.get(ENV_PREFIX + "CONFIG")
    if config_file:
        data = read_file(config_file)
        for path in _walk_paths(data):
            if path[0] in fixed:
                raise ConfigError(
                    f"--config {config_file}: {'.'.join(path)} is a consensus parameter, fixed "
                    "by the release; only the local arena may change it"
                )
            sources[path] = f"--config {config_file} ({'.'.join(path)})"
        by_path = {o.path: o for o in opts}
        for path in _walk_paths(data):
            opt = by_path.get(path)
            if opt is not None and opt.kind == "list":
                _set(data, path, _list_value(_get(data, path)))
        tree = _merge(tree, data)

    for name in env:
        for section in fixed:
            if name.startswith(f"{ENV_PREFIX}{section.upper()}_"):
                raise ConfigError(
                    f"{name}: {section} parameters are fixed by the release; only the local "
                    "arena may change them"
                )
    for opt in opts:
        if opt.env in env:
            value: Any = env[opt.env]
            _set(tree, opt.path, _list_value(value) if opt.kind == "list" else value)
            sources[opt.path] = opt.env

    for opt in opts:
        dest = ".".join(opt.path)
        if dest in args:
            value = args[dest]
            _set(tree, opt.path, _list_value(value) if opt.kind == "list" else value)
            sources[opt.path] = opt.flag
    return validate(model, tree, sources, opts)


def _get(tree: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = tree
    for key in path:
        node = node[key]
    return node


def validate(
    model: type[ModelT],
    tree: Mapping[str, Any],
    sources: Mapping[tuple[str, ...], str] | None = None,
    opts: Sequence[Setting] | None = None,
) -> ModelT:
    """`model` validated from `tree`; ConfigError naming the first bad value's source."""
    try:
        return model.model_validate(tree)
    except ValidationError as e:
        problem = first_error(e)
        loc = problem.loc
        sources = sources or {}
        where = next((sources[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in sources), None)
        if where is None:
            flag = next((o.flag for o in opts or [] if o.path == loc), None)
            where = flag or ".".join(loc) or model.__name__
        if not loc:
            raise ConfigError(problem.message) from None
        raise ConfigError(f"{where}: {problem.message}{problem.given}") from None
