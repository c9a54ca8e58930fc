"""Title matchers: does a recommended product's title match the title a task asks for?

ShoppingBench embeds both titles with Qwen3-Embedding-0.6B and counts a match at cosine
similarity >= 0.5 (>= 0.8 for knowledge tasks). :class:`EmbeddingTitleMatcher` does the same
when the user has that model locally. :class:`LexicalTitleMatcher` is the default: it needs no
model and is deterministic, and it is tuned for the way marketplace listings of one base
product differ (sales noise, pack counts, brackets, case).
"""

from __future__ import annotations

import math
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from shopbench.outcome.errors import EmbeddingModelMissing

# Phrases and words sellers add to a listing's title that say nothing about what the product
# is. Listings of the same base product from different shops differ by these, so they are
# dropped before comparing. Phrases go first, so that "Ready Stock" loses "stock" but a
# "Stock Pot" keeps it; single words are listed only when they are noise wherever they appear.
NOISE_PHRASES: tuple[str, ...] = (
    "hot sale", "hot selling", "ready stock", "in stock", "on hand", "brand new",
    "free shipping", "free gift", "fast delivery", "fast shipping", "same day delivery",
    "cash on delivery", "best seller", "best selling", "high quality", "top quality",
    "official store", "limited stock", "new arrival", "new arrivals", "buy 1 take 1",
)  # fmt: skip
MARKETPLACE_NOISE: frozenset[str] = frozenset(
    {
        # sales noise
        "original", "orig", "authentic", "genuine", "legit", "cod", "sealed", "new",
        "brandnew", "onhand", "preorder", "sale", "promo", "sulit", "cheap", "bestseller",
        "trending", "viral",
        # function words
        "for", "with", "and", "the", "of", "a", "an", "to", "by", "from", "or",
    }
)  # fmt: skip

# A pack count: "2pcs", "3pc", "10pieces", "x2", "2x", "6pack".
_PACK_COUNT = re.compile(
    r"^(?:\d+(?:pcs|pc|pieces|piece|packs|pack|pk|sets|set|pairs|pair|x)|x\d+)$"
)
_PACK_UNITS = frozenset(
    {"pcs", "pc", "piece", "pieces", "pack", "packs", "pk", "set", "sets", "pair", "pairs"}
)
_TOKEN = re.compile(r"[^\W_]+")
_NOISE_PHRASE = re.compile(
    r"(?<!\S)(?:" + "|".join(re.escape(p) for p in NOISE_PHRASES) + r")(?!\S)"
)


class TitleMatch(BaseModel):
    """One title comparison: the similarity, the threshold it was held to, and the verdict."""

    model_config = ConfigDict(frozen=True)

    score: float
    threshold: float
    hit: bool


class TitleMatcher(ABC):
    """Scores how well a candidate title matches a target title, in [0, 1] (1 = same).

    Subclasses implement :meth:`similarity`; :meth:`match` holds the score to `threshold`,
    or to `knowledge_threshold` on knowledge tasks (ShoppingBench is stricter there).
    """

    name: str = "title-matcher"
    threshold: float = 0.5
    knowledge_threshold: float = 0.8

    @abstractmethod
    def similarity(self, candidate: str, target: str) -> float:
        """Similarity of two titles; 1.0 for identical titles."""

    def match(self, candidate: str, target: str, *, knowledge: bool = False) -> TitleMatch:
        """Compare `candidate` with `target`; a hit when the similarity reaches the threshold."""
        t = self.knowledge_threshold if knowledge else self.threshold
        s = float(self.similarity(candidate, target))
        return TitleMatch(score=s, threshold=t, hit=s >= t)


@lru_cache(maxsize=65536)
def title_tokens(title: str) -> frozenset[str]:
    """The content words of a title: folded, noise and pack counts dropped, plurals singular
    (cached: a round grades the same titles many times).

    "Original Pure Leather Belts for Men [Sealed] 2pcs COD" -> {"pure", "leather", "belt",
    "men"}. Accents are stripped and case folded; letters of any script count. A title made
    only of noise keeps its noise words, so it still compares to itself.
    """
    decomposed = unicodedata.normalize("NFKD", title.casefold())
    folded = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    raw = _TOKEN.findall(folded)
    raw = _NOISE_PHRASE.sub(" ", " ".join(raw)).split() or raw
    kept: list[str] = []
    for i, tok in enumerate(raw):
        if tok in MARKETPLACE_NOISE or _PACK_COUNT.match(tok):
            continue
        # "2 pcs": the number and the unit together are a pack count.
        if tok.isdigit() and i + 1 < len(raw) and raw[i + 1] in _PACK_UNITS:
            continue
        if tok in _PACK_UNITS and i > 0 and raw[i - 1].isdigit():
            continue
        kept.append(_singular(tok))
    if not kept:
        kept = [_singular(t) for t in raw]
    return frozenset(kept)


def _singular(tok: str) -> str:
    # Crude on purpose: both titles go through the same rule, so "shoes"/"shoe" meet.
    if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss"):
        return tok[:-1]
    return tok


class LexicalTitleMatcher(TitleMatcher):
    """The default matcher: Dice overlap of content words, no model needed.

    Rule: both titles go through :func:`title_tokens` (case folded, accents stripped, split
    on anything not a letter or digit; :data:`NOISE_PHRASES` such as "ready stock",
    :data:`MARKETPLACE_NOISE` words and pack counts such as "2pcs" or "3 pcs" dropped; a
    trailing plural "s" removed); the similarity is the Dice coefficient
    2|A ∩ B| / (|A| + |B|) of the two word sets. A hit needs 0.6 (0.8 on knowledge tasks).

    So the exact title scores 1, a listing of the same base product that only adds sales
    noise scores 1, one extra descriptive word on a four-word title still scores 0.89, while
    a different kind of product that shares a material or a brand with the target (3 of 7
    words) scores about 0.43 and is rejected.
    """

    name = "lexical-dice"

    def __init__(self, threshold: float = 0.6, knowledge_threshold: float = 0.8) -> None:
        self.threshold = threshold
        self.knowledge_threshold = knowledge_threshold

    def similarity(self, candidate: str, target: str) -> float:
        """Dice coefficient of the two titles' content-word sets."""
        a, b = title_tokens(candidate), title_tokens(target)
        if not a or not b:
            # Titles without a letter or digit: only the same text matches.
            return 1.0 if candidate.strip() == target.strip() else 0.0
        return 2 * len(a & b) / (len(a) + len(b))


Encode = Callable[[list[str]], Sequence[Sequence[float]]]


class EmbeddingTitleMatcher(TitleMatcher):
    """ShoppingBench's matcher: cosine similarity of sentence embeddings.

    `encode` maps a list of texts to one vector each; tests inject a function, real use
    builds it with :meth:`from_pretrained`. Embeddings are cached per title, since the same
    target title is compared with many candidates.
    """

    name = "embedding-cosine"

    def __init__(
        self,
        encode: Encode,
        *,
        threshold: float = 0.5,
        knowledge_threshold: float = 0.8,
        name: str | None = None,
    ) -> None:
        self._encode = encode
        self.threshold = threshold
        self.knowledge_threshold = knowledge_threshold
        if name:
            self.name = name
        self._cache: dict[str, list[float]] = {}

    @classmethod
    def from_pretrained(
        cls, model: str = "Qwen/Qwen3-Embedding-0.6B", *, device: str | None = None
    ) -> EmbeddingTitleMatcher:
        """Load a sentence-transformers model that is already on disk (never downloads).

        Raises EmbeddingModelMissing naming the extra to install or the model to fetch.
        """
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbeddingModelMissing(
                "the embedding title matcher needs sentence-transformers: "
                "pip install 'shopbench[embed]'"
            ) from None
        try:
            st = SentenceTransformer(model, device=device, local_files_only=True)
        except (OSError, ValueError) as e:  # not cached, or not a valid local path / repo id
            raise EmbeddingModelMissing(
                f"embedding model {model!r} is not available locally ({e}); "
                "download it first or pass a local path"
            ) from None

        def encode(texts: list[str]) -> Sequence[Sequence[float]]:
            return [list(map(float, v)) for v in st.encode(texts)]

        return cls(encode, name=f"embedding-cosine:{model}")

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for text, vec in zip(missing, self._encode(missing), strict=True):
                self._cache[text] = [float(x) for x in vec]
        return [self._cache[t] for t in texts]

    def similarity(self, candidate: str, target: str) -> float:
        """Cosine similarity of the two titles' embeddings (0 when either vector is zero)."""
        u, v = self._vectors([candidate, target])
        nu = math.sqrt(sum(x * x for x in u))
        nv = math.sqrt(sum(x * x for x in v))
        if nu == 0 or nv == 0:
            return 0.0
        return sum(x * y for x, y in zip(u, v, strict=True)) / (nu * nv)
