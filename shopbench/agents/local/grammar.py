"""Constrained tool calls: every turn a local model writes decoded under a grammar of the
tools it was given.

A turn is optional ``<think>`` reasoning (at most :data:`MAX_THOUGHT_CHARS` characters, no
markup), then one or more ``<tool_call>`` blocks, each a JSON object ``{"name": ...,
"arguments": {...}}`` that one of the tools' schemas accepts, then the end of the turn. The
schemas are read from the tools as the environment declares them, each argument held to the
form its schema gives (:func:`argument_schema`): an enum's values, the values a description
lists (comma-joined where it says so), a price ``"lo-hi"``, a page within the range its
description names. Ids are held to what the episode has shown: ``product_ids`` to the
product ids and ``shop_id`` to the shop ids of the tool results so far
(:func:`shown_ids`), and a tool whose required ids have none to choose from is left out of
that turn's grammar; the grammar is rebuilt every turn. ``decoding: grounded`` holds a price
as well: its bounds are numbers the customer wrote (:func:`customer_numbers`), low not above
high (:func:`price_choices`), so a request that names no number gets no price filter.

The grammar is a Lark grammar for llguidance (a maintained constrained-decoding library;
its JSON-schema compiler writes the calls), and :class:`GrammarMask` applies it as a logits
processor, one matcher per row of a batch, so constrained and free rows can share a batch.
llguidance is imported when a grammar is first compiled, not before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from shopbench.agents.errors import LocalModelError
from shopbench.agents.format.markers import CALL_CLOSE, CALL_OPEN, THINK_CLOSE, THINK_OPEN
from shopbench.chat import ChatMessage

MAX_THOUGHT_CHARS = 400
"""Characters of reasoning a constrained turn may write before its first call."""
MAX_TEXT_CHARS = 200
"""Characters of a free-text argument (a search's words) in a constrained call."""
MAX_IDS = 10
"""Ids one ``product_ids`` argument may name (the environment refuses more)."""
_AMOUNT = r"[0-9]+(\.[0-9]+)?"
PRICE_PATTERN = rf"^({_AMOUNT}-({_AMOUNT})?|-{_AMOUNT})$"
"""A price range as the environment reads it: ``lo-hi``, ``lo-`` (``"1000-"``) or ``-hi``
(``"-500"``, an upper bound alone)."""
WRITTEN_FORMS = {'"lo-hi"': PRICE_PATTERN}
"""Patterns of the forms a description says an argument is ``written`` in."""
GRAMMAR_VERSION = 2
"""The grammar's revision, recorded in every evaluation decoded under it: 1 took a price as
``lo-hi`` or ``lo-``; 2 takes ``-hi`` too (and ``grounded`` prices)."""
MAX_NUMBERS = 8
"""Numbers of the customer's messages a grounded price may be built from (the first ones)."""
Decoding = Literal["free", "constrained", "grounded"]
"""How a local model decodes its turns: ``free`` (its own tokens), ``constrained`` (each tool
call under the grammar of the tool schemas, ids held to those shown) or ``grounded``
(constrained, and a price's bounds held to the numbers the customer wrote)."""
GRAMMARS: dict[Decoding, bool] = {"constrained": False, "grounded": True}
"""The decodings that build a grammar, each with whether its prices are grounded."""
MAX_DIGITS = 12
"""Characters of a number a grounded price may take (a longer run of digits is not a price)."""
_NUMBER = re.compile(r"(?<![\w.])[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?")
_PRODUCT_ID = re.compile(r'"product_id"\s*:\s*"([A-Za-z0-9_-]{1,64})"')
_SHOP_ID = re.compile(r'"shop_id"\s*:\s*"([A-Za-z0-9_-]{1,64})"')
_WRITTEN = re.compile(r'written ("[^"\n]+")')
_LISTED = re.compile(r"^\s*- (\w+):", re.M)
_RANGE = re.compile(r"from (\d+) to (\d+)")


def shown_ids(messages: Iterable[ChatMessage]) -> tuple[list[str], list[str]]:
    """The product ids and the shop ids the episode's tool results have shown, each in the
    order first shown."""
    products: dict[str, None] = {}
    shops: dict[str, None] = {}
    for m in messages:
        if m.role != "tool" or not m.content:
            continue
        products.update(dict.fromkeys(_PRODUCT_ID.findall(m.content)))
        shops.update(dict.fromkeys(_SHOP_ID.findall(m.content)))
    return list(products), list(shops)


def customer_numbers(messages: Iterable[ChatMessage]) -> list[str]:
    """The numbers the customer's messages wrote, in the order first written, thousands'
    commas dropped (``"1,073"`` → ``"1073"``); at most :data:`MAX_NUMBERS`."""
    found: dict[str, None] = {}
    for m in messages:
        if m.role == "user" and m.content:
            for n in _NUMBER.findall(m.content):
                if len(n) <= MAX_DIGITS:
                    found.setdefault(n.replace(",", ""))
    return list(found)[:MAX_NUMBERS]


def price_choices(numbers: Sequence[str]) -> list[str]:
    """Every price a grounded call may write from `numbers`: ``n-``, ``-n`` and ``0-n`` (the
    tool's own example form of an upper bound) for each, and ``lo-hi`` for each pair with lo
    below hi."""
    values = sorted(dict.fromkeys(numbers), key=float)
    ranges = [f"{lo}-{hi}" for i, lo in enumerate(values) for hi in values[i + 1 :]
              if float(lo) < float(hi)]  # fmt: skip
    below = [f"0-{n}" for n in values if float(n) > 0]
    return [*(f"{n}-" for n in values), *(f"-{n}" for n in values), *below, *ranges]


def _one_of(values: Sequence[str]) -> str:
    return "(" + "|".join(re.escape(v) for v in values) + ")"


def argument_schema(
    name: str,
    spec: dict[str, Any],
    products: Sequence[str],
    shops: Sequence[str],
    numbers: Sequence[str] | None = None,
) -> dict[str, Any] | None:
    """The JSON schema a constrained call holds argument `name` to; None when it can take no
    value this turn (an id argument with no id shown, a grounded price with no number).
    `numbers`, when given, are what a price is built from (:func:`price_choices`)."""
    kind = spec.get("type", "string")
    said = spec.get("description")
    description: str = said if isinstance(said, str) else ""
    if name == "product_ids":
        if not products:
            return None
        one = _one_of(products)
        return {"type": "string", "pattern": f"^{one}(,{one}){{0,{MAX_IDS - 1}}}$"}
    if name == "shop_id":
        return {"type": "string", "enum": list(shops)} if shops else None
    if spec.get("enum"):
        return {"type": kind, "enum": list(spec["enum"])}
    if kind == "integer":
        out: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": 1000}
        if (found := _RANGE.search(description)) is not None:
            out.update(minimum=int(found.group(1)), maximum=int(found.group(2)))
        return out
    if kind != "string":
        return {"type": kind}
    if (written := _WRITTEN.search(description)) is not None and written.group(1) in WRITTEN_FORMS:
        pattern = WRITTEN_FORMS[written.group(1)]
        if pattern == PRICE_PATTERN and numbers is not None:
            choices = price_choices(numbers)
            return {"type": "string", "enum": choices} if choices else None
        return {"type": "string", "pattern": pattern}
    listed = _LISTED.findall(description)
    if listed:
        one = _one_of(listed)
        if "comma-separated" in description:
            return {"type": "string", "pattern": f"^{one}(,{one}){{0,{len(listed) - 1}}}$"}
        return {"type": "string", "enum": listed}
    return {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS}


def call_schema(
    tools: Sequence[dict[str, Any]],
    products: Sequence[str],
    shops: Sequence[str],
    numbers: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The JSON schema of one call this turn: any of the tools, each with its arguments'
    forms (:func:`argument_schema`, prices grounded in `numbers` when given); a tool a
    required argument of which can take no value is left out. LocalModelError when no tool
    is left."""
    options = []
    for tool in tools:
        fn = tool.get("function", tool)
        params = fn.get("parameters") or {}
        required = list(params.get("required") or [])
        properties: dict[str, Any] = {}
        usable = True
        for arg, spec in (params.get("properties") or {}).items():
            schema = argument_schema(
                arg, spec if isinstance(spec, dict) else {}, products, shops, numbers
            )
            if schema is None:
                usable = usable and arg not in required
                continue
            properties[arg] = schema
        if not usable:
            continue
        arguments = {"type": "object", "properties": properties,
                     "required": [r for r in required if r in properties],
                     "additionalProperties": False}  # fmt: skip
        options.append({
            "type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": arguments},
            "required": ["name", "arguments"], "additionalProperties": False,
        })  # fmt: skip
    if not options:
        raise LocalModelError("no tool can be called with what the episode has shown")
    return {
        "x-guidance": {"whitespace_flexible": False, "item_separator": ", ",
                       "key_separator": ": "},
        "anyOf": options,
    }  # fmt: skip


def _literal(marker: str, ids: dict[str, int]) -> str:
    """A marker as the grammar names it: its single token where the vocabulary has one."""
    return f"<[{ids[marker]}]>" if marker in ids else json.dumps(marker)


def reply_grammar(
    tools: Sequence[dict[str, Any]],
    messages: Sequence[ChatMessage],
    marker_ids: dict[str, int],
    *,
    grounded: bool = False,
) -> str:
    """The Lark grammar of one constrained turn (see the module's docstring), for the
    conversation `messages` so far; `marker_ids` are the format markers' single-token ids;
    `grounded` holds prices to the customer's numbers."""
    products, shops = shown_ids(messages)
    numbers = customer_numbers(messages) if grounded else None
    schema = json.dumps(call_schema(tools, products, shops, numbers), separators=(",", ":"))
    think_open, think_close = _literal(THINK_OPEN, marker_ids), _literal(THINK_CLOSE, marker_ids)
    call_open, call_close = _literal(CALL_OPEN, marker_ids), _literal(CALL_CLOSE, marker_ids)
    return "\n".join([
        'start: think? call ("\\n" call)*',
        f'think: {think_open} THOUGHT {think_close} "\\n\\n"',
        f"THOUGHT: /[^<]{{1,{MAX_THOUGHT_CHARS}}}/",
        f'call: {call_open} "\\n" body "\\n" {call_close}',
        f"body: %json {schema}",
    ])  # fmt: skip


class GrammarTokenizer:
    """The tokenizer llguidance reads, built once from a transformers tokenizer (about a
    second), with the model's end-of-turn ids as its stop tokens."""

    def __init__(self, tokenizer: Any, stop_ids: Iterable[int]) -> None:
        try:
            import llguidance.hf
        except ImportError:
            raise LocalModelError(
                "constrained decoding needs llguidance (pip install 'shopbench[distill]')"
            ) from None
        self.stop_ids = sorted(stop_ids)
        self.inner = llguidance.hf.from_tokenizer(tokenizer, eos_token=self.stop_ids)
        vocab = tokenizer.get_vocab()
        self.marker_ids = {
            m: vocab[m] for m in (THINK_OPEN, THINK_CLOSE, CALL_OPEN, CALL_CLOSE) if m in vocab
        }

    def matcher(self, grammar: str) -> Any:
        """A fresh matcher of `grammar`; LocalModelError when it does not compile."""
        import llguidance

        matcher = llguidance.LLMatcher(
            self.inner, llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0
        )
        if matcher.is_error():
            raise LocalModelError(f"the turn's grammar does not compile: {matcher.get_error()}")
        return matcher


class GrammarMask:
    """A logits processor holding each constrained row of a batch to its grammar: before
    every step it feeds each row's matcher the token the row took last, then leaves finite
    only the tokens the matcher allows. Rows without a grammar, and rows whose matcher has
    stopped (the turn ended), are left as they are."""

    def __init__(self, tokenizer: GrammarTokenizer, grammars: Sequence[str | None]) -> None:
        self._matchers = [tokenizer.matcher(g) if g is not None else None for g in grammars]
        self._start: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np
        import torch

        if self._start is None:
            self._start = int(input_ids.shape[1])
        fed = int(input_ids.shape[1]) > self._start
        for i, matcher in enumerate(self._matchers):
            if matcher is None:
                continue
            if fed and not matcher.is_stopped():
                matcher.consume_token(int(input_ids[i, -1]))
            if matcher.is_stopped() or matcher.is_error():
                self._matchers[i] = None  # the turn ended (or left the grammar): free again
                continue
            bits = np.unpackbits(
                np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8), bitorder="little"
            )
            allowed = torch.zeros(scores.shape[1], dtype=torch.bool)
            n = min(len(bits), scores.shape[1])
            allowed[:n] = torch.from_numpy(bits[:n].astype(bool))
            scores[i] = scores[i].masked_fill(~allowed, float("-inf"))
        return scores
