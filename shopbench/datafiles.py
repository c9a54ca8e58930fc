"""Versioned data files: a TOML file shipped in the package, or one a user names, read into
a pydantic model with every error naming the file, the entry and what is wrong.

Rubrics and calibration targets are data, not code; this is the one reader they share.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)


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
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        raise error(f"{where}: {loc + ': ' if loc else ''}{msg}") from None
