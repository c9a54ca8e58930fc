"""The shopper's words: how a deterministic shopper says what it wants, or that it does not
mind, or that it will not name the product.

Every answer is built from fixed sentences and the task's own constraint clauses, in the
forms queries use (:mod:`shopbench.tasks.queries`, docs/tasks.md: a price bound with its
number, a service by a recognisable name, an attribute's label then its value verbatim), so
a reader of queries reads answers too. Nothing of the question is ever repeated, so nothing
an agent sends can come back in the shopper's voice.
"""

from __future__ import annotations

import random

from shopbench.catalog.schema import Service
from shopbench.outcome.spec import PriceBound
from shopbench.tasks.queries import attribute_label, pair_clause, price_clause

STATE: tuple[str, ...] = (
    "I'd like it {c}.",
    "Good question: {c}, please.",
    "To be exact: {c}.",
    "It should be {c}.",
    "I'm after one {c}.",
)
"""A held-back constraint, stated. Never a "yes": a question may carry a false premise ("is
your budget under 40 pesos?"), and the answer states the constraint instead of agreeing."""
RESTATE: tuple[str, ...] = ("As I said, {c}.", "Like I wrote: {c}.", "Just as in my request: {c}.")
"""A constraint the request already stated, stated again."""
SERVICE_NAMES: dict[str, tuple[str, ...]] = {
    "official": ("from an official store", "sold by a LazMall official store"),
    "freeShipping": ("with free shipping", "with free delivery"),
    "COD": ("with cash on delivery", "with COD"),
    "flashsale": ("on flash sale", "in a flash sale"),
}
"""Services by the names queries use (docs/tasks.md), in the forms that follow "it"."""
NO_MIND: tuple[str, ...] = (
    "I don't mind.",
    "I don't mind, really.",
    "I don't mind either way.",
    "I don't mind; that's up to you.",
)
NO_MIND_TOPIC: tuple[str, ...] = (
    "I don't mind about the {what}.",
    "I don't mind which {what}.",
    "I don't mind, any {what} is fine.",
)
REFUSE: tuple[str, ...] = (
    "I can't name a product, an id or a title; finding it is your job. Ask me what I want "
    "instead.",
    "I don't know which listing it is, and I won't name one: that's what I'm asking you to "
    "find. Ask me about what I want.",
    "Sorry, I can't tell you a product, an id or a title. I can tell you what I need, though.",
)
ONE_AT_A_TIME: tuple[str, ...] = (
    " One thing at a time, please: ask me about the rest separately.",
    " Ask me the other things one at a time.",
)
OPEN_WHAT: dict[str, str] = {"price": "price", "service": "service", "shop": "shop"}


def _join(clauses: list[str]) -> str:
    return clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]


def price_words(bound: PriceBound, rng: random.Random) -> str:
    """A price bound as a clause with its number(s)."""
    return price_clause(bound, rng)


def service_words(services: list[Service], rng: random.Random) -> str:
    """Services as one clause."""
    return _join([rng.choice(SERVICE_NAMES[s]) for s in services])


def pair_words(key: str, value: str, rng: random.Random) -> str:
    """An attribute or SKU value as a clause: its label, then the value verbatim."""
    return pair_clause(key, value, rng)


def state(clause: str, rng: random.Random, *, stated: bool = False) -> str:
    """A sentence stating `clause` (again, with `stated`)."""
    return rng.choice(RESTATE if stated else STATE).format(c=clause)


def no_mind(rng: random.Random, what: str | None = None) -> str:
    """"I don't mind", about `what` (a topic's words) or about nothing in particular."""
    if what is None:
        return rng.choice(NO_MIND)
    return rng.choice(NO_MIND_TOPIC).format(what=what)


def open_words(topic: str) -> str:
    """The words for an open topic: "price", "service", "shop" or an attribute's label."""
    if topic.startswith("pair:"):
        return attribute_label(topic[len("pair:") :])
    return OPEN_WHAT.get(topic, topic)


def refuse(rng: random.Random) -> str:
    """The answer to a question asking for the product itself."""
    return rng.choice(REFUSE)


def one_at_a_time(rng: random.Random) -> str:
    """What follows the answer to a question about several topics."""
    return rng.choice(ONE_AT_A_TIME)
