"""The template penalty: one miner reusing the same reasoning for different tasks.

A miner that pastes one narration into every episode writes trajectories worth nothing as
training data, however well each one scores alone. Per miner and round, each episode's
reasoning (its assistant turns' reasoning and content) is reduced to a set of word
shingles with the product-specific tokens masked — ids, prices and other numbers become
placeholders, so quoting different products does not make a template look original — and
summarised by a MinHash signature. An episode's template similarity is its highest
estimated Jaccard similarity to an episode of a *different* task by the same miner; the
miner's similarity for the round is the median over its episodes. A similarity at or
below ``low`` costs nothing; at or above ``high`` the miner's process scores are multiplied
by ``min_factor``; in between the factor falls linearly. Honest agents, whose wording
follows what each task shows them, keep full credit.

Everything here is deterministic: the MinHash permutations come from a fixed seed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.judging.record import read_record, turn_text
from shopbench.judging.rubric.grounding import fold
from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict

TEMPLATE_VERSION = "1"

_TOKEN = re.compile(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]+")
_MERSENNE = np.uint64((1 << 61) - 1)


class TemplateConfig(BaseModel):
    """How reasoning is compared across episodes and what similarity costs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    shingle: int = Field(default=3, ge=1, le=8, description="words per shingle")
    permutations: int = Field(default=128, ge=16, le=1024, description="MinHash size")
    low: float = Field(default=0.5, ge=0, le=1, description="similarity that costs nothing")
    high: float = Field(default=0.8, ge=0, le=1, description="similarity that costs the most")
    min_factor: float = Field(default=0.5, ge=0, le=1, description="factor at or above high")
    seed: int = Field(default=15, description="seed of the MinHash permutations")

    @model_validator(mode="after")
    def _ordered(self) -> TemplateConfig:
        if self.high <= self.low:
            raise ValueError(f"high ({self.high}) must be above low ({self.low})")
        return self

    def factor(self, similarity: float) -> float:
        """The multiplier for a miner whose round similarity is `similarity`."""
        if similarity <= self.low:
            return 1.0
        if similarity >= self.high:
            return self.min_factor
        span = (similarity - self.low) / (self.high - self.low)
        return 1.0 - span * (1.0 - self.min_factor)


class TemplateReport(BaseModel):
    """One miner's template similarity in one round, and the factor it earns."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    miner: str
    episodes: int
    compared: int = Field(description="episodes that had another task's episode to compare")
    similarity: float = Field(description="median over episodes of the best match")
    factor: float
    per_episode: list[float] = Field(description="each episode's best match, in input order")


def masked_tokens(text: str) -> list[str]:
    """The words of `text`, lower-cased, with every number (ids, prices, sizes) as ``#``."""
    return ["#" if t[0].isdigit() else t for t in _TOKEN.findall(fold(text))]


def shingles(tokens: Sequence[str], k: int) -> set[str]:
    """The distinct runs of `k` consecutive tokens (the whole text if shorter)."""
    if len(tokens) < k:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + k]) for i in range(len(tokens) - k + 1)}


def reasoning_of(trajectory: Trajectory | Mapping[str, Any]) -> str:
    """Everything the agent wrote in an episode: each assistant turn's reasoning and content."""
    record = read_record(trajectory)
    return "\n".join(turn_text(m)[0] for m in record.messages if m.role == "assistant")


class MinHasher:
    """MinHash signatures of shingle sets, with fixed permutations."""

    def __init__(self, permutations: int = 128, seed: int = 15) -> None:
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, int(_MERSENNE), size=permutations, dtype=np.uint64)
        self.b = rng.integers(0, int(_MERSENNE), size=permutations, dtype=np.uint64)

    def signature(self, items: Iterable[str]) -> np.ndarray:
        """The signature of a set of strings; an empty set gets an all-max signature."""
        hashes = np.fromiter(
            (
                int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "big")
                & int(_MERSENNE)
                for s in items
            ),
            dtype=np.uint64,
        )
        if hashes.size == 0:
            return np.full(self.a.shape, np.iinfo(np.uint64).max, dtype=np.uint64)
        # (a*h + b) mod p with 64-bit wrap-around before the mod: a universal-enough family
        # for similarity estimates, and exactly reproducible everywhere numpy runs.
        with np.errstate(over="ignore"):
            mixed = (hashes[:, None] * self.a[None, :] + self.b[None, :]) % _MERSENNE
        least: np.ndarray = mixed.min(axis=0)
        return least


def similarity_matrix(signatures: np.ndarray) -> np.ndarray:
    """Estimated Jaccard similarity between every pair of signatures (rows)."""
    n = signatures.shape[0]
    out = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        out[i] = (signatures == signatures[i]).mean(axis=1)
    return out


def miner_template(
    miner: str,
    episodes: Sequence[tuple[str, str]],
    config: TemplateConfig | None = None,
    hasher: MinHasher | None = None,
) -> TemplateReport:
    """The template report of one miner's round from its ``(task_id, reasoning)`` pairs.

    Episodes with no other task's episode to compare against count as similarity 0; a
    miner with no comparable pair pays nothing.
    """
    cfg = config or TemplateConfig()
    h = hasher or MinHasher(cfg.permutations, cfg.seed)
    n = len(episodes)
    if n == 0:
        return TemplateReport(miner=miner, episodes=0, compared=0, similarity=0.0, factor=1.0,
                              per_episode=[])
    sigs = np.stack([h.signature(shingles(masked_tokens(text), cfg.shingle))
                     for _, text in episodes])
    empty = np.array([not text.strip() for _, text in episodes])
    sims = similarity_matrix(sigs)
    tasks = np.array([t for t, _ in episodes], dtype=object)
    other = tasks[:, None] != tasks[None, :]
    # Two silent episodes are not a template of each other: that is judged elsewhere.
    other &= ~(empty[:, None] & empty[None, :])
    sims = np.where(other, sims, 0.0)
    best = sims.max(axis=1)
    compared = int(other.any(axis=1).sum())
    similarity = float(np.median(best[other.any(axis=1)])) if compared else 0.0
    return TemplateReport(
        miner=miner,
        episodes=n,
        compared=compared,
        similarity=round(similarity, 6),
        factor=round(cfg.factor(similarity), 6),
        per_episode=[round(float(x), 6) for x in best],
    )


def template_reports(
    trajectories: Sequence[Trajectory | Mapping[str, Any]],
    config: TemplateConfig | None = None,
) -> dict[str, TemplateReport]:
    """Per miner (hotkey, else uid, else agent name), the template report of one round."""
    cfg = config or TemplateConfig()
    hasher = MinHasher(cfg.permutations, cfg.seed)
    by_miner: dict[str, list[tuple[str, str]]] = {}
    for t in trajectories:
        record = read_record(t)
        text = "\n".join(turn_text(m)[0] for m in record.messages if m.role == "assistant")
        by_miner.setdefault(record.miner, []).append((record.task_id, text))
    return {m: miner_template(m, eps, cfg, hasher) for m, eps in sorted(by_miner.items())}


def penalise(verdict: Verdict, factor: float) -> Verdict:
    """`verdict` with its score multiplied by `factor` (and by any decision factor already
    applied; the unpenalised score kept)."""
    if not 0.0 <= factor <= 1.0:
        raise ValueError(f"a template factor is in [0, 1], got {factor}")
    base = verdict.unpenalised_score if verdict.unpenalised_score is not None else verdict.score
    return verdict.model_copy(
        update={
            "score": round(base * factor * verdict.decision_factor, 6),
            "template_factor": factor,
            "unpenalised_score": base,
        }
    )
