"""The chain as the neurons need it: one small protocol, two implementations.

:class:`ChainClient` is what the validator and miner loops call. ``BittensorChain`` talks
to a subtensor node through the bittensor 11 SDK; ``LocalChain`` runs the same SDK code
against an in-memory chain for the arena and tests. Every method raises only the
:class:`~template.errors.ChainClientError` family.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from template.chain.model import Commitment, WeightsReceipt
from template.metagraph import MetagraphView


class ChainConfig(BaseModel):
    """Where the chain is and how hard to try reaching it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    network: str = Field(
        default="finney", description="network name (finney, test, local) or a ws(s):// URL"
    )
    netuid: int = Field(ge=0, description="the subnet's netuid")
    retries: int = Field(
        default=2, ge=0, description="retries of a call that could not reach the chain"
    )
    retry_backoff_s: float = Field(
        default=1.0, ge=0, description="first wait before a retry; doubles each time"
    )
    wait_for_finalization: bool = Field(
        default=False, description="writes wait for finality, not only inclusion"
    )


@runtime_checkable
class ChainClient(Protocol):
    """A neuron's view of its subnet, signing writes with its own hotkey."""

    netuid: int
    hotkey: str

    async def current_block(self) -> int:
        """The chain head's block number."""
        ...

    async def metagraph(self) -> MetagraphView:
        """The subnet now: uids, hotkeys, stakes, validator permits, axon addresses."""
        ...

    async def set_weights(
        self, weights: Mapping[int, float], *, version_key: int = 0
    ) -> WeightsReceipt:
        """Set (or, with commit-reveal on, commit) relative weights per uid.

        Clipping to the subnet's max weight, u16 quantisation and the choice of path are
        the SDK's, so the weights land exactly as the chain would store them.
        """
        ...

    async def serve(self, ip: str, port: int) -> None:
        """Publish this hotkey's endpoint ``ip:port`` on the subnet."""
        ...

    async def commit(self, data: str) -> None:
        """Publish `data` (at most 128 UTF-8 bytes) as this hotkey's commitment."""
        ...

    async def read_commitments(self) -> dict[str, Commitment]:
        """Every hotkey's current commitment on the subnet, by hotkey."""
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...
