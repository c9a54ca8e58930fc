"""Clarify tasks: a product task whose query states only part of its constraints.

The target and its constraints are drawn exactly as for a product task
(:func:`~shopbench.tasks.gen_product.derive_slot`, ShoppingBench's probabilities); then each
topic of the slot — the price bound, the services, each attribute or SKU key — is held back
with probability ½ (at least one), onto the task's hidden card
(:mod:`shopbench.tasks.hidden`). The query states the rest in the product task's forms and
ends with a sentence naming what it holds back, without the values:

    ... Oh, and I have a budget, a particular color family and a service I need in mind.

A draft is kept only if guessing would go wrong: in the top 50 of a search for the item's
words under the stated filters, at least two listings fit the stated part, the first of them
misses the held-back part, and at most half of them meet it. So an agent that takes the
obvious listing instead of asking misses a hidden constraint.
"""

from __future__ import annotations

import random
import re

from shopbench.catalog.search.filters import WINDOW
from shopbench.outcome.grader import grade_slot
from shopbench.outcome.spec import Slot
from shopbench.tasks.draft import Draft, DraftResult, Rejection, Sampler
from shopbench.tasks.gen_product import PRODUCT_ODDS, derive_slot, slot_text
from shopbench.tasks.hidden import PAIR, PRICE, SERVICE, HiddenCard, slot_topics, visible_slot
from shopbench.tasks.queries import SlotText, attribute_label, write_product

HIDE_ODDS = 0.5
"""The probability each topic of the slot is held back."""
MAX_FITTING_SHARE = 0.5
"""At most this share of the listings fitting the stated part may fit the hidden part."""
MIN_FITTING = 2
"""At least this many listings must fit the stated part (else there is nothing to ask)."""
CARD_DRAWS = 3
"""Cards drawn for one target and slot before the draft is given up."""

HINT_FRAMES: tuple[str, ...] = (
    "Oh, and I have {topics} in mind.",
    "I also have {topics} in mind, so ask me if you need to.",
    "Note that I have {topics} in mind; just ask.",
    "Before you choose: I have {topics} in mind.",
    "I have {topics} in mind too, but I haven't said them yet.",
)
"""The sentence that names the held-back topics; every frame says "I (also) have ... in
mind" (docs/tasks.md)."""
PRICE_WORDS: tuple[str, ...] = ("a budget", "a price range")
SERVICE_WORDS: tuple[str, ...] = ("a service I need", "a service requirement")
PAIR_WORDS: tuple[str, ...] = ("a particular {label}", "a specific {label}", "a preferred {label}")

# A label the hint can name unambiguously: its topics are joined with ", " and " and ".
_SAYABLE = re.compile(r"^[a-z0-9][a-z0-9 ()/.'-]*$")


def sayable(key: str) -> bool:
    """Whether the key's label can be named in the hint sentence (no comma, no "and")."""
    label = attribute_label(key).lower()
    return bool(_SAYABLE.match(label)) and " and " not in f" {label} "


def topic_words(topic: str, rng: random.Random) -> str:
    """The hint's words for one held-back topic (no value)."""
    if topic == PRICE:
        return rng.choice(PRICE_WORDS)
    if topic == SERVICE:
        return rng.choice(SERVICE_WORDS)
    return rng.choice(PAIR_WORDS).format(label=attribute_label(topic[len(PAIR) :]))


def hint_sentence(card: HiddenCard, rng: random.Random) -> str:
    """The sentence naming the card's topics, e.g. "Oh, and I have a budget and a particular
    size in mind."."""
    words = [topic_words(t, rng) for t in card.topics()]
    listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return rng.choice(HINT_FRAMES).format(topics=listed)


def holdable(slot: Slot) -> list[str]:
    """The slot's topics a query can hold back (a key whose label the hint can name)."""
    return [t for t in slot_topics(slot) if not t.startswith(PAIR) or sayable(t[len(PAIR) :])]


def draw_card(topics: list[str], rng: random.Random) -> HiddenCard:
    """The `topics` held back, each with :data:`HIDE_ODDS` (at least one)."""
    hidden = [t for t in topics if rng.random() < HIDE_ODDS] or [rng.choice(topics)]
    return HiddenCard(
        price=PRICE in hidden,
        service=SERVICE in hidden,
        pairs=[t[len(PAIR) :] for t in hidden if t.startswith(PAIR)],
    )


def hidden_matters(s: Sampler, visible: Slot, full: Slot, phrase: str) -> str | None:
    """Why the held-back part would not matter to an agent that guesses (see the module
    docstring); None when it does."""
    hits = s.slot_hits(visible, phrase)[:WINDOW]
    products = [p for p in s.index.get([h.product_id for h in hits]) if p is not None]
    fitting = [p for p in products if grade_slot(visible, p).rule_score >= 1.0]
    if len(fitting) < MIN_FITTING:
        return "clarify: too few listings fit the stated part to need asking"
    meets = [grade_slot(full, p).rule_score >= 1.0 for p in fitting]
    if meets[0]:
        return "clarify: the first listing that fits the stated part meets the hidden part"
    if sum(meets) > MAX_FITTING_SHARE * len(fitting):
        return "clarify: the hidden part rules out too few of the listings that fit"
    return None


def hidden_problems(query: str, slot: Slot, card: HiddenCard) -> list[str]:
    """What is wrong with how a clarify query holds back its card: a held-back value it
    states anyway, or a held-back topic its hint sentence does not name."""
    problems: list[str] = []
    text = query.lower()
    hint = re.search(r"\bi (?:also )?have (.+?) in mind\b", text)
    named = hint.group(1) if hint else ""
    if card.price and not any(w.lower() in named for w in PRICE_WORDS):
        problems.append("the hint does not name the held-back price")
    if card.service and not any(w.lower() in named for w in SERVICE_WORDS):
        problems.append("the hint does not name the held-back services")
    pairs = {k: v for o in slot.sku_options or [] for k, v in o.items()}
    pairs |= {k: vs[0] for a in slot.attributes or [] for k, vs in a.items() if vs}
    for key in card.pairs:
        label = attribute_label(key).lower()
        if not any(w.format(label=label).lower() in named for w in PAIR_WORDS):
            problems.append(f"the hint does not name the held-back {label!r}")
        value = pairs.get(key, "").lower()
        stated = text if hint is None else text[: hint.start()] + text[hint.end() :]
        form = rf"{re.escape(label)}\W+(?:\w+\W+)?{re.escape(value)}(?!\w)"
        if value and re.search(form, stated):
            problems.append(f"the query states the held-back {label!r}")
    return problems


def draft_clarify(s: Sampler, rng: random.Random) -> DraftResult:
    """One clarify task draft: a product task's target and constraints, part held back."""
    target = s.random_product(rng)
    if target is None:
        return Rejection(reason="no eligible product")
    slot, _ = derive_slot(target, rng, PRODUCT_ODDS)
    topics = holdable(slot)
    if not topics:
        return Rejection(reason="clarify: the slot has nothing to hold back")
    text = slot_text(slot, target, rng, s)
    why: str | None = None
    for _ in range(CARD_DRAWS):
        card = draw_card(topics, rng)
        why = hidden_matters(s, visible_slot(slot, card), slot, text.phrase)
        if why is None:
            break
    else:
        return Rejection(reason=why or "clarify: no card made the hidden part matter")
    shown = SlotText(
        phrase=text.phrase,
        leaf=text.leaf,
        pairs=[(k, v) for k, v in text.pairs if k not in set(card.pairs)],
        price=None if card.price else text.price,
        services=[] if card.service else text.services,
    )
    query = f"{write_product(shown, rng)} {hint_sentence(card, rng)}"
    return Draft(
        intent="clarify", query=query, slots=[slot], targets=[target], phrases=[text.phrase],
        hidden=card,
    )  # fmt: skip
