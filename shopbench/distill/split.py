"""The train/validation split of SFT rows, by cluster, and the repetition of weighted rows.

Every row of one cluster (near-duplicate tasks) lands in the same split, so validation loss
measures tasks the model has not seen paraphrased in training. The decision is a keyed hash
of the cluster id: deterministic by seed, streamable, and the same cluster lands on the same
side in every build with that seed.
"""

from __future__ import annotations

import hashlib
import math


def unit_hash(seed: int, *parts: str) -> float:
    """A number in [0, 1) fixed by `seed` and `parts` (sha256, so uniform and stable)."""
    text = "\x1f".join([str(seed), *parts]).encode("utf-8")
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") / 2**64


def split_of(cluster: str, *, seed: int, validation_fraction: float) -> str:
    """``validation`` for a `validation_fraction` share of clusters, else ``train``."""
    if unit_hash(seed, "split", cluster) < validation_fraction:
        return "validation"
    return "train"


def copies_of(weight: float, *, seed: int, episode_id: str) -> int:
    """How many times an episode of curation weight `weight` appears in training:
    ``floor(weight)``, plus one more with probability ``weight - floor(weight)`` (decided by a
    keyed hash of the episode id). The expected count is the weight; 0 leaves it out."""
    whole = math.floor(weight)
    extra = 1 if unit_hash(seed, "weight", episode_id) < weight - whole else 0
    return whole + extra
