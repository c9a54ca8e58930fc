"""Knowledge requests: look the answer up with web_search, then buy a product carrying it.

The request asks a question whose answer is a brand ("Which brand of backpacks is based in
Cebu City?") and then for an item "from that brand". The shopper searches the question,
reads the sentences of the results that share the most words with it, and takes the names
they state that the question does not (the answer); then it searches the item together with
that name and keeps a product whose title or description carries it.
"""

from __future__ import annotations

import re
from collections import Counter

from shopbench.agents.reference.observations import WebPage
from shopbench.agents.reference.prose import short_title
from shopbench.agents.reference.script import Step
from shopbench.agents.reference.session import Moves, Session, needs_sentence

MAX_ANSWERS = 3
_WORD = re.compile(r"[^\W_]+")
_NAME = re.compile(
    r"(?<![\w'])(?:[A-Z][\w'&.-]*)(?:\s+(?:(?:de|del|la|of|and|&)\s+)?[A-Z0-9][\w'&.-]*)*"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# Capitalised words that open sentences or name kinds of things, never an answer alone.
_NOT_NAMES = frozenset(
    {"the", "it", "its", "this", "that", "these", "since", "in", "a", "an", "brand", "brands",
     "which", "what", "where", "when", "who", "how", "made", "founded", "based", "our", "their",
     "each", "every", "many", "some", "today", "they", "products", "product", "line", "lines",
     "with", "for", "from", "and", "but", "also", "known", "popular", "most"}
)


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def answer_candidates(pages: list[WebPage], question: str) -> list[tuple[str, str]]:
    """Names the results state in answer to `question`, best first, each with the sentence
    that states it. A name counts when its sentence shares words with the question and the
    question does not already contain it."""
    asked = _words(question)
    scored: Counter[str] = Counter()
    where: dict[str, str] = {}
    for rank, page in enumerate(pages):
        for sentence in _SENTENCE.split(f"{page.title}. {page.content}"):
            overlap = len(_words(sentence) & asked)
            if overlap == 0:
                continue
            for m in _NAME.finditer(sentence):
                name = m.group(0).strip(" .,'")
                words = name.split()
                while words and words[0].casefold() in _NOT_NAMES:
                    words = words[1:]
                name = " ".join(words)
                if not name or _words(name) <= asked or len(name) < 3:
                    continue
                scored[name] += overlap * (1.0 / (1 + rank))
                where.setdefault(name, sentence.strip())
    ranked = sorted(scored, key=lambda n: (-scored[n], n))
    return [(n, where[n]) for n in ranked[:MAX_ANSWERS]]


def knowledge_moves(s: Session) -> Moves:
    """Answer the question, then find the item from that brand; return (picks, all_ok)."""
    item = s.reading.items[0]
    question = s.reading.question or s.ctx.query
    opening = s.w.paragraph([
        needs_sentence(s.w, s.reading, s),
        s.w.pick(
            f'First I need the answer to "{question}" — I\'ll look it up rather than guess.',
            f'The request depends on a fact: "{question}" Let me search the web for it.',
        ),
    ])
    results = yield from s.ask(
        Step(
            calls=[("web_search", {"q": question, "max_results": 5})],
            reasoning=s.w.turn([opening], "Looking up the question first."),
        )
    )
    pages = list(results[0].pages) if results else []
    answers = answer_candidates(pages, question)
    if not answers:
        s.note = "The web results don't name an answer, so I'll search the item by its words."
        found = yield from s.find(item, pages=3)
        return [found.best], found.pick is not None
    first, said = answers[0]
    s.note = s.w.pick(
        f'The results answer it: "{short_title(said, 160)}" So the brand is {first}.',
        f'According to the top results — "{short_title(said, 160)}" — the answer is {first}.',
    )
    best = None
    for name, _ in answers:
        if s.turns_left < 3:
            break
        wanted = f"{name} {item.phrase}"
        found = yield from s.find(
            item, q=wanted, wanted_title=wanted, must_mention=name, pages=2,
            intro=f"I'll look for the item from {name}.",
        )
        if found.pick is not None:
            return [found.pick], True
        best = best or found.best
        s.note += f" Nothing from {name} fits; let me try the next candidate answer."
    return [best], False
