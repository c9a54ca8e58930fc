"""What a verification checks beyond each episode on its own (light: the CLI reads it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_BANK_PER_INTENT = 10_000
"""Tasks per intent a verifier regenerates for one epoch (a validator's default is 32)."""


class VerifyConfig(BaseModel):
    """What a verification checks beyond each episode on its own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rounds: bool = Field(
        default=True,
        description="re-derive each miner's template and decision factors from its whole "
        "round (needs the whole archive: a filtered subset splits rounds)",
    )
    derived_keys: bool = Field(
        default=False,
        description="require every episode's key to be derived from the revealed seed (an id "
        "no derived key gives is an episode_id mismatch); otherwise such an episode's tokens "
        "come from its record",
    )
    max_per_episode: int = Field(
        default=20, ge=1, description="mismatches reported per episode before the rest are "
        "counted in one line",
    )  # fmt: skip
