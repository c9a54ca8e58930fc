"""Reading a shopper's request: the items, their price bounds and services, the voucher.

This is the reading a careful human (or model) does before searching, written down for the
query forms of ``docs/tasks.md`` and ShoppingBench's own: every price bound is a phrase with
its number ("under 500 pesos", "between PHP 75 and 95"), services have recognisable names
("free shipping", "COD", "LazMall", "flash sale"), multi-item requests list their items
(numbered lines, dashes, or "(1) ...; (2) ..."), and the voucher block keeps ShoppingBench's
wording. Attribute and SKU values are read later, against the keys that viewed products
show (:func:`requested_pairs`), because only then is it known which words are a key's label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

_MONEY = r"(?:PHP\s*|₱\s*)?(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*(pesos|PHP))?"
_MARK = re.compile(r"PHP|₱|pesos", re.I)
_BETWEEN = re.compile(
    rf"\b(?:between|from|in the range(?: of)?)\s+{_MONEY}\s+(?:and|to)\s+{_MONEY}", re.I
)
_LESS = re.compile(
    rf"\b(?:no more than|not more than|(?<!no )(?<!not )less than|under|below|at most|up to|"
    rf"cheaper than)"
    rf"\s+{_MONEY}",
    re.I,
)
_GREATER = re.compile(
    rf"\b(?:no less than|not less than|(?<!no )(?<!not )more than|over|above|at least|"
    rf"starting at|pricier than)"
    rf"\s+{_MONEY}",
    re.I,
)
_LESS_AFTER = re.compile(rf"{_MONEY}\s+(?:or less|max(?:imum)?)\b", re.I)
_GREATER_AFTER = re.compile(rf"{_MONEY}\s+(?:or more|and up)\b", re.I)
# After a price, a clause ends: punctuation, a conjunction, a dash, or the end.
_CLAUSE_END = re.compile(r"\s*(?:$|[,;.!?)\n]|—|and\b|only\b|or\b|with\b|from\b|that\b|sold\b)")

SERVICE_PATTERNS: dict[str, re.Pattern[str]] = {
    "official": re.compile(r"official stores?|lazmall", re.I),
    "freeShipping": re.compile(r"free (?:shipping|delivery)", re.I),
    "COD": re.compile(r"cash on delivery|\bCOD\b"),
    "flashsale": re.compile(r"flash ?sale|lazflash", re.I),
}
SERVICE_NAMES: dict[str, str] = {
    "official": "an official store",
    "freeShipping": "free shipping",
    "COD": "cash on delivery",
    "flashsale": "a flash sale",
}

_VOUCHER_HEAD = re.compile(r"my budget is only", re.I)
_BUDGET = re.compile(r"budget is only\s*`?\s*([\d,]+(?:\.\d+)?)", re.I)
_THRESHOLD = re.compile(r"exceeds\s*`?\s*([\d,]+(?:\.\d+)?)", re.I)
_FIXED = re.compile(r"fixed discount of\s*`?\s*([\d,]+(?:\.\d+)?)", re.I)
_PERCENT = re.compile(
    r"percentage discount of\s*`?\s*([\d.]+)\s*%`?(?:\s*with a cap of\s*`?\s*([\d,]+(?:\.\d+)?))?",
    re.I,
)
_SHOP_SCOPE = re.compile(r"only applies to the products from the same shop", re.I)
_SAME_SHOP = re.compile(
    r"same (?:shop|store|seller)|one shop|single (?:shop|store)|one and the same shop|"
    r"that one shop|one shop only|from that shop",
    re.I,
)
_LIST_LINE = re.compile(r"^\s*(?:\d+[.)]|-)\s+(\S.*)$", re.M)
_INLINE_ITEM = re.compile(r"\((\d+)\)\s+")

# How requests open and close around the item they name.
_OPENER = re.compile(
    r"^(?:(?:hi|hello|hey)[!,.]?\s+)?(?:(?:first|then|also|and|so),?\s+)*(?:"
    r"(?:can|could) you (?:please )?(?:find me|find|recommend|get me|show me)|"
    r"please (?:help me (?:find|buy|shop for)|look for|find me|find|recommend|get me|show me)|"
    r"help me (?:shop for|find|buy|order)|"
    r"i'?m (?:looking for|shopping for|hunting for|buying|interested in)|"
    r"i'?d like(?: to (?:get|order|buy))?|i (?:need|want)(?: to (?:buy|order|get))?|"
    r"looking for|searching for|show me|find me|find|where can i buy|do you have|"
    r"any|recommend me|recommend|need to order|get me|buy me|is there|"
    r"my friend recommended|once you know,? (?:show me|find me|recommend)|"
    r"look up the answer and (?:show me|find me|recommend)"
    r")\s+",
    re.I,
)
_CLOSER = re.compile(
    r"(?:\s+for me|,?\s+thanks|;\s*find me one|\s*\.\s*can you help\??)\s*[.?!]*\s*$", re.I
)
_SENTENCE_LEAD = re.compile(
    r"\s*(?:It should be|I want it|Requirements:|It has to be|It must be)(?!\w)", re.I
)
_SHOP_CLOSER = re.compile(
    r"(?:,\s*|\s+)(?:all\s+)?(?:from|in|at)\s+(?:one|the same|a single|that one)\s+"
    r"(?:shop|store|seller)\b.*$",
    re.I,
)
# The item forms that frame a product with its leaf category (leaves are written lower-case).
_LEAF_SUFFIX = re.compile(r"\s+(?:\([^()]{1,60}\)|from the [^,;]{1,60} category)$")
_LEAF_PREFIX = re.compile(r"^(?:an?\s+)?[a-z][a-z0-9&'/ -]{0,60}?(?::|\s+like)\s+(?=\S)")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,})[\"”]")
_POINTER = re.compile(
    r"\s+(?:from|by|made by|made with|made of|that uses)\s+(?:that brand|the brand in question|"
    r"the answer brand|that company's brand|that company|that material|the same material)",
    re.I,
)
# A sentence ends at . ? or ! and a space, but not after a company abbreviation ("Co.").
_SENTENCE_BREAK = re.compile(r"(?<!\bCo\.)(?<!\bInc\.)(?<!\bLtd\.)(?<!\bSt\.)(?<=[.?!])\s+")
_BARE_QUESTION = re.compile(r"(?:which|what)(?: one)? is it\?", re.I)
_CLAUSE_START = re.compile(
    r"^(?:[\w ]{1,40}:\s|with|in|having|where the|priced|costing|that costs|at a price|"
    r"cheaper than|pricier than|starting at|"
    r"somewhere between|for|from|sold by|only from|"
    r"on|that|cash on delivery|cod|free shipping|under|below|less than|at most|no more than|"
    r"up to|not more than|over|above|more than|at least|no less than|not less than|between|"
    r"anywhere from|in the range|and)\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class PriceNeed:
    """A price bound read from the request (inclusive; either side may be open)."""

    lo: float | None
    hi: float | None
    text: str

    def admits(self, price: float) -> bool:
        """Whether `price` is within the bound."""
        return (self.lo is None or price >= self.lo) and (self.hi is None or price <= self.hi)

    def filter(self) -> str:
        """The bound as find_product's price argument ("lo-hi", "lo-" or "-hi")."""
        lo = "" if self.lo is None else _whole(self.lo)
        hi = "" if self.hi is None else _whole(self.hi)
        return f"{lo}-{hi}"


@dataclass(frozen=True, slots=True)
class ItemNeed:
    """One item of the request: the words naming it and the constraints stated with it."""

    text: str
    phrase: str
    price: PriceNeed | None = None
    services: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class VoucherNeed:
    """ShoppingBench's voucher block."""

    budget: float
    scope: Literal["platform", "shop"]
    threshold: float
    kind: Literal["fixed", "percentage"]
    value: float
    cap: float | None = None

    def discount(self, total: float) -> float:
        """What the voucher takes off `total` when it applies."""
        if self.kind == "fixed":
            return self.value
        off = total * self.value / 100.0
        return min(off, self.cap) if self.cap is not None else off

    def pays(self, total: float, shops: int) -> float | None:
        """What the shopper pays for `total` from `shops` shops, or None over the budget."""
        if total <= self.budget:
            return total
        applies = total >= self.threshold and (self.scope == "platform" or shops == 1)
        if applies and total - self.discount(total) <= self.budget:
            return total - self.discount(total)
        return None


@dataclass(frozen=True, slots=True)
class HeldBack:
    """What a clarify request says it holds back, without the values: the price, the
    services, and attributes by their labels (docs/tasks.md)."""

    price: bool = False
    service: bool = False
    labels: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """How many things are held back."""
        return int(self.price) + int(self.service) + len(self.labels)


@dataclass(slots=True)
class Reading:
    """Everything read from a request."""

    items: list[ItemNeed]
    same_shop: bool = False
    voucher: VoucherNeed | None = None
    question: str | None = None
    held_back: HeldBack | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """What the request is: knowledge, voucher, shop, multi (several items) or product."""
        if self.question:
            return "knowledge"
        if self.voucher is not None:
            return "voucher"
        if self.same_shop and len(self.items) > 1:
            return "shop"
        return "multi" if len(self.items) > 1 else "product"


def _whole(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _marked(m: re.Match[str]) -> bool:
    """A price needs a currency mark, or a clause end right after it (not "20 hours")."""
    if _MARK.search(m.group(0)):
        return True
    return _CLAUSE_END.match(m.string, m.end()) is not None


def read_price(text: str) -> PriceNeed | None:
    """The first price bound stated in `text`, or None."""
    found: list[tuple[int, PriceNeed]] = []
    for m in _BETWEEN.finditer(text):
        if _marked(m):
            lo, hi = _number(m.group(1)), _number(m.group(3))
            found.append((m.start(), PriceNeed(min(lo, hi), max(lo, hi), m.group(0))))
    for pattern, side in (
        (_LESS, "hi"), (_LESS_AFTER, "hi"), (_GREATER, "lo"), (_GREATER_AFTER, "lo"),
    ):  # fmt: skip
        for m in pattern.finditer(text):
            if not _marked(m):
                continue
            n = _number(m.group(1))
            lo, hi = (None, n) if side == "hi" else (n, None)
            found.append((m.start(), PriceNeed(lo, hi, m.group(0))))
    if not found:
        return None
    found.sort(key=lambda x: x[0])
    return found[0][1]


def read_services(text: str) -> tuple[str, ...]:
    """The services `text` asks for, in the catalog's order."""
    return tuple(s for s, p in SERVICE_PATTERNS.items() if p.search(text))


def read_voucher(text: str) -> VoucherNeed | None:
    """The voucher block of a request, or None when it has none (or it cannot be read)."""
    budget = _BUDGET.search(text)
    threshold = _THRESHOLD.search(text)
    if budget is None or threshold is None:
        return None
    scope: Literal["platform", "shop"] = "shop" if _SHOP_SCOPE.search(text) else "platform"
    fixed = _FIXED.search(text)
    if fixed is not None:
        return VoucherNeed(
            budget=_number(budget.group(1)), scope=scope,
            threshold=_number(threshold.group(1)), kind="fixed", value=_number(fixed.group(1)),
        )
    pct = _PERCENT.search(text)
    if pct is None:
        return None
    cap = _number(pct.group(2)) if pct.group(2) else None
    return VoucherNeed(
        budget=_number(budget.group(1)), scope=scope, threshold=_number(threshold.group(1)),
        kind="percentage", value=float(pct.group(1)), cap=cap,
    )


def _item_segments(body: str) -> list[str]:
    """The items of a request body: list lines, "(1) ...; (2) ..." parts, or the whole."""
    lines = _LIST_LINE.findall(body)
    if len(lines) >= 2:
        return [line.strip() for line in lines]
    marks = list(_INLINE_ITEM.finditer(body))
    if len(marks) >= 2 and [m.group(1) for m in marks] == [str(i + 1) for i in range(len(marks))]:
        parts: list[str] = []
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
            parts.append(body[m.end() : end].strip().rstrip(";").strip())
        # The last item runs to the end of the request; cut the request's own closing
        # (items use commas only, so a "; " or a sentence end closes the item).
        last = re.split(r"[.?!]\s", parts[-1] + " ", maxsplit=1)[0].split("; ")[0]
        parts[-1] = _SHOP_CLOSER.sub("", last.strip()).strip()
        return parts
    return [body.strip()]


def product_words(segment: str) -> str:
    """The words that name the product in one item's text: the request's opening and
    closing words, the leaf-category framing and every constraint clause taken away."""
    text = segment.strip()
    quoted = _QUOTED.search(text)
    if quoted:
        return quoted.group(1).strip()
    text = _SENTENCE_LEAD.split(text, maxsplit=1)[0]
    text = text.split(" — ", 1)[0]
    text = _POINTER.split(text, maxsplit=1)[0]
    text = re.sub(r";\s*find me one\b", "", text, flags=re.I)
    for _ in range(3):
        text = _OPENER.sub("", text.strip())
    text = _CLOSER.sub("", text).strip().rstrip(".?!").strip()
    parts = text.split(", ")
    parts[0] = re.sub(r"\s+for me$", "", parts[0], flags=re.I)
    kept = [parts[0]]
    for part in parts[1:]:
        if _CLAUSE_START.match(part) or read_price(part) or read_services(part):
            break
        kept.append(part)
    text = ", ".join(kept)
    text = _LEAF_SUFFIX.sub("", text)
    text = _LEAF_PREFIX.sub("", text)
    text = re.sub(r"^(?:the|a|an)\s+", "", text, flags=re.I)
    return text.strip(" .,;:?!") or segment.strip()


def _question(text: str) -> tuple[str | None, str]:
    """The question of a knowledge request and the rest of the text."""
    sentences = _SENTENCE_BREAK.split(text.strip())
    # Asides that are questions but not the question: "Can you work this out?"
    sentences = [s for s in sentences if not re.fullmatch(r"can you work this out\?", s, re.I)]
    for i, s in enumerate(sentences):
        if s.endswith("?"):
            first = i
            # "A brand was founded in 2001 in Cebu. Which one is it?": the question is both.
            if i > 0 and _BARE_QUESTION.fullmatch(s):
                first = i - 1
            q = " ".join(sentences[first : i + 1])
            q = re.sub(r"^(?:first,|quick question:)\s*", "", q, flags=re.I)
            rest = " ".join(sentences[:first] + sentences[i + 1 :])
            return q[:1].upper() + q[1:], rest
    return None, " ".join(sentences)


# The whole sentence that says it: "Before you choose: I have ... in mind."
_HELD_BACK = re.compile(
    r"(?:^|(?<=[.?!]\s))[^.?!]*?\bI (?:also )?have (.+?) in mind\b[^.?!]*[.?!]?", re.I
)
_HELD_PRICE = re.compile(r"^(?:a|an|my) (?:budget|price range|price)$", re.I)
_HELD_SERVICE = re.compile(r"^a service (?:I need|requirement)$", re.I)
_HELD_PAIR = re.compile(r"^an? (?:particular|specific|preferred) (.+)$", re.I)


def read_held_back(text: str) -> tuple[HeldBack | None, str]:
    """What the request says it has in mind but does not state ("I have a budget and a
    particular size in mind"), and the request without that sentence; (None, text) when it
    holds nothing back."""
    m = _HELD_BACK.search(text)
    if m is None:
        return None, text
    parts = re.split(r",\s*(?:and\s+)?|\s+and\s+", m.group(1).strip())
    price = service = False
    labels: list[str] = []
    for part in (p.strip() for p in parts if p.strip()):
        if _HELD_PRICE.match(part):
            price = True
        elif _HELD_SERVICE.match(part):
            service = True
        elif (pair := _HELD_PAIR.match(part)) is not None:
            labels.append(pair.group(1).strip().lower())
        else:
            return None, text
    held = HeldBack(price=price, service=service, labels=tuple(labels))
    if held.count == 0:
        return None, text
    return held, (text[: m.start()] + text[m.end() :]).strip()


def read_query(text: str, *, knowledge: bool = False) -> Reading:
    """Read a request: its items with their price bounds and services, whether they must come
    from one shop, the voucher, (for a knowledge request) the question to look up, and what
    a clarify request holds back."""
    held_back, text = read_held_back(text)
    body = text
    voucher = None
    head = _VOUCHER_HEAD.search(text)
    if head is not None:
        voucher = read_voucher(text[head.start() :])
        body = text[: head.start()]
    question = None
    if knowledge:
        question, body = _question(body)
    segments = _item_segments(body)
    if len(segments) == 1 and knowledge:
        # The question's words are no part of the item.
        segments = [body]
    items = [
        ItemNeed(
            text=seg, phrase=product_words(seg), price=read_price(seg),
            services=read_services(seg),
        )
        for seg in segments
    ]
    same_shop = bool(_SAME_SHOP.search(body)) and len(items) > 1
    return Reading(
        items=items, same_shop=same_shop, voucher=voucher, question=question,
        held_back=held_back,
    )  # fmt: skip


@lru_cache(maxsize=4096)
def pair_pattern(label: str) -> re.Pattern[str]:
    """The forms a request states `label`'s value in: "with {label} {value}", "{label}:
    {value}", "where the {label} is {value}", "with a {label} of {value}"..."""
    lab = re.escape(label)
    return re.compile(
        rf"(?:\bwith an?\s+{lab}\s+of\s+|\bwhere the\s+{lab}\s+is\s+"
        rf"|\b(?:with|in|having)\s+{lab}\s+(?!of\b|is\b)|\b{lab}\s*:\s*)",
        re.I,
    )


_VALUE_END = re.compile(r"\s*(?:$|[,;!?\n]|\.(?:\s|$)|—|\band\b|\s\()")


def requested_pairs(text: str, keys: set[str]) -> dict[str, str]:
    """Which value the request asks for, per key among `keys` whose label it states.

    The label is the key with ``_`` as spaces (``color_family`` → "color family"); the value
    is what follows up to the clause's end, lower-cased. A label inside a longer label stated
    at the same place ("color" in "color family") does not count. The pairs come in the
    order the request states them.
    """
    spans: list[tuple[int, int, str, str]] = []
    for key in sorted(keys):  # a set's order changes with the hash seed; the output must not
        label = key.replace("_", " ").strip()
        if not label:
            continue
        for m in pair_pattern(label).finditer(text):
            end = _VALUE_END.search(text, m.end())
            stop = end.start() if end else len(text)
            value = text[m.end() : stop].strip().strip("\"'").lower()
            if value:
                spans.append((m.start(), m.end(), key, value))
    spans.sort()  # the pairs in the order the request states them
    out: dict[str, str] = {}
    for start, end, key, value in spans:
        inside_longer = any(
            k2 != key and s2 <= start < e2 and e2 > end for s2, e2, k2, _ in spans
        )
        if not inside_longer and key not in out:
            out[key] = value
    return out


def states_value(text: str, key: str, value: str) -> bool:
    """Whether the request states exactly `value` for `key` (label, then the value, then a
    clause end), for values that themselves contain a comma or an "and"."""
    label = key.replace("_", " ")
    for m in pair_pattern(label).finditer(text):
        rest = text[m.end() :]
        if rest.lower().startswith(value.lower()):
            after = rest[len(value) :]
            if _VALUE_END.match(after):
                return True
    return False
