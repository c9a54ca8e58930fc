"""Observation views: how a tool result's text becomes the text a model reads.

A view is chosen once and recorded with what it made (a dataset, a model), so inference
reads what training taught:

- ``full``: the environment's text, unchanged (what a miner receives);
- ``compact``: one line per search hit (token, title, price, shop token, services, sold
  count) and, for a viewed product, its title, price, shop, services, attributes and SKU
  options without the descriptions; every product and shop token the full text shows is
  kept, so the agent can act on all of them;

and a history window on top of either: the tool results of all but the last N assistant
turns are replaced by a one-line stub naming the turn, the tool and how many results it had.

Text the parsers do not recognise (an error observation, a cut one, another kind's
sentence) passes through every view unchanged: a view never raises on what a tool said.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.chat import ChatMessage
from shopbench.env.results import (
    ProductDetails,
    ProductHit,
    WebResult,
    parse_product_details,
    parse_search_results,
    parse_web_results,
)

ViewName = Literal["full", "compact"]
VIEWS: tuple[ViewName, ...] = ("full", "compact")


class ObservationView(BaseModel):
    """Which view a model reads its observations in, and how much history it keeps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: ViewName = Field(
        default="full", description="full: the environment's text; compact: one line per hit"
    )
    history: int | None = Field(
        default=None, ge=1,
        description="keep the tool results of the last N assistant turns whole, stub the "
        "older ones (None: keep all)",
    )  # fmt: skip

    @property
    def id(self) -> str:
        """The stable name recorded with a dataset or a model: ``full``, ``compact/h4``."""
        return self.name if self.history is None else f"{self.name}/h{self.history}"

    @classmethod
    def from_id(cls, view_id: str) -> ObservationView:
        """The view of an :attr:`id`; ValueError naming the id and the allowed form."""
        name, _, window = view_id.partition("/")
        if name not in VIEWS or (window and not (window[:1] == "h" and window[1:].isdigit())):
            raise ValueError(
                f"{view_id!r} is not a view id (allowed: {' or '.join(VIEWS)}, optionally "
                "followed by /h<N>, e.g. compact/h4)"
            )
        return cls.model_validate({"name": name, "history": int(window[1:]) if window else None})


FULL = ObservationView()
"""The environment's text, every result kept: what a miner reads."""


def _price(p: float) -> str:
    if math.isfinite(p) and p.is_integer() and abs(p) < 1e15:
        return f"₱{int(p)}"
    return f"₱{p!r}"


def _listing(r: ProductHit | ProductDetails) -> str:
    services = ",".join(r.service) or "none"
    return f"{r.product_id} | {r.title} | {_price(r.price)} | shop {r.shop_id} | {services}"


def _hit(r: ProductHit) -> str:
    return f"{_listing(r)} | sold {r.sold_count}"


def _details(r: ProductDetails) -> str:
    lines = [_listing(r)]
    if r.attributes:
        attrs = "; ".join(f"{k}={', '.join(v)}" for k, v in r.attributes.items())
        lines.append(f"  attributes: {attrs}")
    lines.extend(_skus(r.sku_options))
    return "\n".join(lines)


def _skus(options: dict[str, dict[str, str]]) -> list[str]:
    """The SKU options: one line of each key's values when the options are every
    combination of them (a size × colour grid, the usual case), else one line per option."""
    values: dict[str, list[str]] = {}
    for option in options.values():
        for k, v in option.items():
            if v not in values.setdefault(k, []):
                values[k].append(v)
    combos = {tuple(sorted(o.items())) for o in options.values()}
    grid = math.prod(len(v) for v in values.values())
    if (
        len(options) > 1
        and len(combos) == len(options) == grid
        and all(set(o) == set(values) for o in options.values())
    ):
        axes = "; ".join(f"{k}={'|'.join(v)}" for k, v in values.items())
        return [f"  skus (every combination): {axes}"]
    return [
        f"  sku {idx}: {', '.join(f'{k}={v}' for k, v in option.items())}"
        for idx, option in options.items()
    ]


def _page(r: WebResult) -> str:
    return f"{r.title} ({r.url}): {r.content}"


def _compact(text: str, tool: str | None) -> str:
    if text == "[]":
        return "no results"
    if tool in (None, "find_product") and (hits := parse_search_results(text)):
        return "\n".join(map(_hit, hits))
    if tool in (None, "view_product_information") and (products := parse_product_details(text)):
        return "\n".join(map(_details, products))
    if tool in (None, "web_search") and (pages := parse_web_results(text)):
        return "\n".join(map(_page, pages))
    return text  # a sentence, an error, a cut or unknown observation: as the tool said it


def observation_text(text: str, view: ObservationView | ViewName, tool: str | None = None) -> str:
    """The text a model reads for the tool result `text` in `view` (its name alone will do;
    the history window is :func:`apply_view`'s). `tool` names the tool that answered, when
    known; text no view recognises is returned unchanged."""
    name = view if isinstance(view, str) else view.name
    return text if name == "full" else _compact(text, tool)


def _count(text: str, tool: str | None) -> str:
    if text == "[]":
        return ", no results"
    if tool in (None, "find_product") and (hits := parse_search_results(text)):
        return f", {len(hits)} result{'s' if len(hits) != 1 else ''}"
    if tool in (None, "view_product_information") and (products := parse_product_details(text)):
        return f", {len(products)} product{'s' if len(products) != 1 else ''}"
    if tool in (None, "web_search") and (pages := parse_web_results(text)):
        return f", {len(pages)} page{'s' if len(pages) != 1 else ''}"
    return ""


def stub(text: str, tool: str | None, turn: int) -> str:
    """The one line that stands for the elided result `text` of assistant turn `turn`
    (1-based): ``[observation of turn 3 elided: find_product, 10 results]``."""
    return f"[observation of turn {turn} elided: {tool or 'tool'}{_count(text, tool)}]"


def apply_view(messages: Sequence[ChatMessage], view: ObservationView) -> list[ChatMessage]:
    """`messages` as a model reads them in `view`: each tool message rendered in the view,
    and, with a history window of N, the tool messages answering all but the last N
    assistant turns replaced by their :func:`stub`. System, user and assistant messages are
    kept as they are, and the list keeps its length and order. The full view without a
    window returns the messages themselves."""
    if view.name == "full" and view.history is None:
        return list(messages)
    turns = sum(1 for m in messages if m.role == "assistant")
    oldest_kept = turns - view.history + 1 if view.history is not None else 1
    out: list[ChatMessage] = []
    turn = 0  # the assistant turn a tool message answers: the last one before it
    for m in messages:
        if m.role == "assistant":
            turn += 1
        if m.role != "tool" or m.content is None:
            out.append(m)
            continue
        if turn < oldest_kept:
            content = stub(m.content, m.name, turn)
        else:
            content = observation_text(m.content, view, m.name)
        out.append(m.model_copy(update={"content": content}))
    return out
