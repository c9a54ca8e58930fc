"""The archive's query filters: one typed model, read from the CLI or from Python.

Every filter is optional; the ones given are combined with AND, and a list filter matches
any of its values. A malformed filter is a :class:`FilterError` naming the filter and what
it accepts, never a DuckDB syntax error halfway through a scan.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from shopbench.archive.sink import SinkError
from shopbench.outcome.spec import Intent
from shopbench.trajectory.record import TerminationReason


class FilterError(SinkError):
    """A query filter that is malformed: its name, the value and what is allowed.

    ``filter`` is the field's name (None when the problem spans several), ``reason`` what is
    wrong with it (without the CLI's flag name) and ``allowed`` the values it accepts when
    they are a closed set, for callers that answer in a structured form (the HTTP API's
    422)."""

    def __init__(
        self,
        message: str,
        *,
        filter: str | None = None,
        allowed: list[str] | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.filter = filter
        self.allowed = allowed
        self.reason = reason


MAX_TEXT_CHARS = 200
"""The longest full-text search a filter takes."""
GATE_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
"""What a judge gate's name looks like (the rubric's names: lower case, digits, ``_``)."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class TraceFilter(BaseModel):
    """Which archived episodes a query returns (every field optional; all given must hold)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    block_min: int | None = Field(default=None, ge=0, description="first block (inclusive)")
    block_max: int | None = Field(default=None, ge=0, description="last block (inclusive)")
    epoch_min: int | None = Field(default=None, ge=0, description="first epoch (inclusive)")
    epoch_max: int | None = Field(default=None, ge=0, description="last epoch (inclusive)")
    since: datetime | None = Field(
        default=None, description="episodes started at or after this time (ISO 8601 or unix s)"
    )
    until: datetime | None = Field(
        default=None, description="episodes started before this time (ISO 8601 or unix s)"
    )
    intent: list[Intent] | None = Field(default=None, description="task intents")
    cluster: list[str] | None = Field(default=None, description="task cluster ids")
    miner_uid: list[int] | None = Field(default=None, description="miner uids")
    miner_hotkey: list[str] | None = Field(default=None, description="miner hotkeys")
    validator: list[str] | None = Field(default=None, description="validator hotkeys")
    agent: list[str] | None = Field(default=None, description="agent (policy or model) names")
    judge_id: list[str] | None = Field(default=None, description="judge ids")
    termination: list[TerminationReason] | None = Field(
        default=None, description="termination reasons"
    )
    success: bool | None = Field(default=None, description="outcome success")
    score_min: float | None = Field(default=None, description="lowest final score (inclusive)")
    score_max: float | None = Field(default=None, description="highest final score (inclusive)")
    rule_score_min: float | None = Field(default=None, description="lowest mean rule score")
    rule_score_max: float | None = Field(default=None, description="highest mean rule score")
    judge_score_min: float | None = Field(default=None, description="lowest judge score")
    judge_score_max: float | None = Field(default=None, description="highest judge score")
    text: str | None = Field(
        default=None, min_length=1, max_length=MAX_TEXT_CHARS,
        description="full-text search: the query, or an assistant turn's reasoning, "
        "contains this (case-insensitive)",
    )  # fmt: skip
    slow_turn_ms: float | None = Field(
        default=None, ge=0, description="some turn waited at least this long for the policy (ms)"
    )
    gate_failed: list[Annotated[str, StringConstraints(pattern=GATE_PATTERN)]] | None = Field(
        default=None, description="the judge failed one of these gates"
    )
    limit: int | None = Field(default=None, ge=1, description="at most this many rows")

    @field_validator("since", "until", mode="before")
    @classmethod
    def _unix_seconds(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, tz=UTC)
        if isinstance(value, str):
            try:
                return datetime.fromtimestamp(float(value), tz=UTC)
            except ValueError:
                return value
        return value

    @field_validator("since", "until")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @model_validator(mode="after")
    def _ranges_ordered(self) -> TraceFilter:
        for lo, hi in (
            ("block_min", "block_max"), ("epoch_min", "epoch_max"), ("since", "until"),
            ("score_min", "score_max"), ("rule_score_min", "rule_score_max"),
            ("judge_score_min", "judge_score_max"),
        ):  # fmt: skip
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise ValueError(f"filter {_flag(lo)} {a} is above {_flag(hi)} {b}")
        return self

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> TraceFilter:
        """The filter from raw values (CLI strings or Python values; None means unset; a list
        filter also takes one comma-separated string). FilterError names the first filter
        that is malformed and what it accepts."""
        raw: dict[str, Any] = {}
        for name, value in values.items():
            if value is None:
                continue
            if name not in cls.model_fields:
                known = ", ".join(_flag(f) for f in cls.model_fields)
                raise FilterError(
                    f"unknown filter {_flag(name)} (filters: {known})",
                    filter=name, allowed=list(cls.model_fields), reason="unknown filter",
                )  # fmt: skip
            if _is_list_field(name) and isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            raw[name] = value
        try:
            return cls(**raw)
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            loc = first["loc"]
            name = str(loc[0]) if loc else ""
            message = str(first["msg"]).removeprefix("Value error, ")
            if not name:
                raise FilterError(message) from None
            given = first.get("input")
            reason = f"{given!r} refused: {message}{_allowed(name)}"
            raise FilterError(
                f"filter {_flag(name)}: {reason}", filter=name, allowed=allowed_values(name),
                reason=reason,
            ) from None


def _is_list_field(name: str) -> bool:
    return "list[" in str(TraceFilter.model_fields[name].annotation)


def allowed_values(name: str) -> list[str] | None:
    """The values filter `name` accepts when they are a closed set (intents, termination
    reasons, true/false), else None."""
    if name == "success":
        return ["true", "false"]
    for arg in get_args(TraceFilter.model_fields[name].annotation):
        for inner in (arg, *get_args(arg)):
            if isinstance(inner, type) and issubclass(inner, StrEnum):
                return [m.value for m in inner]
            literal = [v for v in get_args(inner) if isinstance(v, str)]
            if literal and str(inner).startswith("typing.Literal"):
                return literal
    return None


def _allowed(name: str) -> str:
    # intent and termination: pydantic's message already lists the allowed values
    if name == "success":
        return " (allowed: true, false)"
    if name in ("since", "until"):
        return " (allowed: an ISO 8601 time such as 2025-01-31T12:00:00Z, or unix seconds)"
    return ""
