"""A seeded rewording of reasoning, as a language model's text varies from one episode to the
next: each phrase drawn from its synonyms, clauses shuffled.

A template writes its variable phrases as ``{one|another|a third}``; :meth:`Rewording.say`
picks one alternative per slot with the episode's random generator, so a seed fixes the
text and two episodes rarely share a run of three words. :meth:`Rewording.shuffled` puts
independent clauses in a random order. Used by the reference policies whose wording must
not repeat across episodes (so that only what they do, not how they phrase it, can tell
them apart).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

_SLOT = re.compile(r"\{([^{}]*)\}")
_I = re.compile(r"(?<![\w'])i(?=['\s,])")  # the pronoun, written lower-case in templates


class Rewording:
    """Fills ``{a|b|c}`` slots and orders clauses with a seeded random generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def say(self, template: str) -> str:
        """`template` with one alternative chosen for each ``{...|...}`` slot, and spaces
        tidied where an empty alternative was chosen."""
        text = _SLOT.sub(lambda m: self.rng.choice(m.group(1).split("|")), template)
        text = _I.sub("I", text)
        return re.sub(r"\s+([,.;:!?])", r"\1", re.sub(r" {2,}", " ", text)).strip()

    def one(self, templates: Sequence[str]) -> str:
        """One of several templates, filled."""
        return self.say(self.rng.choice(list(templates)))

    def shuffled(self, clauses: Sequence[str]) -> list[str]:
        """The clauses in a random order (a copy)."""
        out = list(clauses)
        self.rng.shuffle(out)
        return out

    def paragraph(self, sentences: Sequence[str]) -> str:
        """Sentences joined, each starting with a capital letter, empty ones dropped."""
        parts = [s.strip() for s in sentences if s and s.strip()]
        return " ".join(p[:1].upper() + p[1:] for p in parts)
