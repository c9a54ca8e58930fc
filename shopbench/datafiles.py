"""Versioned data files: a TOML file shipped in the package, or one a user names, read into
a pydantic model with every error naming the file, the entry and what is wrong.

Rubrics and calibration targets are data, not code; this is the one reader they share.
:func:`read_mapping` reads a settings file a user names (TOML, YAML or JSON by its suffix)
into a plain mapping, for the configs that check their own keys.
"""

from __future__ import annotations

import json
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from shopbench.errors import first_problem

ModelT = TypeVar("ModelT", bound=BaseModel)

FORMATS = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}
"""The format :func:`read_mapping` reads a file in, by its suffix."""


def read_text(path: str | Path, *, what: str, error: type[Exception]) -> str:
    """The UTF-8 text of the file at `path`; `error` naming the file and the `what` that
    could not be read, or the first byte that is not UTF-8."""
    p = Path(path).expanduser()
    try:
        return p.read_text(encoding="utf-8")
    except OSError as e:
        raise error(f"{p}: cannot read {what} ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise error(f"{p}: {what} is not UTF-8 text (byte {e.start})") from None


def read_mapping(
    path: str | Path,
    *,
    what: str,
    error: type[Exception],
    default: Literal["toml", "yaml", "json"] = "toml",
) -> dict[str, Any]:
    """The table of settings in the file at `path`, read as its suffix says
    (:data:`FORMATS`; another suffix: `default`). An empty YAML file is an empty table.

    Raises `error` naming the file: unreadable (as the `what` that could not be read), not
    valid in its format, or not a table at the top.
    """
    p = Path(path).expanduser()
    text = read_text(p, what=what, error=error)
    kind = FORMATS.get(p.suffix, default)
    data: Any
    if kind == "yaml":
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise error(f"{p}: not YAML ({e})") from None
        data = {} if data is None else data
    elif kind == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise error(f"{p}: not JSON ({e})") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise error(f"{p}: not TOML ({e})") from None
    if not isinstance(data, dict):
        raise error(f"{p}: not a table of keys and values at the top ({type(data).__name__})")
    return data


def load_toml(
    model: type[ModelT],
    path: str | Path | None,
    *,
    package: str,
    name: str,
    what: str,
    error: type[Exception],
) -> ModelT:
    """`path` (or, when None, the file `name` in the `data/` folder of `package`) as `model`.

    Raises `error` naming the file and the problem: unreadable (saying it was the `what`
    that could not be read), not TOML, or the first entry the model refuses.
    """
    if path is None:
        where = f"{package.replace('.', '/')}/data/{name}"
        text = resources.files(package).joinpath("data", name).read_text(encoding="utf-8")
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise error(f"{where}: cannot read {what} ({e.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{where}: not TOML ({e})") from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise error(f"{where}: {first_problem(e)}") from None
