"""What a chain client returns: a metagraph view, commitments, weight receipts (pydantic)."""

from __future__ import annotations

from typing import Literal

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


class Commitment(BaseModel):
    """A hotkey's plaintext commitment on the subnet (e.g. a catalog seed hash)."""

    model_config = ConfigDict(frozen=True)

    hotkey: str
    uid: int | None = Field(default=None, description="None once the hotkey deregistered")
    block: int = Field(ge=0, description="block the commitment was published at")
    data: str = ""


class WeightsReceipt(BaseModel):
    """What a weight submission did: set directly, or committed for a later reveal."""

    model_config = ConfigDict(frozen=True)

    mode: Literal["direct", "commit_reveal"]
    block: int | None = Field(default=None, description="block that included the extrinsic")
    reveal_round: int | None = Field(default=None, description="drand round of a commit")
