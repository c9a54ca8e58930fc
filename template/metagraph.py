"""The subnet at one block as the plumbing reads it: :class:`MetagraphView` of
:class:`NeuronView` (pydantic).

A floor below the chain and the transport: a chain client returns it
(:mod:`template.chain`), the miner's caller gate reads it (:mod:`template.transport`), and
neither imports the other.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class NeuronView(BaseModel):
    """One uid of the subnet as the plumbing needs it."""

    model_config = ConfigDict(frozen=True)

    uid: int = Field(ge=0)
    hotkey: str
    coldkey: str = ""
    stake: float = Field(default=0.0, ge=0, description="total stake, in the subnet's alpha")
    validator_permit: bool = False
    axon: str | None = Field(default=None, description="the served 'ip:port', None if none")
    registered_at: int | None = Field(
        default=None, description="the block the uid's hotkey registered at (None: unknown)"
    )


class MetagraphView(BaseModel):
    """The subnet at one block: uids, hotkeys, stakes, validator permits, axon addresses."""

    model_config = ConfigDict(frozen=True)

    netuid: int = Field(ge=0)
    block: int = Field(ge=0)
    neurons: list[NeuronView] = Field(default_factory=list, description="ordered by uid")

    @property
    def uids(self) -> list[int]:
        return [n.uid for n in self.neurons]

    @property
    def hotkeys(self) -> list[str]:
        return [n.hotkey for n in self.neurons]

    @property
    def stakes(self) -> list[float]:
        return [n.stake for n in self.neurons]

    @property
    def validator_permits(self) -> list[bool]:
        return [n.validator_permit for n in self.neurons]

    @property
    def axons(self) -> list[str | None]:
        return [n.axon for n in self.neurons]

    def by_hotkey(self, hotkey: str) -> NeuronView | None:
        """The neuron registered under `hotkey`, or None."""
        for neuron in self.neurons:
            if neuron.hotkey == hotkey:
                return neuron
        return None
