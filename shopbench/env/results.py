"""What the tools answer: one typed model per result kind, the text the agent sees, and
the parsers that read that text back.

The tools return these models; :func:`render` turns a result into the observation text
(compact JSON for the list results, ShoppingBench's sentences for recommend_product and
terminate). Whoever reads observations — a policy, the rubric judge, an experiment that
forges them — parses them with the ``parse_*`` function of their kind, so no reader depends
on string keys of its own.

The models show only what the agent is shown (episode tokens, never catalog ids, and no
task or grading data): agents may import them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from shopbench.catalog.schema import Service

Status = Literal["success", "failure"]

RECOMMENDED = "Having recommended the products to the user: "
TERMINATED = "The interaction has been completed with status: "


class ProductHit(BaseModel):
    """One find_product result row."""

    model_config = ConfigDict(frozen=True)

    product_id: str = Field(description="the product's episode token")
    shop_id: str = Field(description="its shop's episode token")
    title: str
    price: float = Field(description="in pesos")
    service: tuple[Service, ...]
    sold_count: int


class ProductDetails(BaseModel):
    """One view_product_information result: a product's details."""

    model_config = ConfigDict(frozen=True)

    product_id: str = Field(description="the product's episode token")
    shop_id: str = Field(description="its shop's episode token")
    title: str
    price: float = Field(description="in pesos")
    service: tuple[Service, ...]
    short_description: str
    description: str = Field(description="cut to the episode's description limit")
    sku_options: dict[str, dict[str, str]] = Field(
        description='option index ("0", "1", ...) → one purchasable combination'
    )
    attributes: dict[str, list[str]]


class WebResult(BaseModel):
    """One web_search result, in ShoppingBench's shape (url, title, content)."""

    model_config = ConfigDict(frozen=True)

    url: str
    title: str
    content: str


class Recommendation(BaseModel):
    """The answer to the one accepted recommend_product call."""

    model_config = ConfigDict(frozen=True)

    product_ids: tuple[str, ...] = Field(
        description='the recommended tokens by position; "" where a position was left empty'
    )

    @property
    def text(self) -> str:
        """The sentence the agent reads."""
        return f"{RECOMMENDED}{','.join(self.product_ids)}."


class Termination(BaseModel):
    """The answer to terminate."""

    model_config = ConfigDict(frozen=True)

    status: Status

    @property
    def text(self) -> str:
        """The sentence the agent reads."""
        return f"{TERMINATED}{self.status}"


Row = ProductHit | ProductDetails | WebResult
ToolResult = Recommendation | Termination | Sequence[ProductHit] | Sequence[ProductDetails] \
    | Sequence[WebResult]
R = TypeVar("R", bound=BaseModel)


def render(result: ToolResult) -> str:
    """The observation text of a tool's result: a sentence, or the rows as compact JSON
    (no spaces, non-ASCII kept), each row's fields in model order."""
    if isinstance(result, Recommendation | Termination):
        return result.text
    # A row's __dict__ is its fields in declaration order (no extras, no nested models):
    # the same JSON as model_dump(), without building a copy of every row.
    return json.dumps([vars(r) for r in result], ensure_ascii=False, separators=(",", ":"))


_HITS = TypeAdapter(list[ProductHit])
_DETAILS = TypeAdapter(list[ProductDetails])
_PAGES = TypeAdapter(list[WebResult])
_RECOMMENDED = re.compile(re.escape(RECOMMENDED) + r"([0-9,]*)\.")
_TERMINATED = re.compile(re.escape(TERMINATED) + r"(success|failure)")


def _rows(adapter: TypeAdapter[list[R]], text: str) -> list[R]:
    if not text.startswith("["):  # an error observation, or another kind's sentence
        return []
    try:
        return adapter.validate_json(text)
    except ValidationError:
        return []


def parse_search_results(text: str) -> list[ProductHit]:
    """The rows of a find_product observation; [] for an error or any other text."""
    return _rows(_HITS, text)


def parse_product_details(text: str) -> list[ProductDetails]:
    """The products of a view_product_information observation; [] for an error or any
    other text."""
    return _rows(_DETAILS, text)


def parse_web_results(text: str) -> list[WebResult]:
    """The pages of a web_search observation; [] for an error or any other text."""
    return _rows(_PAGES, text)


def parse_recommendation(text: str) -> Recommendation | None:
    """The recommendation a recommend_product observation accepted; None for an error or
    any other text."""
    m = _RECOMMENDED.fullmatch(text)
    return Recommendation(product_ids=tuple(m.group(1).split(","))) if m else None


def parse_termination(text: str) -> Termination | None:
    """The status a terminate observation declared; None for an error or any other text."""
    m = _TERMINATED.fullmatch(text)
    return Termination.model_validate({"status": m.group(1)}) if m else None
