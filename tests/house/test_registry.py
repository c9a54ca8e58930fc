"""One registry idiom (shopbench/registry.py): order, aliases, places, tags, lazy loading, and
a refusal that names what exists; every extension point of the project is one of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import pytest

from shopbench.errors import RegistryError, ShopbenchError
from shopbench.registry import Registry


@dataclass(frozen=True)
class Shape:
    name: str
    aliases: tuple[str, ...] = ()


def _name(shape: Shape) -> str:
    return shape.name


def _aliases(shape: Shape) -> tuple[str, ...]:
    return shape.aliases


def _shapes(*names: str) -> Registry[Shape]:
    shapes: Registry[Shape] = Registry("shape", key=_name, aliases_of=_aliases)
    for name in names:
        shapes.register(Shape(name))
    return shapes


def test_entries_keep_the_order_they_were_registered_in_and_read_as_a_mapping() -> None:
    shapes = _shapes("square", "circle", "triangle")
    assert shapes.names() == ("square", "circle", "triangle")
    assert list(shapes) == ["square", "circle", "triangle"] and len(shapes) == 3
    assert [s.name for s in shapes.values()] == ["square", "circle", "triangle"]
    assert shapes["circle"] == Shape("circle") and shapes.index("triangle") == 2
    assert "circle" in shapes and "hexagon" not in shapes and shapes.get("hexagon") is None


def test_before_and_after_place_an_entry_next_to_the_one_named() -> None:
    shapes = _shapes("square", "circle")
    shapes.register(Shape("triangle"), before="square")
    shapes.register(Shape("oval"), after="square")
    shapes.register(Shape("star"), after="circle")
    assert shapes.names() == ("triangle", "square", "oval", "circle", "star")
    with pytest.raises(RegistryError, match="before one or after one, not both"):
        shapes.register(Shape("kite"), before="square", after="circle")
    with pytest.raises(RegistryError, match="unknown shape 'hexagon'; allowed: triangle, square"):
        shapes.register(Shape("kite"), after="hexagon")
    assert "kite" not in shapes  # a refused registration leaves nothing behind


def test_aliases_read_as_their_entry_and_are_never_listed() -> None:
    shapes = _shapes("square")
    disc = shapes.register(Shape("circle", aliases=("disc",)), aliases=("round",))
    assert shapes["disc"] is disc and shapes.lookup("round") is disc and shapes.get("disc") is disc
    assert "disc" in shapes and shapes.canonical("round") == "circle"
    assert shapes.names() == ("square", "circle") and list(shapes) == ["square", "circle"]
    assert shapes.aliases() == {"disc": "circle", "round": "circle"}
    shapes.register(Shape("oval"), after="disc")  # a neighbour by its alias
    assert shapes.names() == ("square", "circle", "oval")
    assert shapes.unregister("round") is disc
    assert shapes.names() == ("square", "oval") and shapes.aliases() == {} and "disc" not in shapes


def test_a_name_or_alias_is_taken_once_and_reserved_names_never() -> None:
    shapes: Registry[Shape] = Registry("shape", key=_name, reserved=("json",))
    shapes.register(Shape("circle"), aliases=("disc",))
    with pytest.raises(RegistryError, match="shape 'circle' is already registered"):
        shapes.register(Shape("circle"))
    with pytest.raises(RegistryError, match="shape 'disc' is already registered"):
        shapes.register(Shape("disc"))
    with pytest.raises(RegistryError, match="shape 'disc' is already registered"):
        shapes.register(Shape("oval"), aliases=("disc",))
    with pytest.raises(RegistryError, match="shape name 'json' is reserved"):
        shapes.register(Shape("json"))
    with pytest.raises(RegistryError, match="registered with its name"):
        Registry[Shape]("shape").register(Shape("circle"))
    assert shapes.names() == ("circle",)


def test_an_unknown_name_is_refused_naming_every_name_and_what_else_is_accepted() -> None:
    shapes = _shapes("square", "circle")
    with pytest.raises(RegistryError) as refused:
        shapes["hexagon"]
    assert str(refused.value) == "unknown shape 'hexagon'; allowed: square, circle"
    # A KeyError as a mapping's missing key is, and a ShopbenchError the CLI prints as a line.
    assert isinstance(refused.value, KeyError) and isinstance(refused.value, ShopbenchError)
    with pytest.raises(RegistryError, match="unknown shape 'hexagon'"):
        shapes.unregister("hexagon")
    empty: Registry[Shape] = Registry("shape", key=_name, also="a drawing (draw:NAME)")
    assert empty.unknown("x") == "unknown shape 'x'; allowed: none registered, or a drawing (draw:NAME)"


def test_a_registry_raises_its_owners_error() -> None:
    class ShapeError(Exception):
        pass

    shapes: Registry[Shape] = Registry("shape", key=_name, error=ShapeError)
    shapes.register(Shape("circle"))
    with pytest.raises(ShapeError, match="unknown shape 'oval'; allowed: circle"):
        shapes.lookup("oval")
    with pytest.raises(ShapeError, match="already registered"):
        shapes.register(Shape("circle"))


def test_tags_select_a_group_in_the_registrys_order() -> None:
    shapes: Registry[Shape] = Registry("shape", key=_name)
    for name, tag in (("square", "flat"), ("ball", "solid"), ("circle", "flat"), ("cube", "solid")):
        shapes.register(Shape(name), tags=(tag,))
    assert shapes.names("flat") == ("square", "circle") and shapes.names("solid") == ("ball", "cube")
    assert list(shapes.tagged("solid")) == ["ball", "cube"] and shapes.tags("cube") == {"solid"}
    assert shapes.names("round") == ()


def test_loaded_entries_come_first_on_first_use_and_a_failed_load_is_tried_again() -> None:
    calls: list[int] = []

    def load() -> list[Shape]:
        calls.append(1)
        if len(calls) == 1:
            raise ImportError("not yet")
        return [Shape("square"), Shape("circle")]

    shapes: Registry[Shape] = Registry("shape", key=_name, load=load)
    with pytest.raises(ImportError):
        shapes.names()
    shapes.register(Shape("star"))
    assert shapes.names() == ("square", "circle", "star") and len(calls) == 2
    assert len(shapes) == 3 and len(calls) == 2
    for first_use in (
        lambda r: r.lookup("circle"), lambda r: r["circle"], lambda r: r.index("circle"),
        lambda r: r.tags("circle"), lambda r: r.get("circle"), lambda r: r.unregister("circle"),
    ):  # fmt: skip
        fresh: Registry[Shape] = Registry("shape", key=_name, load=lambda: [Shape("circle")])
        assert first_use(fresh) in (Shape("circle"), 0, frozenset())


def test_every_extension_point_is_one_registry() -> None:
    from shopbench.agents.registry import POLICIES, POLICY_NAMES, REFERENCE_POLICIES
    from shopbench.curation.rules import RULES
    from shopbench.distill.rl.environment import ENVIRONMENTS
    from shopbench.judging.registry import JUDGES
    from shopbench.records.task import Intent
    from shopbench.tasks.intent_registry import REGISTRY as INTENTS
    from shopbench.traces.formats import FORMATS

    for registry in (POLICIES, RULES, ENVIRONMENTS, JUDGES, INTENTS, FORMATS):
        assert isinstance(registry, Registry)
    assert INTENTS.names() == get_args(Intent)
    assert FORMATS["trl"] is FORMATS["chat"] and "datasets" not in FORMATS.names()
    assert POLICY_NAMES == tuple(REFERENCE_POLICIES) == POLICIES.names("reference")
    assert POLICIES.names()[: len(POLICY_NAMES)] == POLICY_NAMES
    assert JUDGES.names() == ("rubric",)
    assert ENVIRONMENTS.names() == ("shopping", "knowledge", "clarify")
