"""``ChainClient`` on the in-memory chain: the arena's subnet, running the SDK's own intents.

Every neuron of an arena holds its own :class:`LocalChain` (its wallet) over one shared
:class:`MemorySubstrate` (or, for neurons run as separate processes, over a
``RemoteMemorySubstrate`` of a served one), so weights set here go through the SDK's
``SetWeights`` exactly as on chain — clipped to the subnet's max weight and quantised to
u16 — and are read back from chain storage. With commit-reveal on, the SDK's timelocked
commit is stored sealed; since the in-memory chain cannot open it, this client deposits
the same plaintext (the SDK's own clipping and quantisation of the input) for the chain
to reveal at the epoch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bittensor.intents.weights import clip_to_max_weight, normalize

from template.chain.bittensor_chain import BittensorChain
from template.chain.client import ChainConfig
from template.chain.memory.client import RemoteMemorySubstrate
from template.chain.memory.state import U16_MAX
from template.chain.memory.substrate import MemorySubstrate
from template.chain.model import WeightsReceipt
from template.errors import ChainClientError


class LocalChain(BittensorChain):
    """A neuron's chain client on an in-memory chain shared by the whole arena."""

    def __init__(
        self,
        substrate: MemorySubstrate | RemoteMemorySubstrate,
        wallet: Any,
        netuid: int,
        *,
        retries: int = 0,
        retry_backoff_s: float = 0.0,
    ) -> None:
        config = ChainConfig(
            network="local", netuid=netuid, retries=retries, retry_backoff_s=retry_backoff_s
        )
        super().__init__(wallet, config, substrate=substrate)
        self.substrate = substrate

    def advance(self, blocks: int = 1) -> int:
        """Produce `blocks` blocks on the shared in-process chain; returns the new head."""
        if not isinstance(self.substrate, MemorySubstrate):
            raise TypeError("a served chain produces its own blocks")
        return self.substrate.advance(blocks)

    async def set_weights(
        self, weights: Mapping[int, float], *, version_key: int = 0
    ) -> WeightsReceipt:
        """As :meth:`BittensorChain.set_weights`; with commit-reveal on, also deposits the
        plaintext the chain reveals at the commit's epoch."""
        escrowed = await self._run("deposit the weights to reveal", lambda: self._escrow(weights))
        try:
            return await super().set_weights(weights, version_key=version_key)
        except ChainClientError:
            if escrowed:
                await self._run(
                    "withdraw the weights to reveal",
                    lambda: self.substrate.withdraw_reveal(self.netuid, self.hotkey),
                )
            raise

    async def _escrow(self, weights: Mapping[int, float]) -> bool:
        """With commit-reveal on, deposit the SDK's conformed u16 weights; False when off or
        when there is nothing to reveal."""
        params = await self.substrate.subnet_params(self.netuid)
        if not params.commit_reveal:
            return False
        max_weights_limit = params.max_weights_limit
        pairs = sorted((int(u), float(w)) for u, w in weights.items())
        uids, values = [u for u, _ in pairs], [w for _, w in pairs]
        if sum(values) <= 0 or any(w < 0 for w in values):
            return False  # the SDK refuses these before any commit is made
        own = await self.substrate.subnet_uid(self.netuid, self.hotkey)
        if max_weights_limit < U16_MAX and uids != [own]:
            values = clip_to_max_weight(values, max_weights_limit / U16_MAX)
        norm_uids, norm_values = normalize(uids, values)
        await self.substrate.deposit_reveal(self.netuid, self.hotkey, norm_uids, norm_values)
        return True
