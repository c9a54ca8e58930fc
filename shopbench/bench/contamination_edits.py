"""Light edits of a query, the ways a leaked test query is disguised, deterministic by seed.

Each edit takes the query and a ``random.Random`` and returns the edited text, or None when
it does not apply (a query with no number cannot have its number format changed, one
without a Latin letter that has a Cyrillic twin cannot take one). ``changed_word``,
``three_changed_words`` and ``padded`` draw their words from a vocabulary, the distinct words of the
test queries, so the new word is as likely to be a rare one (weighing the most) as a common
one.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

Edit = Callable[[str, random.Random, Sequence[str]], str | None]

_WORD = re.compile(r"[A-Za-z]{2,}")
_PUNCT = re.compile(r"[^\w\s]")
_CLAUSE = re.compile(r"\s*[,;.!?\n]+\s*")
_NUMBER = re.compile(r"(?<![\w.,])\d+(?![\w]|[.,]\d)")
_INVISIBLE = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")
# Latin letters and their Cyrillic look-alikes (what a disguise substitutes).
_CYRILLIC = {
    "a": "а", "c": "с", "e": "е", "o": "о", "p": "р", "x": "х", "y": "у", "i": "і",
    "j": "ј", "s": "ѕ", "A": "А", "B": "В", "C": "С", "E": "Е", "H": "Н", "K": "К",
    "M": "М", "O": "О", "P": "Р", "T": "Т", "X": "Х",
}  # fmt: skip


def identity(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """The query unchanged."""
    return q


def case(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """Each word in upper, lower or title case at random."""
    styles = (str.upper, str.lower, str.title)
    return re.sub(r"\S+", lambda m: rng.choice(styles)(m.group(0)), q)


def punctuation(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """Every mark deleted or swapped for another, and marks added after some words."""
    marks = (",", ";", "!", "?", ".", " -", "...", ":")

    def swap(m: re.Match[str]) -> str:
        return "" if rng.random() < 0.5 else rng.choice(marks)

    out = _PUNCT.sub(swap, q)
    return re.sub(r"(\w)(\s)", lambda m: m.group(1) + (
        rng.choice(marks) if rng.random() < 0.15 else ""
    ) + m.group(2), out)  # fmt: skip


def _replace_words(q: str, rng: random.Random, vocab: Sequence[str], n: int) -> str | None:
    spots = list(_WORD.finditer(q))
    if len(spots) < n:
        return None
    chosen = sorted(rng.sample(range(len(spots)), n), reverse=True)
    out = q
    for k in chosen:
        m = spots[k]
        new = rng.choice(vocab)
        while new.lower() == m.group(0).lower():
            new = rng.choice(vocab)
        out = out[: m.start()] + new + out[m.end() :]
    return out


def changed_word(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """One word replaced by another word of the vocabulary."""
    return _replace_words(q, rng, vocab, 1)


def three_changed_words(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """Three words replaced by other words of the vocabulary."""
    return _replace_words(q, rng, vocab, 3)


def clauses_reversed(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """The clauses (split at , ; . ! ? and line breaks) in reverse order; a one-clause query
    has its two halves swapped."""
    parts = [p for p in _CLAUSE.split(q) if p]
    if len(parts) >= 2:
        return ", ".join(reversed(parts))
    ws = q.split()
    if len(ws) < 2:
        return None
    half = len(ws) // 2
    return " ".join(ws[half:] + ws[:half])


def shuffled_windows(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """The words shuffled within consecutive windows of three."""
    ws = q.split()
    if len(ws) < 2:
        return None
    out: list[str] = []
    for i in range(0, len(ws), 3):
        window = ws[i : i + 3]
        rng.shuffle(window)
        out += window
    return " ".join(out)


def zero_width(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """Invisible characters (zero-width space and joiners, word joiner, BOM, soft hyphen)
    inside half of the words."""

    def hide(m: re.Match[str]) -> str:
        w = m.group(0)
        if rng.random() < 0.5:
            return w
        at = rng.randrange(1, len(w))
        return w[:at] + rng.choice(_INVISIBLE) + w[at:]

    return _WORD.sub(hide, q)


def cyrillic(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """Half of the Latin letters that have a Cyrillic look-alike replaced by it."""
    if not any(ch in _CYRILLIC for ch in q):
        return None
    return "".join(_CYRILLIC[ch] if ch in _CYRILLIC and rng.random() < 0.5 else ch for ch in q)


def _reformat(m: re.Match[str], rng: random.Random) -> str:
    n = int(m.group(0))
    forms = [f"{n}.00", f"₱{n}", f"{n:,}.00"]
    if n >= 1000:
        forms += [f"{n:,}", f"{n:,}".replace(",", " ")]
    return rng.choice(forms)


def number_format(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """Every number written another way: 1,000 / 1 000 / 1000.00 / ₱1000."""
    if not _NUMBER.search(q):
        return None
    return _NUMBER.sub(lambda m: _reformat(m, rng), q)


def padded(q: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """The query with a sentence of eight words of the vocabulary appended."""
    return f"{q} Also: {' '.join(rng.choice(vocab) for _ in range(8))}."


EDITS: dict[str, Edit] = {
    "none": identity,
    "case": case,
    "punctuation": punctuation,
    "one_changed_word": changed_word,
    "three_changed_words": three_changed_words,
    "clauses_reversed": clauses_reversed,
    "shuffled_window_3": shuffled_windows,
    "zero_width": zero_width,
    "cyrillic": cyrillic,
    "number_format": number_format,
    "padded_8_words": padded,
}
"""Every kind of edit the bench measures, by name."""
