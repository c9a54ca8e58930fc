"""What a verification reports: the episodes checked, those verified, every mismatch."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Mismatch(BaseModel):
    """One field of one episode that did not come out as the archive records it."""

    model_config = ConfigDict(frozen=True)

    episode_id: str
    field: str = Field(description="the record's field, e.g. tool_log[3].result_digest")
    expected: str = Field(description="what the archived record holds (cut short)")
    got: str = Field(description="what the replay produced (cut short)")


class VerifyReport(BaseModel):
    """The result of verifying an archive against a catalog."""

    model_config = ConfigDict(frozen=True)

    archive: str = Field(description="the archive folder read")
    catalog: str = Field(description="the catalog replayed against")
    catalog_seed_hash: str | None = Field(
        description="sha256 of the seed that catalog was built from (None: an imported one)"
    )
    episodes: int = Field(description="episodes checked")
    verified: int = Field(description="episodes whose every checked field reproduced")
    mismatched: int = Field(description="episodes with at least one mismatch")
    mismatches: list[Mismatch] = Field(default_factory=list)
    left_out: list[str] = Field(
        default_factory=list, description="shards the verified reader would not read, and why"
    )
    signatures_checked: bool = Field(
        description="each record's signature was checked against the named validator"
    )
    keys_derived: int = Field(
        default=0,
        description="episodes replayed under their own key, derived from the revealed seed "
        "(the rest took their tokens from the record)",
    )
    rounds_checked: int = Field(
        description="(miner, round) groups whose cross-episode factors were re-derived"
    )
    seconds: float = Field(description="wall time of the replay and the re-grading")

    @property
    def ok(self) -> bool:
        """True when every episode verified and no shard was left out."""
        return not self.mismatches and not self.left_out
