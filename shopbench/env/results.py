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
import math
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from shopbench.catalog.schema import Service

Status = Literal["success", "failure"]

RECOMMENDED = "Having recommended the products to the user: "
TERMINATED = "The interaction has been completed with status: "


class Listing(BaseModel):
    """What every product observation shows first, in this order."""

    model_config = ConfigDict(frozen=True)

    product_id: str = Field(description="the product's episode token")
    shop_id: str = Field(description="its shop's episode token")
    title: str
    price: float = Field(description="in pesos")
    service: tuple[Service, ...]


class ProductHit(Listing):
    """One find_product result row."""

    sold_count: int


class ProductDetails(Listing):
    """One view_product_information result: a product's details."""

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


class ShopperReply(BaseModel):
    """The customer's answer to ask_shopper."""

    model_config = ConfigDict(frozen=True)

    answer: str

    @property
    def text(self) -> str:
        """The sentence the agent reads: the answer as the customer said it."""
        return self.answer


@runtime_checkable
class Sentence(Protocol):
    """A result the agent reads as one sentence (a recommendation, a termination, the
    shopper's answer, a pack's own reply)."""

    @property
    def text(self) -> str: ...


ToolResult = Sentence | Sequence[ProductHit] | Sequence[ProductDetails] | Sequence[WebResult]
R = TypeVar("R", bound=BaseModel)


SEARCH_RESULTS = TypeAdapter(list[ProductHit])
"""find_product's result: `validate_python` builds it from plain rows in one validation
(cheaper than building each model), `validate_json` reads it back."""
VIEW_RESULTS = TypeAdapter(list[ProductDetails])
"""view_product_information's result, likewise."""
WEB_RESULTS = TypeAdapter(list[WebResult])
"""web_search's result, likewise."""
_LISTS: dict[type[BaseModel], TypeAdapter[Any]] = {
    ProductHit: SEARCH_RESULTS, ProductDetails: VIEW_RESULTS, WebResult: WEB_RESULTS
}
# pydantic's JSON writer spells every string, int and float as json.dumps does (and three
# times faster), except a float below 1e-4 in magnitude (0.00001 vs 1e-05) or not finite:
# rows holding such a price go through json.dumps, so the text is json.dumps's in every case.
_SMALLEST_PLAIN = 1e-4


def _plain(row: BaseModel) -> bool:
    price = getattr(row, "price", 0.0)
    return price == 0 or (abs(price) >= _SMALLEST_PLAIN and math.isfinite(price))


def render(result: ToolResult) -> str:
    """The observation text of a tool's result: a sentence, or the rows as compact JSON —
    exactly ``json.dumps(rows, ensure_ascii=False, separators=(",", ":"))`` of the rows'
    fields in model order."""
    if isinstance(result, Sentence):
        return result.text
    if not result:
        return "[]"
    if all(map(_plain, result)):
        return _LISTS[type(result[0])].dump_json(list(result)).decode("utf-8")
    # A row's __dict__ is its fields in declaration order (no extras, no nested models).
    return json.dumps([vars(r) for r in result], ensure_ascii=False, separators=(",", ":"))


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
    return _rows(SEARCH_RESULTS, text)


def parse_product_details(text: str) -> list[ProductDetails]:
    """The products of a view_product_information observation; [] for an error or any
    other text."""
    return _rows(VIEW_RESULTS, text)


def parse_web_results(text: str) -> list[WebResult]:
    """The pages of a web_search observation; [] for an error or any other text."""
    return _rows(WEB_RESULTS, text)


def parse_recommendation(text: str) -> Recommendation | None:
    """The recommendation a recommend_product observation accepted; None for an error or
    any other text."""
    m = _RECOMMENDED.fullmatch(text)
    return Recommendation(product_ids=tuple(m.group(1).split(","))) if m else None


def parse_termination(text: str) -> Termination | None:
    """The status a terminate observation declared; None for an error or any other text."""
    m = _TERMINATED.fullmatch(text)
    return Termination.model_validate({"status": m.group(1)}) if m else None
