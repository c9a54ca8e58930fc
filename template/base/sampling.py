"""Which miners a validator's round plays: every uid serving an address but the
validator's own, or a secret sample of them, keyed by the round (the same on a replay)."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Sequence

from template.metagraph import MetagraphView
from template.transport import MinerEndpoint

log = logging.getLogger("template.validator")


def serving(metagraph: MetagraphView, own_hotkey: str) -> list[MinerEndpoint]:
    """The endpoints of every uid that publishes an address, except `own_hotkey`, by uid."""
    out: list[MinerEndpoint] = []
    for n in metagraph.neurons:
        if n.hotkey == own_hotkey or not n.axon:
            continue
        try:
            endpoint = MinerEndpoint.from_axon(n.uid, n.hotkey, n.axon)
        except ValueError:
            log.info("uid %d publishes an unusable address %r", n.uid, n.axon)
            continue
        if endpoint.url.endswith(":0") or "//0.0.0.0:" in endpoint.url:
            continue  # the chain's "not serving" placeholder
        out.append(endpoint)
    return out


def sample(
    endpoints: Sequence[MinerEndpoint], k: int, secret: int, round_index: int
) -> list[MinerEndpoint]:
    """`k` of `endpoints` chosen by a keyed hash of the round (all when k is 0 or ≥ their
    count); unpredictable without the secret, the same on a replay."""
    if k <= 0 or k >= len(endpoints):
        return list(endpoints)

    def rank(e: MinerEndpoint) -> bytes:
        msg = f"shopbench/sample/{round_index}/{e.hotkey}".encode()
        return hmac.new(str(secret).encode(), msg, hashlib.sha256).digest()

    return sorted(sorted(endpoints, key=rank)[:k], key=lambda e: e.uid)
