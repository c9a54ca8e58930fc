"""Asking the shopper of a clarify request: which questions to ask, and what the answers add.

A clarify request names what it holds back ("I have a budget and a particular size in
mind", :class:`~shopbench.agents.reference.query_reading.HeldBack`); the answers come back
in the query's own forms, so the item's need is the request's with the answers' clauses
added: a price bound and services read as in a request, attribute values read later
against the viewed products' keys, as the request's own are. Three ways to ask:

- ``needed``: one question per held-back thing, nothing else (the careful shopper);
- ``never``: no question; the shopper's hints are ignored (the presumer);
- ``everything``: the price, the services, every held-back attribute and the attributes
  shoppers usually care about, until the shopper stops answering (the interrogator).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from shopbench.agents.reference.query_reading import (
    HeldBack,
    ItemNeed,
    read_price,
    read_services,
)
from shopbench.agents.reference.script import Step
from shopbench.agents.reference.session import Moves, Session
from shopbench.records.tools import Tool

Asking = Literal["needed", "never", "everything"]

COMMON_LABELS: tuple[str, ...] = ("color family", "size", "material", "variation")
"""What an interrogator asks about besides what the request says it holds back."""
PRICE_QUESTIONS: tuple[str, ...] = (
    "What price range do you have in mind?",
    "What is your budget for it?",
    "How much would you like to spend?",
)
SERVICE_QUESTIONS: tuple[str, ...] = (
    "Which service do you need: free shipping, cash on delivery, an official store or a "
    "flash sale?",
    "Is there a service you need, like free shipping, COD or an official store?",
)
PAIR_QUESTIONS: tuple[str, ...] = (
    "Which {label} would you like?",
    "What {label} do you want?",
    "Do you have a {label} in mind?",
)
_NOTHING = ("I don't mind",)


def questions(held: HeldBack, asking: Asking, s: Session) -> list[tuple[str, str]]:
    """(topic words, question) for each thing to ask about, in order."""
    if asking == "never":
        return []
    wanted: list[str] = []
    if held.price or asking == "everything":
        wanted.append("price")
    if held.service or asking == "everything":
        wanted.append("service")
    wanted += list(held.labels)
    if asking == "everything":
        wanted += [label for label in COMMON_LABELS if label not in wanted]
    out: list[tuple[str, str]] = []
    for topic in wanted:
        if topic == "price":
            out.append(("the price", s.w.pick(*PRICE_QUESTIONS)))
        elif topic == "service":
            out.append(("the services", s.w.pick(*SERVICE_QUESTIONS)))
        else:
            out.append((f"the {topic}", s.w.pick(*PAIR_QUESTIONS).format(label=topic)))
    return out


def with_answers(item: ItemNeed, answers: list[str]) -> ItemNeed:
    """The item's need with what the shopper said added: a stated price bound and services
    join the request's, and every clause joins its text for the attribute checks."""
    said = " ".join(a for a in answers if not a.startswith(_NOTHING))
    if not said:
        return item
    price = item.price or read_price(said)
    services = tuple(dict.fromkeys((*item.services, *read_services(said))))
    return replace(item, text=f"{item.text} {said}", price=price, services=services)


def ask_moves(s: Session, item: ItemNeed, held: HeldBack, asking: Asking) -> Moves:
    """Ask the shopper, one question a turn, until the list or the shopper's patience runs
    out; return the item's need with the answers added."""
    answers: list[str] = []
    for i, (topic, question) in enumerate(questions(held, asking, s)):
        if s.turns_left <= 0:
            break
        if i == 0:
            why = s.w.pick(
                f"The customer has {_count(held)} in mind without saying what. Rather than"
                " guess, I'll ask, starting with " + topic + ".",
                f"The request leaves {_count(held)} open, so I'll ask the customer before I"
                f" search; first {topic}.",
            )
        else:
            why = s.w.pick(
                f"Noted: {_short(answers[-1]) if answers else 'nothing yet'} Next, {topic}.",
                f"That settles one thing. Now {topic}.",
            )
        results = yield from s.ask(
            Step(calls=[(Tool.ASK_SHOPPER, {"question": question})],
                 reasoning=s.w.turn([why], f"Asking about {topic}."))
        )  # fmt: skip
        r = results[0]
        if not r.ok:
            break  # the shopper answers no more
        answers.append(r.text)
    return with_answers(item, answers)


def _count(held: HeldBack) -> str:
    n = held.count
    return "one thing" if n == 1 else f"{n} things"


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
