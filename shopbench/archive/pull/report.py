"""What a pull did: the report a person and ``traces pull`` read, and the signed head it
checked against, with its age in words."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pydantic import BaseModel, Field


def age_words(seconds: float) -> str:
    """`seconds` (at least 0) as a person reads an age: ``45 s``, ``12 min``, ``3 h 12 min``,
    ``2 d 5 h``."""
    whole = int(max(0.0, seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def utc_text(unix: float) -> str:
    """`unix` seconds as an ISO 8601 UTC time to the second (``2026-11-30T08:15:02Z``)."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class HeadSummary(BaseModel):
    """The signed head a pull checked against."""

    sequence: int
    created_at: float = Field(description="unix time the validator signed the head")
    shards: int

    def age_line(self, now: float | None = None) -> str:
        """How old the head is, for a person: ``head 4 signed 3 h 12 min ago
        (2026-11-30T08:15:02Z)``; a head dated ahead of this machine's clock says so."""
        now = time.time() if now is None else now
        when = utc_text(self.created_at)
        ahead = self.created_at - now
        if ahead > 60:
            return (
                f"head {self.sequence} signed {age_words(ahead)} in the future ({when}): "
                "this machine's clock or the validator's is wrong"
            )
        return f"head {self.sequence} signed {age_words(now - self.created_at)} ago ({when})"


class PullReport(BaseModel):
    """What one pull did. ``quarantined`` maps a shard path to why it was refused,
    ``rejected`` a name the source listed (escaped) to why it is not a shard path,
    ``withheld`` lists the shards the signed head names that the source did not serve, and
    ``failed`` maps a shard path to the error fetching it."""

    fetched: list[str] = Field(default_factory=list, description="shards downloaded now")
    resumed: list[str] = Field(default_factory=list, description="of those, continued partials")
    held: list[str] = Field(default_factory=list, description="already here and verified")
    filtered: int = Field(default=0, description="shards the filters left out")
    embargoed: int = Field(default=0, description="shards of a live bucket, left at the source")
    rows: int = Field(default=0, description="episodes in the fetched and held shards")
    quarantined: dict[str, str] = Field(default_factory=dict)
    rejected: dict[str, str] = Field(default_factory=dict)
    withheld: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)
    head: HeadSummary | None = Field(default=None, description="the head checked against")
    head_problem: str | None = Field(default=None, description="why the head is in doubt")

    @property
    def complete(self) -> bool:
        """Whether everything the source should hold arrived verified and nothing was refused."""
        return not (
            self.quarantined or self.rejected or self.withheld or self.failed or self.head_problem
        )

    def problems(self) -> list[str]:
        """One line per thing refused, withheld or failed, for a person (names escaped)."""
        lines = [f"head: {self.head_problem}"] if self.head_problem else []
        lines += [f"rejected {name}: {why}" for name, why in self.rejected.items()]
        lines += [f"quarantined {p}: {why}" for p, why in self.quarantined.items()]
        lines += [
            f"withheld {p}: the validator's signed head lists it, the source does not serve it"
            for p in self.withheld
        ]
        lines += [f"failed {p}: {why}" for p, why in self.failed.items()]
        return lines
