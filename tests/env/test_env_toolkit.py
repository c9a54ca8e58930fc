"""Tool schemas are generated from signatures and docstrings; arguments are checked by them."""

from __future__ import annotations

from typing import Literal

import pytest

from shopbench.catalog.schema import SORTS
from shopbench.env.errors import ArgumentError
from shopbench.env.toolkit import (
    Toolkit,
    bind_arguments,
    parse_docstring,
    spec_from_function,
    tool,
)
from shopbench.env.tools import ShopTools, Sort


class Sample(Toolkit):
    """A toolkit used only to pin the generator's rules."""

    @tool
    def lookup(
        self,
        q: str,
        count: int = 3,
        mode: Literal["fast", "slow"] | None = None,
        tag: str | None = None,
    ) -> str:
        """Look something up
        across two lines.

        Args:
            q: The words to look up,
                wrapped onto a second line.
            count: How many.
            mode: One of:
                - fast: quickly.
                - slow: carefully.
            tag: An optional tag.

        Returns:
            Ignored by the schema.
        """
        return f"{q}|{count}|{mode}|{tag}"

    def helper(self) -> None:
        """Not a tool: no decorator."""


def test_sample_schema_has_the_expected_structure() -> None:
    schema = Sample.tool_specs()["lookup"].openai_schema()
    assert schema == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look something up across two lines.",
            "parameters": {
                "type": "object",
                "properties": {
                    "q": {
                        "type": "string",
                        "description": "The words to look up, wrapped onto a second line.",
                    },
                    "count": {"type": "integer", "description": "How many."},
                    "mode": {
                        "type": "string",
                        "description": "One of:\n- fast: quickly.\n- slow: carefully.",
                        "enum": ["fast", "slow"],
                    },
                    "tag": {"type": "string", "description": "An optional tag."},
                },
                "required": ["q"],
            },
        },
    }
    assert list(Sample.tool_specs()) == ["lookup"]


def test_shop_tools_mirror_shoppingbench_names_arguments_and_required() -> None:
    specs = ShopTools.tool_specs()
    assert list(specs) == [
        "find_product",
        "view_product_information",
        "recommend_product",
        "terminate",
        "web_search",
        "ask_shopper",
    ]
    params = {
        name: [(p.name, p.type, p.required) for p in spec.params] for name, spec in specs.items()
    }
    assert params == {
        "find_product": [
            ("q", "string", True),
            ("page", "integer", True),
            ("shop_id", "string", False),
            ("price", "string", False),
            ("sort", "string", False),
            ("service", "string", False),
        ],
        "view_product_information": [("product_ids", "string", True)],
        "recommend_product": [("product_ids", "string", True)],
        "terminate": [("status", "string", True)],
        "web_search": [("q", "string", True), ("max_results", "integer", False)],
        "ask_shopper": [("question", "string", True)],
    }
    find = specs["find_product"].openai_schema()["function"]["parameters"]["properties"]
    assert set(find["sort"]["enum"]) == set(SORTS)
    assert set(Sort.__args__) == set(SORTS)  # type: ignore[attr-defined]
    assert "- priceasc:" in find["sort"]["description"]
    assert "- COD:" in find["service"]["description"]
    status = specs["terminate"].openai_schema()["function"]["parameters"]["properties"]["status"]
    assert status["enum"] == ["success", "failure"]
    for spec in specs.values():
        assert spec.description and all(p.description for p in spec.params)


def test_parse_docstring_ignores_other_sections() -> None:
    desc, args = parse_docstring(
        """Do it.

        Args:
            a: first
            b (int): second,
                continued.

        Raises:
            ValueError: never listed as an argument.
        """
    )
    assert desc == "Do it."
    assert args == {"a": "first", "b": "second, continued."}


def test_a_tool_without_hint_or_argument_doc_is_refused() -> None:
    def no_doc(self, q: str) -> str:  # type: ignore[no-untyped-def]
        """Has a description.

        Args:
            other: not q.
        """
        return q

    def no_hint(self, q) -> str:  # type: ignore[no-untyped-def]
        """Has a description.

        Args:
            q: the query.
        """
        return q

    def bad_type(self, q: float) -> str:  # type: ignore[no-untyped-def]
        """Has a description.

        Args:
            q: the query.
        """
        return str(q)

    with pytest.raises(TypeError, match="missing from the docstring"):
        spec_from_function(no_doc)
    with pytest.raises(TypeError, match="missing type hint"):
        spec_from_function(no_hint)
    with pytest.raises(TypeError, match="unsupported parameter type"):
        spec_from_function(bad_type)


def test_bind_converts_what_models_emit() -> None:
    spec = Sample.tool_specs()["lookup"]
    assert bind_arguments(spec, {"q": "x", "count": "7"}, 100) == {"q": "x", "count": 7}
    assert bind_arguments(spec, {"q": 12345, "count": 2.0}, 100) == {"q": "12345", "count": 2}
    # an explicit null for an optional argument means "not given"
    assert bind_arguments(spec, {"q": "x", "mode": None}, 100) == {"q": "x"}
    assert Sample().invoke("lookup", bind_arguments(spec, {"q": "x"}, 100)) == "x|3|None|None"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([1, 2], "must be a JSON object, got array"),
        ({}, "missing required argument 'q'"),
        ({"q": "x", "colour": "red"}, "unknown argument 'colour'; allowed: q, count, mode, tag"),
        ({"q": ["x"]}, "'q' must be a string, got array"),
        ({"q": True}, "'q' must be a string, got boolean"),
        ({"q": "x", "count": "two"}, "'count' must be an integer, got 'two'"),
        ({"q": "x", "count": True}, "'count' must be an integer"),
        ({"q": "x", "count": 1.5}, "'count' must be an integer, got 1.5"),
        ({"q": "x", "mode": "medium"}, "'mode' must be one of fast, slow; got 'medium'"),
        ({"q": "y" * 101}, "'q' is 101 characters long; the limit is 100"),
    ],
)
def test_bind_rejects_with_the_reason(arguments: object, message: str) -> None:
    with pytest.raises(ArgumentError) as e:
        bind_arguments(Sample.tool_specs()["lookup"], arguments, 100)
    assert message in str(e.value)
    assert str(e.value).startswith("lookup: ")


def test_the_tool_vocabulary_names_every_tool_and_its_pack() -> None:
    from shopbench.packs.pack import pack_of, tool_packs
    from shopbench.records.tools import BASE_TOOLS, Tool

    assert list(ShopTools.tool_specs()) == list(Tool)
    assert list(ShopTools.declared_specs()) == list(BASE_TOOLS)
    assert all(pack_of(t) is None for t in BASE_TOOLS)
    owners = {t: pack_of(t) for t in Tool if t not in BASE_TOOLS}
    assert {t: p.name for t, p in owners.items() if p} == {
        Tool.WEB_SEARCH: "web_search", Tool.ASK_SHOPPER: "shopper"
    }
    assert [p.name for p in tool_packs()] == ["web_search", "shopper"]
