"""What ``report.json`` holds, and the headline read from its per-policy table (see
:mod:`shopbench.curation.report`)."""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
TOP_REASONS = 8


def ratio(num: int, den: int) -> float | None:
    """`num / den` to four places, None when `den` is 0."""
    return round(num / den, 4) if den else None


class Separation(BaseModel):
    """Dishonest / honest / neither counts of a set of traces, with the ratios."""

    model_config = ConfigDict(frozen=True)

    dropped: int
    dishonest: int
    honest: int
    neither: int
    precision: float | None = Field(description="dishonest / (dishonest + honest) dropped")
    recall: float | None = Field(description="dishonest dropped / all dishonest")
    honest_loss: float | None = Field(description="honest dropped / all honest")


class RuleEffect(BaseModel):
    """One rule's drops: how many, the commonest reasons, and (with truth) the separation."""

    model_config = ConfigDict(frozen=True)

    enabled: bool
    dropped: int
    reasons: dict[str, int]
    truth: Separation | None = None
    alone: Separation | None = None


class ContaminationCounts(BaseModel):
    """One test set's overlap with the valid episodes, and with the kept ones."""

    model_config = ConfigDict(frozen=True)

    test_queries: int
    sha256: str | None = Field(default=None, description="of the test file's bytes, as read")
    contaminated: int
    clean: int
    kept_contaminated: int
    kept_clean: int


class PolicyCounts(BaseModel):
    """One true policy's traces: in, kept, retained, and dropped by each rule."""

    model_config = ConfigDict(frozen=True)

    honest: bool | None
    episodes: int
    kept: int
    retained: int = Field(
        description="kept, or dropped as a duplicate of a kept episode (its decisions stay "
        "in the set): what the headline's retention, recall and precision count as not removed"
    )
    dropped_by_rule: dict[str, int]
    recovery: int

    @model_validator(mode="before")
    @classmethod
    def _retained_before_it_was_written(cls, data: Any) -> Any:
        # A report.json written before `retained` existed: its only rule that kept
        # decisions was `duplicates`.
        if isinstance(data, dict) and "retained" not in data and "kept" in data:
            dups = (data.get("dropped_by_rule") or {}).get("duplicates", 0)
            return {**data, "retained": data["kept"] + dups}
        return data


class Headline(NamedTuple):
    """The separation figures and the counts they are computed from."""

    precision: float | None
    recall: float | None
    retention: float | None
    honest: int  # honest traces in
    honest_kept: int
    honest_retained: int
    dishonest: int  # dishonest traces in
    dishonest_removed: int


def headline(policies: dict[str, PolicyCounts]) -> Headline:
    """The report's headline figures, from its per-policy table: honest retention = the
    honest policies' retained traces / their traces; dishonest removal recall = the
    dishonest policies' traces not retained / their traces; precision = dishonest removed /
    (dishonest removed + honest removed)."""
    honest = [p for p in policies.values() if p.honest is True]
    dishonest = [p for p in policies.values() if p.honest is False]
    h_in = sum(p.episodes for p in honest)
    h_retained = sum(p.retained for p in honest)
    d_in = sum(p.episodes for p in dishonest)
    d_removed = d_in - sum(p.retained for p in dishonest)
    h_removed = h_in - h_retained
    return Headline(
        precision=ratio(d_removed, d_removed + h_removed), recall=ratio(d_removed, d_in),
        retention=ratio(h_retained, h_in), honest=h_in,
        honest_kept=sum(p.kept for p in honest), honest_retained=h_retained,
        dishonest=d_in, dishonest_removed=d_removed,
    )  # fmt: skip


class DuplicateCounts(BaseModel):
    """One miner's episodes dropped as duplicates of another episode's decisions."""

    model_config = ConfigDict(frozen=True)

    dropped: int
    of: dict[str, int] = Field(description="the miners whose episodes were kept instead")
    examples: dict[str, str] = Field(
        default_factory=dict, description="a few dropped episode ids → the kept episode's id"
    )


class DiagnosisCounts(BaseModel):
    """The episodes of one diagnosis kind (:mod:`shopbench.records.diagnosis`)."""

    model_config = ConfigDict(frozen=True)

    episodes: int
    kept: int
    dropped_by_rule: dict[str, int] = Field(default_factory=dict)


class CurationReport(BaseModel):
    """Everything ``report.json`` holds."""

    model_config = ConfigDict(frozen=True)

    archive: str
    episodes_in: int
    kept: int
    dropped_by_rule: dict[str, int]
    rules: dict[str, RuleEffect]
    kept_per_intent: dict[str, int]
    diagnoses: dict[str, DiagnosisCounts] = Field(
        default_factory=dict,
        description="per diagnosis kind (how the episode ended), the episodes in and kept",
    )
    kept_per_cluster: dict[str, int]
    kept_per_miner: dict[str, int]
    duplicates_per_miner: dict[str, DuplicateCounts] = Field(
        default_factory=dict,
        description="per miner, its episodes dropped by the duplicates rule, by kept miner",
    )
    recovery_share: float | None = Field(description="kept episodes tagged recovery / kept")
    recovery_kinds: dict[str, int]
    recovery_share_of_successes: float | None
    contaminated: dict[str, ContaminationCounts]
    dishonest_removal_precision: float | None = None
    dishonest_removal_recall: float | None = None
    honest_retention: float | None = None
    policies: dict[str, PolicyCounts] = Field(default_factory=dict)
    weights: dict[str, float] = Field(default_factory=dict)
    files: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
