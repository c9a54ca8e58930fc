"""Episode keys derived from a validator's secret catalog seed, so a reveal makes them checkable.

An episode's key decides every token its agent sees (:class:`~shopbench.env.tokens.TokenBook`)
and its public id (:func:`~shopbench.env.episode.episode_id`, a one-way hash of the key). A
validator derives each key from the seed of the catalog generation it plays on, with the
episode's coordinates — the block of its round, the miner's uid, the task, and an attempt
number that tells apart two episodes with the same coordinates in one process:

    key = HMAC-SHA256(str(seed), "shopbench/episode/g<generation>/b<block>/u<uid>/<task>/<n>")

Nobody can compute a key before the seed is revealed (the seed is secret while its catalog
serves; the chain holds only its hash), and once it is revealed anyone can: ``shopbench
verify`` then finds the key whose id is the record's episode id, replays the episode with
the tokens that key mints, and so checks the episode id and the whole token map as well as
every observation. An archive whose keys were drawn at random still verifies, with its
tokens taken from the record (the report counts which were which).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from shopbench.env.episode import episode_id

KEY_PURPOSE = "shopbench/episode"
MAX_ATTEMPTS = 16
"""Attempts tried for one (generation, block, uid, task) before a key is drawn at random."""


def episode_key(
    seed: int, generation: int, block: int | None, miner_uid: int | None, task_id: str,
    attempt: int = 0,
) -> bytes:  # fmt: skip
    """The key of the `attempt`-th episode of `task_id` played by `miner_uid` at `block` on
    the catalog generation `generation` built from `seed`."""
    message = f"{KEY_PURPOSE}/g{generation}/b{block}/u{miner_uid}/{task_id}/{attempt}"
    return hmac.new(str(seed).encode(), message.encode(), hashlib.sha256).digest()


class EpisodeKeys:
    """The keys of one validator process on one catalog generation: each call gives the next
    unused key of an episode's coordinates (a second episode of the same miner, task and
    block gets attempt 1, and so on)."""

    def __init__(self, seed: int, generation: int) -> None:
        self.seed = seed
        self.generation = generation
        self._block: int | None = None
        self._used: set[bytes] = set()  # the keys given at self._block

    def next(self, block: int | None, miner_uid: int | None, task_id: str) -> bytes:
        """A fresh key for the episode (random past :data:`MAX_ATTEMPTS` repeats)."""
        if block != self._block:  # keys of another block can never repeat these
            self._block, self._used = block, set()
        for attempt in range(MAX_ATTEMPTS):
            key = episode_key(self.seed, self.generation, block, miner_uid, task_id, attempt)
            if key not in self._used:
                self._used.add(key)
                return key
        return secrets.token_bytes(32)


def find_key(
    seed: int, generation: int, block: int | None, miner_uid: int | None, task_id: str,
    wanted_id: str,
) -> bytes | None:  # fmt: skip
    """The derived key whose episode id is `wanted_id`, or None when no attempt gives it."""
    for attempt in range(MAX_ATTEMPTS):
        key = episode_key(seed, generation, block, miner_uid, task_id, attempt)
        if hmac.compare_digest(episode_id(key), wanted_id):
            return key
    return None
