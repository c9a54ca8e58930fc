"""Observation views: how a tool result's text becomes the text a model reads.

A view is chosen once and recorded with what it made (a dataset, a model), so inference
reads what training taught:

- ``full``: the environment's text, unchanged (what a miner receives);
- ``compact``: one line per search hit (token, title, price, shop token, services, sold
  count) and, for a viewed product, its title, price, shop, services, attributes and SKU
  options without the descriptions; every product and shop token the full text shows is
  kept, so the agent can act on all of them;

and a history window on top of either: all but the last N assistant turns keep their calls
and lose their reasoning, and their tool results are replaced by a one-line stub naming the
turn, the tool and how many results it had.
A view can also brief the prompt (``/brief``): the system prompt becomes a few sentences of
the same rules (its turn and call limits kept) and each tool schema keeps its first sentences
of description, every parameter, type and allowed value — for a small model whose context
and compute the full prompt (about 1,300 tokens) would take most of.

Text the parsers do not recognise (an error observation, a cut one, another kind's
sentence) passes through every view unchanged: a view never raises on what a tool said.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.errors import PolicyOptionsError
from shopbench.chat import ChatMessage
from shopbench.env.results import (
    ProductDetails,
    ProductHit,
    WebResult,
    parse_product_details,
    parse_search_results,
    parse_web_results,
)
from shopbench.records.tools import Tool

ViewName = Literal["full", "compact"]
VIEWS: tuple[ViewName, ...] = ("full", "compact")
PromptName = Literal["full", "brief", "tools", "forms"]
BRIEF: PromptName = "brief"
TOOLS: PromptName = "tools"
FORMS: PromptName = "forms"
SHORT_PROMPTS: tuple[PromptName, ...] = (BRIEF, TOOLS, FORMS)
"""The prompts a view may ask for instead of the environment's (the id's last part)."""
LINE_PROMPTS: tuple[PromptName, ...] = (TOOLS, FORMS)
"""The prompts that name each tool in one line of the system prompt, no schemas offered."""


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
    prompt: PromptName = Field(
        default="full", description="full: the environment's system prompt and tool schemas; "
        "brief: the same rules and tools in a few sentences; tools: the rules in two "
        "sentences and each tool as one line of its name and arguments, no schemas; forms: "
        "the tools prompt with each argument's form where its schema gives one",
    )  # fmt: skip

    @property
    def id(self) -> str:
        """The stable name recorded with a dataset or a model: ``full``, ``compact/h4``,
        ``compact/h2/brief``."""
        parts: list[str] = [self.name]
        if self.history is not None:
            parts.append(f"h{self.history}")
        if self.prompt in SHORT_PROMPTS:
            parts.append(self.prompt)
        return "/".join(parts)

    @classmethod
    def from_id(cls, view_id: str) -> ObservationView:
        """The view of an :attr:`id`; ValueError naming the id and the allowed form."""
        name, *rest = view_id.split("/")
        window = [p for p in rest if p[:1] == "h" and p[1:].isdigit()]
        prompts = [p for p in rest if p in SHORT_PROMPTS]
        known = len(window) <= 1 and len(prompts) <= 1 and (
            len(window) + len(prompts) == len(rest)
        )  # fmt: skip
        if name not in VIEWS or not known or (prompts and rest[-1] != prompts[0]):
            raise ValueError(
                f"{view_id!r} is not a view id (allowed: {' or '.join(VIEWS)}, optionally "
                "followed by /h<N> and then /brief, /tools or /forms, e.g. compact/h4, "
                "compact/h2/brief or compact/forms)"
            )
        return cls.model_validate({
            "name": name, "history": int(window[0][1:]) if window else None,
            "prompt": prompts[0] if prompts else "full",
        })  # fmt: skip


FULL = ObservationView()
"""The environment's text, every result kept: what a miner reads."""
VIEW_FILE = "observation_view.json"
"""The file of a model directory that records the view the model was trained to read."""


def recorded_view(model_dir: Path) -> ObservationView | None:
    """The view recorded in `model_dir` (:data:`VIEW_FILE`), None when none is;
    PolicyOptionsError naming the file when it is unreadable or names no view."""
    path = Path(model_dir) / VIEW_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ObservationView.from_id(str(data["view"]))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise PolicyOptionsError(f"{path}: not a recorded observation view ({e})") from None


def record_view(model_dir: Path, view: ObservationView) -> Path:
    """Write `view`'s id into `model_dir` (:data:`VIEW_FILE`); the file's path."""
    path = Path(model_dir) / VIEW_FILE
    path.write_text(json.dumps({"view": view.id}) + "\n", encoding="utf-8")
    return path


def resolve_view(
    recorded: ObservationView | None, requested: str | None, where: str
) -> ObservationView:
    """The view a policy reads: the one asked for, else the recorded one, else ``full``.
    PolicyOptionsError when both are given and differ (inference would read what training
    did not teach), or when the id asked for is not a view."""
    try:
        asked = ObservationView.from_id(requested) if requested is not None else None
    except ValueError as e:
        raise PolicyOptionsError(f"view: {e}") from None
    if asked is not None and recorded is not None and asked != recorded:
        raise PolicyOptionsError(
            f"{where} was trained on the observation view {recorded.id!r}, not {asked.id!r}; "
            f"drop the view option or ask for {recorded.id!r}"
        )
    return asked or recorded or FULL


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
    if tool in (None, Tool.FIND_PRODUCT) and (hits := parse_search_results(text)):
        return "\n".join(map(_hit, hits))
    if tool in (None, Tool.VIEW_PRODUCT_INFORMATION) and (products := parse_product_details(text)):
        return "\n".join(map(_details, products))
    if tool in (None, Tool.WEB_SEARCH) and (pages := parse_web_results(text)):
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
    if tool in (None, Tool.FIND_PRODUCT) and (hits := parse_search_results(text)):
        return f", {len(hits)} result{'s' if len(hits) != 1 else ''}"
    if tool in (None, Tool.VIEW_PRODUCT_INFORMATION) and (products := parse_product_details(text)):
        return f", {len(products)} product{'s' if len(products) != 1 else ''}"
    if tool in (None, Tool.WEB_SEARCH) and (pages := parse_web_results(text)):
        return f", {len(pages)} page{'s' if len(pages) != 1 else ''}"
    return ""


def stub(text: str, tool: str | None, turn: int) -> str:
    """The one line that stands for the elided result `text` of assistant turn `turn`
    (1-based): ``[observation of turn 3 elided: find_product, 10 results]``."""
    return f"[observation of turn {turn} elided: {tool or 'tool'}{_count(text, tool)}]"


BRIEF_SYSTEM = (
    "You are a shopping agent. Find the product or products that satisfy every part of the "
    "customer's request (the first user message); use only ids the tools showed you. Search "
    "with find_product (change q, page, price, service, sort or shop_id when it misses), "
    "check details with view_product_information, call recommend_product once with "
    "comma-separated product_ids (one per requested item, in the request's order; from one "
    "shop when asked), then terminate: status success, or failure when nothing fits."
)
"""The brief prompt's rules: the environment's, in a few sentences."""
_LIMITS = re.compile(r"You have at most \d+ turns[^.\n]*\.")


def brief_system(text: str) -> str:
    """The brief system prompt standing for the environment's `text`: :data:`BRIEF_SYSTEM`
    and the limits sentence of `text`, when it has one."""
    limits = _LIMITS.search(text)
    return BRIEF_SYSTEM if limits is None else f"{BRIEF_SYSTEM} {limits.group(0)}"


TOOLS_SYSTEM = (
    "You are a shopping agent. Find what the customer's first message asks for, using only "
    "ids the tools showed you; recommend once, then terminate."
)
"""The ``tools`` prompt's rules: two sentences (the rest is what tuning teaches)."""
_CALL_FORM = '<tool_call>\n{"name": <tool>, "arguments": {...}}\n</tool_call>'


_WRITTEN = re.compile(r'written ("[^"\n]+")')
_LISTED = re.compile(r"^- (\w+):", re.M)


def argument_form(spec: Any) -> str | None:
    """The form an argument's schema gives: its allowed values (``success|failure``, from
    an enum or a description that lists them as ``- value: meaning`` lines, comma-joined
    when it says so) or the pattern its description says it is ``written`` in
    (``"lo-hi"``); None where it gives none."""
    if not isinstance(spec, dict):
        return None
    if spec.get("enum"):
        return "|".join(str(v) for v in spec["enum"])
    text = spec.get("description")
    if not isinstance(text, str):
        return None
    if (written := _WRITTEN.search(text)) is not None:
        return written.group(1)
    listed = _LISTED.findall(text)
    if not listed:
        return None
    joined = "|".join(listed)
    return f"{joined} (comma-separated)" if "comma-separated" in text else joined


def tool_line(tool: dict[str, Any], *, forms: bool = False) -> str | None:
    """One tool schema as one line: ``name(required, optional?)`` with the allowed values
    of an enumerated argument (``status=success|failure``), and with `forms` every form
    :func:`argument_form` finds (``price?="lo-hi"``); None for another shape."""
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return None
    params = fn.get("parameters")
    params = params if isinstance(params, dict) else {}
    props = params.get("properties")
    props = props if isinstance(props, dict) else {}
    required = set(params.get("required") or ())
    args = []
    for key, spec in props.items():
        if forms:  # name?=form: the mark of an optional argument beside its name
            form = argument_form(spec)
            name = str(key) if key in required else f"{key}?"
            args.append(name if form is None else f"{name}={form}")
            continue
        enum = spec.get("enum") if isinstance(spec, dict) else None
        arg = f"{key}={'|'.join(str(v) for v in enum)}" if enum else str(key)
        args.append(arg if key in required else f"{arg}?")  # as the tools prompt was trained
    return f"{fn['name']}({', '.join(args)})"


def tools_system(text: str, tools: Sequence[dict[str, Any]], *, forms: bool = False) -> str:
    """The ``tools`` prompt standing for the environment's `text` and `tools`: its two
    sentences, the limits sentence of `text`, one line per tool (with `forms`, the
    ``forms`` prompt: each argument's form where its schema gives one) and the call form."""
    limits = _LIMITS.search(text)
    lines = [TOOLS_SYSTEM if limits is None else f"{TOOLS_SYSTEM} {limits.group(0)}", "Tools:"]
    lines += [f"- {line}" for t in tools if (line := tool_line(t, forms=forms)) is not None]
    lines.append(f"Call a tool as {_CALL_FORM}")
    return "\n".join(lines)


def _first_sentence(text: str) -> str:
    head = text.split("\n", 1)[0].strip().rstrip(":")
    cut = head.find(". ")
    return head if cut < 0 else head[: cut + 1]


def view_tools(tools: Sequence[dict[str, Any]], view: ObservationView) -> list[dict[str, Any]]:
    """The tool schemas as a model reads them in `view`: unchanged, or (a brief prompt) each
    description cut to its first sentence, every name, parameter, type, enum and required
    list kept. Schemas of another shape pass through unchanged."""
    if view.prompt in LINE_PROMPTS:
        return []  # the system prompt names them (tools_system)
    if view.prompt != BRIEF:
        return list(tools)
    out: list[dict[str, Any]] = []
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict):
            out.append(tool)
            continue
        fn = dict(fn)
        if isinstance(fn.get("description"), str):
            fn["description"] = _first_sentence(fn["description"])
        params = fn.get("parameters")
        if isinstance(params, dict) and isinstance(params.get("properties"), dict):
            props = {}
            for key, spec in params["properties"].items():
                if isinstance(spec, dict) and isinstance(spec.get("description"), str):
                    spec = {**spec, "description": _first_sentence(spec["description"])}
                props[key] = spec
            fn["parameters"] = {**params, "properties": props}
        out.append({**tool, "function": fn})
    return out


def apply_view(
    messages: Sequence[ChatMessage],
    view: ObservationView,
    tools: Sequence[dict[str, Any]] = (),
) -> list[ChatMessage]:
    """`messages` as a model reads them in `view`: each tool message rendered in the view,
    the system prompt briefed when the view briefs it, and, with a history window of N, every
    assistant turn but the last N kept as its calls and text without its reasoning, and the
    tool messages answering it replaced by their :func:`stub`. User messages are kept as they
    are, and the list keeps its length and order. The full view without a window or a brief
    prompt returns the messages themselves. The ``tools`` prompt writes `tools` (the episode's
    schemas) into the system prompt as one line each."""
    if view.name == "full" and view.history is None and view.prompt == "full":
        return list(messages)
    turns = sum(1 for m in messages if m.role == "assistant")
    oldest_kept = turns - view.history + 1 if view.history is not None else 1
    out: list[ChatMessage] = []
    turn = 0  # the assistant turn a tool message answers: the last one before it
    for m in messages:
        if m.role == "assistant":
            turn += 1
            if turn < oldest_kept and m.reasoning_content:
                m = m.model_copy(update={"reasoning_content": None})
        if m.role == "system" and view.prompt == BRIEF and m.content is not None:
            out.append(m.model_copy(update={"content": brief_system(m.content)}))
            continue
        if m.role == "system" and view.prompt in LINE_PROMPTS and m.content is not None:
            text = tools_system(m.content, tools, forms=view.prompt == FORMS)
            out.append(m.model_copy(update={"content": text}))
            continue
        if m.role != "tool" or m.content is None:
            out.append(m)
            continue
        if turn < oldest_kept:
            content = stub(m.content, m.name, turn)
        else:
            content = observation_text(m.content, view, m.name)
        out.append(m.model_copy(update={"content": content}))
    return out
