"""What a one-node development chain answers the same way in-process and when served.

:class:`FixedChainFacts` holds the ``Substrate`` methods whose answers follow from the head
alone (block hashes, headers, the new-heads stream) or are constants of the in-memory chain
(no fees, no weight, no MEV key, an unchanging runtime), for
:class:`~template.chain.memory.substrate.MemorySubstrate` and
:class:`~template.chain.memory.client.RemoteMemorySubstrate` alike.
"""

from __future__ import annotations

import asyncio
import hashlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any

from bittensor import Balance


def hash_of(block: int) -> str:
    """The (made-up, stable) hash of block `block`."""
    return "0x" + hashlib.sha256(f"memory-block:{block}".encode()).hexdigest()


class FixedChainFacts(ABC):
    """The head-derived and constant answers; subclasses provide :meth:`block_number`."""

    token_symbols: dict[int, str]
    block_time_s: float
    #: seconds between polls of the head in :meth:`blocks`, at most
    poll_s: float = 0.05

    @abstractmethod
    async def block_number(self) -> int:
        """The head's block number (each chain reads its own)."""

    def balance(self, rao: int, netuid: int = 0) -> Balance:
        return Balance(int(rao), netuid, self.token_symbols.get(netuid) if netuid else None)

    async def finalized_block_number(self) -> int:
        return await self.block_number()

    async def block_time(self) -> float:
        return self.block_time_s

    async def spec_version(self) -> int:
        return 0

    async def get_block(
        self, block_number: int | None = None, block_hash: str | None = None
    ) -> dict[str, Any] | None:
        number = block_number if block_number is not None else await self.block_number()
        return {"header": {"number": number, "hash": hash_of(number)}, "extrinsics": []}

    async def blocks(self, *, finalized: bool = False) -> AsyncIterator[dict[str, Any]]:
        """Each new head as it is produced (polled)."""
        seen = await self.block_number() - 1
        while True:
            head = await self.block_number()
            for number in range(seen + 1, head + 1):
                yield {"header": {"number": number, "hash": hash_of(number)}}
            seen = head
            await asyncio.sleep(min(self.block_time_s, self.poll_s))

    async def estimate_fee(self, call: Any, keypair: Any) -> Balance:
        return Balance.from_rao(0)

    async def estimate_weight(self, call: Any, keypair: Any) -> dict[str, int]:
        return {"ref_time": 0, "proof_size": 0}

    async def mev_next_key(self) -> bytes | None:
        return None

    async def find_extrinsic(self, extrinsic_hash: str, block_hash: str) -> Any:
        return None
