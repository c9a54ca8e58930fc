"""One exception family per layer: every exception class shopbench defines derives from
:class:`~shopbench.errors.ShopbenchError` and from its package's one root, lives in that
package's ``errors.py``, and is named in the table of ``shopbench/errors.py``."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import shopbench
import shopbench.errors
from shopbench.errors import ShopbenchError


def _modules() -> list[ModuleType]:
    names = [i.name for i in pkgutil.walk_packages(shopbench.__path__, "shopbench.")]
    return [importlib.import_module(n) for n in ["shopbench", *names]]


def _package(module: ModuleType) -> str | None:
    """The package of shopbench/ a module belongs to; None for the top-level modules."""
    parts = module.__name__.split(".")
    if len(parts) > 2 or (len(parts) == 2 and hasattr(module, "__path__")):
        return parts[1]
    return None


def _exceptions() -> dict[type[BaseException], str | None]:
    """Every exception class defined in a module of shopbench, with the module's package."""
    found: dict[type[BaseException], str | None] = {}
    for module in _modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                found[cls] = _package(module)
    return found


EXCEPTIONS = _exceptions()


def _roots() -> dict[str | None, list[type[BaseException]]]:
    roots: dict[str | None, list[type[BaseException]]] = {}
    for cls, package in EXCEPTIONS.items():
        if package is not None and ShopbenchError in cls.__bases__:
            roots.setdefault(package, []).append(cls)
    return roots


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_the_walk_finds_the_families() -> None:
    # a walk that imported nothing would pass every test below
    names = {cls.__name__ for cls in EXCEPTIONS}
    assert {"ShopbenchError", "CatalogError", "ToolError", "SinkError", "JudgeError"} <= names


def test_every_exception_class_derives_from_shopbench_error() -> None:
    stray = sorted(_name(c) for c in EXCEPTIONS if not issubclass(c, ShopbenchError))
    assert not stray, f"exception classes outside the ShopbenchError family: {stray}"


def test_each_package_has_one_root_in_its_errors_module() -> None:
    roots = _roots()
    several = {p: sorted(_name(c) for c in cs) for p, cs in roots.items() if len(cs) > 1}
    assert not several, f"packages with more than one root (direct ShopbenchError child): {several}"
    packages = {p for p in EXCEPTIONS.values() if p is not None}
    rootless = sorted(packages - set(roots))
    assert not rootless, f"packages whose exceptions have no root of their own: {rootless}"
    misplaced = {
        p: _name(cs[0]) for p, cs in roots.items() if cs[0].__module__ != f"shopbench.{p}.errors"
    }
    assert not misplaced, f"roots outside their package's errors.py: {misplaced}"


def test_every_exception_class_derives_from_its_package_root_and_lives_beside_it() -> None:
    roots = {p: cs[0] for p, cs in _roots().items()}
    outside = sorted(
        f"{_name(c)} (root {_name(roots[p])})"
        for c, p in EXCEPTIONS.items()
        if p is not None and p in roots and not issubclass(c, roots[p])
    )
    assert not outside, f"exception classes outside their package's family: {outside}"
    elsewhere = sorted(
        _name(c)
        for c, p in EXCEPTIONS.items()
        if c.__module__ != (f"shopbench.{p}.errors" if p else "shopbench.errors")
    )
    assert not elsewhere, f"exception classes outside their package's errors.py: {elsewhere}"


@pytest.mark.parametrize("cls", sorted(EXCEPTIONS, key=_name), ids=_name)
def test_the_table_in_shopbench_errors_names_every_class(cls: type[BaseException]) -> None:
    doc = shopbench.errors.__doc__ or ""
    assert re.search(rf"(?<![\w.]){re.escape(cls.__name__)}(?!\w)", doc), (
        f"{_name(cls)} is missing from the family table in shopbench/errors.py"
    )


def _table_rows() -> list[list[str]]:
    """The cells of the grid table in shopbench/errors.py, each cell's lines joined."""
    rows: list[list[str]] = []
    cells: list[list[str]] = []
    for line in (shopbench.errors.__doc__ or "").splitlines():
        if line.startswith("+"):
            if cells:
                rows.append([" ".join(" ".join(c).split()) for c in cells])
            cells = []
        elif line.startswith("|"):
            parts = [part.strip() for part in line.strip("|").split(" | ")]
            cells = cells or [[] for _ in parts]
            for cell, part in zip(cells, parts, strict=True):
                cell.append(part)
    return rows


def test_the_table_names_each_package_with_its_root() -> None:
    first = [row[0] for row in _table_rows()]
    for package, (root,) in _roots().items():
        assert any(c.startswith(f"``{package}.errors`` → {root.__name__}") for c in first), (
            f"no row ``{package}.errors`` → {root.__name__} in shopbench/errors.py's table"
        )


def test_a_validation_error_is_one_line_naming_where_and_what() -> None:
    from pydantic import BaseModel, ValidationError, field_validator

    from shopbench.errors import first_problem

    class Inner(BaseModel):
        turns: int

        @field_validator("turns")
        @classmethod
        def positive(cls, v: int) -> int:
            if v < 1:
                raise ValueError("turns must be at least 1")
            return v

    class Outer(BaseModel):
        limits: Inner

    with pytest.raises(ValidationError) as bad:
        Outer.model_validate({"limits": {"turns": 0}})
    assert first_problem(bad.value) == "limits.turns: turns must be at least 1"
    assert first_problem(bad.value, under="run") == "run.limits.turns: turns must be at least 1"
    with pytest.raises(ValidationError) as whole:
        Outer.model_validate(3)
    assert first_problem(whole.value, default="config").startswith("config: Input should be")


def test_the_line_can_name_a_flag_the_value_refused_and_how_many_more() -> None:
    from pydantic import BaseModel, Field, ValidationError

    from shopbench.errors import first_error, first_problem

    class Knobs(BaseModel):
        max_turns: int = Field(ge=1)
        views: list[str]

    with pytest.raises(ValidationError) as bad:
        Knobs.model_validate({"max_turns": 0, "views": [1]})
    e = bad.value
    named = first_problem(e, names={"max_turns": "--max-turns"}, given=True, more=True)
    assert named == "--max-turns: Input should be greater than or equal to 1, got 0 (+1 more)"
    assert first_problem(e, located=False) == "Input should be greater than or equal to 1"
    problem = first_error(e)
    assert (problem.field, problem.kind, problem.input) == ("max_turns", "greater_than_equal", 0)
    with pytest.raises(ValidationError) as whole:
        Knobs.model_validate_json("{not json")
    assert first_error(whole.value).kind == "json_invalid"
    assert first_error(whole.value).field == ""


ROOT = Path(__file__).resolve().parents[2]
_SCANNED = ("shopbench", "template", "neurons")
_HOME = "shopbench/errors.py"
def _copies_in(source: str, name: str) -> list[int]:
    """The lines of `source` that take a ValidationError's first problem by hand: an
    ``.errors(...)`` call indexed (``e.errors()[0]``); a slice of them (a list of problems,
    as a 422's detail) is not one line."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source, name))
        if isinstance(node, ast.Subscript)
        and not isinstance(node.slice, ast.Slice)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "errors"
    ]


def _hand_copies() -> dict[str, list[int]]:
    """Each file of shopbench/, template/ and neurons/ (but shopbench/errors.py) with the
    lines where it takes a first problem by hand."""
    found: dict[str, list[int]] = {}
    for top in _SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            lines = _copies_in(path.read_text(encoding="utf-8"), rel)
            if lines and rel != _HOME:
                found[rel] = lines
    return found


def test_only_first_problem_makes_a_validation_error_one_line() -> None:
    copies = _hand_copies()
    assert not copies, (
        "a ValidationError's first problem taken by hand (use shopbench.errors.first_problem, "
        f"or first_error for its parts): {copies}"
    )


def test_the_scan_finds_a_hand_copy() -> None:
    source = (
        "try:\n    pass\nexcept ValueError as e:\n"
        "    why = e.errors(include_url=False)[0]['msg']\n"
        "    every = [x['msg'] for x in e.errors()]\n"
        "    some = e.errors()[:3]\n"
    )
    assert _copies_in(source, "example.py") == [4]
