"""Reasoning text for the reference policies: varied wording, concrete facts.

The reasoning of a reference agent should read like a model thinking aloud and should cite
what it saw — titles, prices, attribute values — because judges and curation filters are
measured on exactly that. :class:`Writer` picks among equivalent wordings with the episode's
random generator (so a seed fixes the text) and formats the facts consistently.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from shopbench.agents.reference.query_reading import SERVICE_NAMES, ItemNeed, PriceNeed

MAX_TITLE_CHARS = 70


def money(x: float) -> str:
    """An amount in pesos as shoppers read it: ₱1,234 or ₱1,234.50."""
    return f"₱{x:,.0f}" if float(x).is_integer() else f"₱{x:,.2f}"


def short_title(title: str, limit: int = MAX_TITLE_CHARS) -> str:
    """A title cut at a word boundary to about `limit` characters."""
    if len(title) <= limit:
        return title
    cut = title[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(" ,-/") + "…"


def price_words(need: PriceNeed) -> str:
    """A price bound in words: "under ₱500", "at least ₱75", "between ₱75 and ₱95"."""
    if need.lo is not None and need.hi is not None:
        return f"between {money(need.lo)} and {money(need.hi)}"
    if need.hi is not None:
        return f"at most {money(need.hi)}"
    return f"at least {money(need.lo or 0)}"


def listing(parts: Sequence[str], conj: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if not parts:
        return ""
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + f" {conj} " + parts[-1]


def pair_words(pairs: dict[str, str]) -> list[str]:
    """Requested attribute values in words: ``color family "black"``."""
    return [f'{k.replace("_", " ")} "{v}"' for k, v in pairs.items()]


def need_words(item: ItemNeed, pairs: dict[str, str] | None = None) -> list[str]:
    """Every constraint of an item in words, pairs first, then price, then services."""
    out = pair_words(pairs or {})
    if item.price is not None:
        out.append(price_words(item.price))
    out += [SERVICE_NAMES.get(s, s) for s in item.services]
    return out


class Writer:
    """Chooses wordings with a seeded random generator; `terse` keeps one sentence a turn."""

    def __init__(self, rng: random.Random, *, terse: bool = False) -> None:
        self.rng = rng
        self.terse = terse

    def pick(self, *options: str) -> str:
        """One of the equivalent wordings."""
        return options[self.rng.randrange(len(options))]

    def maybe(self, text: str, p: float = 0.5) -> str:
        """`text` with probability `p`, else nothing."""
        return text if self.rng.random() < p else ""

    def paragraph(self, sentences: Iterable[str]) -> str:
        """Sentences joined into a paragraph, empty ones dropped."""
        return " ".join(s.strip() for s in sentences if s and s.strip())

    def turn(self, full: Iterable[str], short: str) -> str:
        """The turn's reasoning: the full paragraph, or the one short sentence when terse."""
        return short if self.terse else self.paragraph(full)

    def opener(self) -> str:
        """How a model starts thinking about a request."""
        return self.pick(
            "Okay, let me work out what the customer needs.",
            "Let me start by reading the request carefully.",
            "Alright, first I need to pin down the requirements.",
            "So, the customer is asking for something specific here.",
            "Let me break this request down before searching.",
            "Hmm, let me see what exactly is being asked.",
        )
