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

from shopbench.agents.reference.checks import KNOWLEDGE_TITLE_OK
from shopbench.agents.reference.prose import listing, short_title
from shopbench.agents.reference.script import Step
from shopbench.agents.reference.session import Moves, Session, needs_sentence
from shopbench.env.results import WebResult
from shopbench.records.tools import Tool

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
     "with", "for", "from", "and", "but", "also", "known", "popular", "most", "shoppers",
     "shopping", "reviewers", "sellers", "buyers", "look", "compare", "keep", "check", "like",
     "official", "buying", "guide", "here", "there", "reviews", "available", "sold"}
)
# Words before a name that make it a place, not a brand: "based in X", "a brand from X".
_PLACE_LEAD = re.compile(r"(?:\b(?:in|from|of|at|near|to|around)(?:\s+the)?|[A-Za-z],)\s+$")
_LISTED = re.compile(r"\binclud(?:e|es|ing)\b[^.]*$")
_YEAR = re.compile(r"\b(?:1[89]|20)\d\d\b")
MAX_LOOKUPS = 4  # candidate names looked up one by one when the first results don't settle it
# Words before a name that make it the one a sentence is about: "by X", "The X ...".
_SUBJECT_LEAD = re.compile(r"(?:^|\bby|\bwith|\bthe|\bThe)\s*$")


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


_MATERIAL_QUESTION = re.compile(r"\bmaterial\b|\bmade (?:of|with|from)\b", re.I)
_MATERIAL = re.compile(
    r"\b(?:made (?:with|of|from)|built (?:around|with)|crafted (?:from|with)|uses)\s+"
    r"(?:an?\s+|the\s+)?([^,.;:()]+?)(?=\s+(?:and|for|that|which|to|as|in)\b|[,.;:()]|$)",
    re.I,
)


_QUESTION_WORDS = frozenset(
    {"which", "what", "who", "where", "when", "how", "is", "the", "a", "an", "of", "and",
     "was", "does", "do", "did", "has", "have", "its", "it", "one", "name", "in", "from",
     "since", "been", "around", "dates", "back", "to", "home", "use", "uses", "notable",
     "built", "made", "with", "line", "brand", "material", "that", "this"}
)


def search_words(question: str) -> str:
    """What to type into web_search for the question: its names and numbers, and what is
    asked (a brand's home and founding, or a line's material)."""
    keep = [w for w in _WORD.findall(question) if w.casefold() not in _QUESTION_WORDS]
    asked = "line made with material" if asks_material(question) else "brand based in founded"
    return " ".join([*keep, asked])


def asks_material(question: str) -> bool:
    """Whether the question asks what something is made of (else it asks for a brand)."""
    return bool(_MATERIAL_QUESTION.search(question))


def answer_candidates(
    pages: list[WebResult], question: str, limit: int = MAX_ANSWERS
) -> list[tuple[str, str]]:
    """What the results state in answer to `question`, best first, each with the sentence
    that states it: a material ("made with X") for a material question, else a name."""
    if asks_material(question):
        return _materials(pages, question)[:limit]
    return _names(pages, question)[:limit]


def _given(question: str) -> set[str]:
    """The names and numbers a question gives (its capitalised words after the first)."""
    words = _WORD.findall(question)
    return {w for w in words[1:] if w[:1].isupper() or w.isdigit()} - {"I"}


def confirms(pages: list[WebResult], name: str, question: str) -> str | None:
    """The sentence showing that `name` has the year the question gives, else None, where
    the page about `name` (its title) also states every name the question gives (the
    city), or one sentence states the name, the year and those names together."""
    years = set(_YEAR.findall(question))
    if not years:
        return None
    given = _given(question)
    for page in pages:
        text = f"{page.title}. {page.content}"
        about = page.title.casefold() == name.casefold() and given <= set(_WORD.findall(text))
        for sentence in _SENTENCE.split(text):
            said = set(_WORD.findall(sentence))
            if years <= said and (about or (name in sentence and given <= said)):
                return sentence.strip()
    return None


def _materials(pages: list[WebResult], question: str) -> list[tuple[str, str]]:
    """Materials stated on the pages about what the question names: sentences that say
    "made with X" on pages sharing the most words with the question, earlier pages first."""
    asked = _words(question)
    scored: Counter[str] = Counter()
    where: dict[str, str] = {}
    for rank, page in enumerate(pages):
        page_overlap = len(_words(f"{page.title} {page.content}") & asked)
        for sentence in _SENTENCE.split(f"{page.title}. {page.content}"):
            for m in _MATERIAL.finditer(sentence):
                material = m.group(1).strip()
                if not material or len(material) > 60 or _words(material) <= asked:
                    continue
                overlap = len(_words(sentence) & asked)
                scored[material] += (page_overlap + 2 * overlap) / (1 + rank)
                where.setdefault(material, sentence.strip())
    ranked = sorted(scored, key=lambda n: (-scored[n], n))
    return [(n, where[n]) for n in ranked]


def _names(pages: list[WebResult], question: str) -> list[tuple[str, str]]:
    """Names the results state in answer to `question`.

    A name counts when its sentence shares words with the question, the question does not
    already contain it, and it is not a place (after "in", "from", ...; the area after a
    city's comma). The subject of a sentence ("X is ...", "by X") weighs double, and a page
    about the name itself (its title) adds what the whole page shares with the question;
    words the question already has are cut from a name's end.
    """
    asked = _words(question)
    scored: Counter[str] = Counter()
    where: dict[str, str] = {}
    for rank, page in enumerate(pages):
        page_overlap = len(_words(f"{page.title} {page.content}") & asked)
        for sentence in _SENTENCE.split(f"{page.title}. {page.content}"):
            overlap = len(_words(sentence) & asked)
            if overlap == 0:
                continue
            for m in _NAME.finditer(sentence):
                before = sentence[: m.start()]
                if _PLACE_LEAD.search(before):
                    continue
                words = m.group(0).strip(" .,'").split()
                while words and words[0].casefold() in _NOT_NAMES:
                    words = words[1:]
                while words and words[-1].casefold() in asked:
                    words = words[:-1]
                name = " ".join(words)
                if len(name) < 3 or _words(name) <= asked:
                    continue
                about = page_overlap if name.casefold() == page.title.casefold() else 0
                if _LISTED.search(before):  # "Brands based here include A, B and C"
                    weight = 3.0
                elif " " not in name and not before.strip() and not about:
                    weight = 0.3  # one capitalised word opening a sentence: often not a name
                elif _SUBJECT_LEAD.search(before):
                    weight = 2.0
                else:
                    weight = 1.0
                scored[name] += (weight * overlap + about) / (1 + rank)
                where.setdefault(name, sentence.strip())
    ranked = sorted(scored, key=lambda n: (-scored[n], n))
    return [(n, where[n]) for n in ranked]


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
            calls=[(Tool.WEB_SEARCH, {"q": search_words(question), "max_results": 5})],
            reasoning=s.w.turn([opening], "Looking up the question first."),
        )
    )
    pages = list(results[0].pages) if results else []
    answers = answer_candidates(pages, question)
    if _YEAR.search(question) and not asks_material(question):
        answers = yield from _settle_by_year(s, pages, question)
    if not answers:
        s.note = "The web results don't name an answer, so I'll search the item by its words."
        found = yield from s.find(item, pages=3)
        return [found.best], found.pick is not None
    first, said = answers[0]
    what = "material" if asks_material(question) else "brand"
    s.note = (s.note + " " if s.note else "") + s.w.pick(
        f'The results answer it: "{short_title(said, 160)}" So the {what} is {first}.',
        f'According to the results — "{short_title(said, 160)}" — the answer is {first}.',
    )
    best = None
    for name, _ in answers:
        if s.turns_left < 3:
            break
        # The listing may name the answer or not: either naming of the item counts.
        wanted = f"{name} {item.phrase}"
        found = yield from s.find(
            item, q=wanted, wanted_title=(item.phrase, wanted), must_mention=name, pages=2,
            title_min=KNOWLEDGE_TITLE_OK,
            intro=f'I\'ll look for the item together with "{name}".',
        )
        if found.pick is not None:
            return [found.pick], True
        best = best or found.best
        s.note += f" Nothing from {name} fits; let me try the next candidate answer."
    return [best], False


def _settle_by_year(s: Session, pages: list[WebResult], question: str) -> Moves:
    """Answers whose founding year is confirmed, looking candidates up one by one when the
    first results only list them (a city's page names its brands, not their years)."""
    candidates = answer_candidates(pages, question, limit=MAX_LOOKUPS + 2)
    sure = [(n, said) for n, _ in candidates if (said := confirms(pages, n, question))]
    if sure:
        return sure
    names = [n for n, _ in candidates][:MAX_LOOKUPS]
    if not names:
        return []
    year = listing(_YEAR.findall(question))
    why = s.w.pick(
        f"The results list brands ({listing(names)}) but not which was founded in {year}. "
        "I'll look each one up.",
        f"Several brands come up — {listing(names)} — so let me check each one's founding "
        f"year against {year}.",
    )
    results = yield from s.ask(
        Step(
            calls=[(Tool.WEB_SEARCH, {"q": f"{n} brand founded", "max_results": 3})
                   for n in names],
            reasoning=s.w.turn([why], f"Checking {len(names)} candidate brands."),
        )
    )
    settled: list[tuple[str, str]] = []
    for name, r in zip(names, results, strict=True):
        said = confirms(list(r.pages), name, question)
        if said:
            settled.append((name, said))
    if not settled:
        s.note = f"None of {listing(names)} shows the year {year}; I'll go with the likeliest."
        return candidates[:MAX_ANSWERS]
    return settled
