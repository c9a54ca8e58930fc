"""The template query writer: a task's constraints in a shopper's words, every one stated.

Phrasings live in ``data/phrasings.json`` (at least 20 per intent); the writer picks one
template, one wording per constraint, a random constraint order and a number style with the
task's own random generator, so the same seed writes the same query. Every price bound is
written with its number, every service by a recognisable name, every attribute and SKU value
verbatim after its key's label; ``docs/tasks.md`` ("How queries state constraints") lists
the forms so that a reader of a query can parse it back.
"""

from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.schema import Service
from shopbench.outcome.spec import PriceBound, Voucher
from shopbench.outcome.title import MARKETPLACE_NOISE, NOISE_PHRASES


class Phrasings(BaseModel):
    """The phrasing data file, checked when loaded."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    doc: str = Field(alias="_doc")
    version: int
    money: list[str] = Field(min_length=1)
    price: dict[str, list[str]]
    price_lead: list[str] = Field(min_length=1)
    service: dict[str, list[str]]
    pair: list[str] = Field(min_length=1)
    item: list[str] = Field(min_length=1)
    product: list[str] = Field(min_length=20)
    shop: list[str] = Field(min_length=20)
    voucher_one: list[str] = Field(min_length=1)
    voucher_many: list[str] = Field(min_length=1)
    voucher_rules: dict[str, str]
    knowledge: list[str] = Field(min_length=20)
    knowledge_pointer: dict[str, list[str]]
    knowledge_questions: dict[str, list[str]]
    constraint_style: list[str] = Field(min_length=1)
    sentence_lead: list[str] = Field(min_length=1)
    item_list: list[str] = Field(min_length=1)


@lru_cache(maxsize=1)
def load_phrasings() -> Phrasings:
    """The packaged phrasings (cached)."""
    text = resources.files("shopbench.tasks").joinpath("data/phrasings.json").read_text("utf-8")
    return Phrasings.model_validate(json.loads(text))


class SlotText(BaseModel):
    """What a query says about one item: its product phrase and its constraints."""

    model_config = ConfigDict(frozen=True)

    phrase: str = Field(description="the words that name the product (see product_phrase)")
    leaf: str = Field(default="", description="the leaf category, lower-cased")
    pairs: list[tuple[str, str]] = Field(
        default_factory=list, description="(key, value) of SKU options and attributes"
    )
    price: PriceBound | None = None
    services: list[Service] = Field(default_factory=list)


# Words that name a service: a product phrase must not contain them, or a reader would take
# them for a service constraint.
SERVICE_WORDS: tuple[str, ...] = (
    "free shipping", "free delivery", "cash on delivery", "official store", "official",
    "flash sale", "flashsale", "lazflash", "lazmall", "cod",
)  # fmt: skip
_SALES_WORDS = MARKETPLACE_NOISE - {
    "for",
    "with",
    "and",
    "the",
    "of",
    "a",
    "an",
    "to",
    "by",
    "from",
    "or",
}
_BRACKET = re.compile(r"[\[(【{]([^\])】}]*)[\])】}]")
_WORDS = re.compile(r"[^\W_]+")
_SPACES = re.compile(r"\s{2,}")


@lru_cache(maxsize=1)
def _drop_phrases() -> re.Pattern[str]:
    """Sales and service phrases a product phrase leaves out: the title matcher's noise, the
    service words, and the seller notes the catalog generator puts on titles."""
    from shopbench.catalog.taxonomy import load_taxonomy

    words = load_taxonomy().words
    notes = {n.strip("[]【】() ").lower() for n in (*words.title_prefixes, *words.title_suffixes)}
    phrases = {*NOISE_PHRASES, *SERVICE_WORDS, *(n for n in notes if n)}
    alternatives = "|".join(re.escape(p) for p in sorted(phrases, key=lambda p: (-len(p), p)))
    return re.compile(rf"(?<![\w])(?:{alternatives})(?![\w])", re.IGNORECASE)


def _is_noise(text: str) -> bool:
    words = [w.casefold() for w in _WORDS.findall(_drop_phrases().sub(" ", text))]
    return all(w in _SALES_WORDS for w in words)


def product_phrase(title: str, drop: str = "") -> str:
    """The title as a shopper names the product: seller notes and service words removed.

    Bracketed notes made only of sales words (``[Sealed]``, ``(Ready Stock)``), sales
    phrases and words (``Original``, ``Hot Sale``, ``Local Stock``) and service words
    (``Free Shipping``, ``COD``, ``LazMall``) go; everything else stays verbatim. `drop`
    (e.g. a knowledge task's answer) is removed too, case-insensitively. Never returns an
    empty string: a title made only of noise is returned as it is.
    """
    text = _BRACKET.sub(lambda m: " " if _is_noise(m.group(1)) else m.group(0), title)
    text = _drop_phrases().sub(" ", text)
    if drop.strip():
        text = re.sub(rf"(?<![\w]){re.escape(drop.strip())}(?![\w])", " ", text, flags=re.I)
    kept = [w for w in text.split() if w.casefold().strip(",.;:!-/") not in _SALES_WORDS]
    out = _SPACES.sub(" ", " ".join(kept)).strip(" ,;:-/|")
    return out or title.strip()


def format_number(n: int, rng: random.Random) -> str:
    """A whole number as shoppers write it: ``1200`` or ``1,200`` (below 1,000 plain)."""
    if n >= 1000 and rng.random() < 0.5:
        return f"{n:,}"
    return str(n)


def format_money(n: float, rng: random.Random, p: Phrasings | None = None) -> str:
    """An amount of pesos, e.g. ``500 pesos``, ``PHP 1,200``, ``₱75``, ``95 PHP``."""
    p = p or load_phrasings()
    return rng.choice(p.money).format(n=format_number(round(n), rng))


def price_clause(bound: PriceBound, rng: random.Random, p: Phrasings | None = None) -> str:
    """One price bound in words, with its number(s)."""
    p = p or load_phrasings()
    form = rng.choice(p.price[bound.mode])
    lead = rng.choice(p.price_lead)
    if bound.mode == "between":
        # One currency marking for the pair reads naturally: "between 75 and 95 pesos".
        money = rng.choice(p.money)
        lo = format_number(round(bound.lo or 0), rng)
        hi = format_number(round(bound.hi or 0), rng)
        if money.startswith("{n}"):
            text = form.format(lo=lo, hi=money.format(n=hi))
        else:
            text = form.format(lo=money.format(n=lo), hi=hi)
        return lead + text
    n = bound.hi if bound.mode == "less than" else bound.lo
    text = form.format(lo=format_money(n or 0, rng, p), hi=format_money(n or 0, rng, p))
    return lead + text


def attribute_label(key: str) -> str:
    """How a query names an attribute or SKU key: the key with ``_`` as spaces
    (``color_family`` → "color family"). Readers of queries rely on this exact rule."""
    return key.replace("_", " ").strip()


def pair_clause(key: str, value: str, rng: random.Random, p: Phrasings | None = None) -> str:
    """One attribute or SKU value: the key's label, then the value verbatim."""
    p = p or load_phrasings()
    label = attribute_label(key)
    form = rng.choice(p.pair)
    if label[:1].lower() in "aeiou":
        form = form.replace("a {label}", "an {label}")
    return form.format(label=label, value=value)


def service_clause(service: Service, rng: random.Random, p: Phrasings | None = None) -> str:
    """One required service by a recognisable name."""
    p = p or load_phrasings()
    return rng.choice(p.service[service])


def constraint_clauses(slot: SlotText, rng: random.Random, p: Phrasings) -> list[str]:
    """Every constraint of the slot as a clause, in random order."""
    clauses = [pair_clause(k, v, rng, p) for k, v in slot.pairs]
    if slot.price is not None:
        clauses.append(price_clause(slot.price, rng, p))
    clauses += [service_clause(s, rng, p) for s in slot.services]
    rng.shuffle(clauses)
    return clauses


def _join(clauses: list[str], rng: random.Random, *, commas_only: bool = False) -> str:
    if len(clauses) == 1:
        return clauses[0]
    sep = ", " if commas_only else rng.choice([", ", ", ", "; "])
    last = rng.choice([" and ", ", and " if sep == ", " else "; and ", sep])
    return sep.join(clauses[:-1]) + last + clauses[-1]


def item_text(slot: SlotText, rng: random.Random, p: Phrasings) -> str:
    """The product named in one of the item forms."""
    forms = p.item if slot.leaf else [f for f in p.item if "{leaf}" not in f]
    return rng.choice(forms).format(title=slot.phrase, leaf=slot.leaf)


def tail_and_after(slot: SlotText, rng: random.Random, p: Phrasings) -> tuple[str, str]:
    """The constraints as an inline tail (``, with ..., under ...``) or a following sentence.

    Returns (tail, after): one of them is empty.
    """
    clauses = constraint_clauses(slot, rng, p)
    if not clauses:
        return "", ""
    style = rng.choice(p.constraint_style)
    if style == "sentence":
        return "", f" {rng.choice(p.sentence_lead)} {_join(clauses, rng)}."
    if style == "dash":
        return " — " + ", ".join(clauses), ""
    return ", " + _join(clauses, rng), ""


def item_line(slot: SlotText, rng: random.Random, p: Phrasings) -> str:
    """One item of a list: the product and its constraints in one line."""
    clauses = constraint_clauses(slot, rng, p)
    text = item_text(slot, rng, p)
    # Commas only inside an item: "; " separates the items of an inline list.
    return f"{text}, {_join(clauses, rng, commas_only=True)}" if clauses else text


def item_list(slots: list[SlotText], rng: random.Random, p: Phrasings) -> tuple[str, str]:
    """The items as lines (numbered or dashed) and inline (``; ``-separated), in slot order."""
    lines = [item_line(s, rng, p) for s in slots]
    style = rng.choice(p.item_list)
    if style == "numbered":
        block = "\n".join(f"{i}. {x}" for i, x in enumerate(lines, 1))
    elif style == "paren":
        block = "\n".join(f"{i}) {x}" for i, x in enumerate(lines, 1))
    else:
        block = "\n".join(f"- {x}" for x in lines)
    inline = "; ".join(f"({i}) {x}" for i, x in enumerate(lines, 1))
    return block, inline


def _fill(template: str, **values: str) -> str:
    out = template
    for k, v in values.items():
        out = out.replace("{" + k + "}", v)
    return out


def _finish(text: str, after: str) -> str:
    return (text + after).strip()


def write_product(slot: SlotText, rng: random.Random, p: Phrasings | None = None) -> str:
    """A product-finder query for one item."""
    p = p or load_phrasings()
    tail, after = tail_and_after(slot, rng, p)
    return _finish(_fill(rng.choice(p.product), item=item_text(slot, rng, p), tail=tail), after)


def write_shop(slots: list[SlotText], rng: random.Random, p: Phrasings | None = None) -> str:
    """A multi-item query whose items must all come from one shop."""
    p = p or load_phrasings()
    block, inline = item_list(slots, rng, p)
    template = rng.choice(p.shop)
    return _fill(template, items=block, items_inline=inline, count=str(len(slots))).strip()


def voucher_rules(voucher: Voucher, p: Phrasings | None = None) -> str:
    """ShoppingBench's voucher block, unchanged in form (numbers in backticks)."""
    p = p or load_phrasings()
    r = p.voucher_rules
    lines = [
        r["head"].format(budget=_whole(voucher.budget)),
        r[voucher.voucher_type],
        r["threshold"].format(threshold=_whole(voucher.threshold)),
    ]
    if voucher.discount_type == "fixed":
        lines.append(r["fixed"].format(face_value=_whole(voucher.face_value or 0)))
    else:
        percent = _whole(round((voucher.discount or 0) * 100, 6))
        lines.append(r["percentage"].format(percent=percent, cap=_whole(voucher.cap or 0)))
    return "\n".join(lines)


def _whole(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def write_voucher(
    slots: list[SlotText], voucher: Voucher, rng: random.Random, p: Phrasings | None = None
) -> str:
    """A voucher query: the items, then the budget and the voucher's rules."""
    p = p or load_phrasings()
    if len(slots) == 1:
        tail, after = tail_and_after(slots[0], rng, p)
        body = _finish(
            _fill(rng.choice(p.voucher_one), item=item_text(slots[0], rng, p), tail=tail), after
        )
    else:
        block, inline = item_list(slots, rng, p)
        body = _fill(
            rng.choice(p.voucher_many), items=block, items_inline=inline, count=str(len(slots))
        ).strip()
    return f"{body}\n\n{voucher_rules(voucher, p)}"


def write_knowledge(
    phrase: str, question: str, kind: str, rng: random.Random, p: Phrasings | None = None
) -> str:
    """A knowledge query: a question the knowledge corpus answers, and an item to buy that
    carries the answer (`kind` names what the answer is: ``brand`` or ``material``). The
    item's phrase leaves the answer out; the query points at it ("from that brand")."""
    p = p or load_phrasings()
    q = question.strip()
    text = _fill(
        rng.choice(p.knowledge),
        question=q,
        question_lower=q[:1].lower() + q[1:],
        item=rng.choice([f for f in p.item if "{leaf}" not in f]).format(title=phrase),
        pointer=rng.choice(p.knowledge_pointer[kind]),
    )
    return text.strip()


def knowledge_question(
    kind: str, rng: random.Random, p: Phrasings | None = None, **facts: str
) -> str:
    """The question of a knowledge task of `kind`, filled with its facts."""
    p = p or load_phrasings()
    return rng.choice(p.knowledge_questions[kind]).format(**facts)
