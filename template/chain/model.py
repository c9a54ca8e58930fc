"""What a chain client returns beside the metagraph (:mod:`template.metagraph`): commitments
and weight receipts (pydantic)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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
