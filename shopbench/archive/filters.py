"""The archive's query filters: one typed model, read from the CLI or from Python.

Every filter is optional; the ones given are combined with AND, and a list filter matches
any of its values. A malformed filter is a :class:`FilterError` naming the filter and what
it accepts, never a DuckDB syntax error halfway through a scan.

Every value is checked against what the archive can hold before any query runs: numbers
are finite (``nan`` and ``inf`` in every spelling are refused), scores lie in [0, 1] as the
record's final, rule and judge scores do, a slow-turn threshold is at least 0, whole
numbers fit DuckDB's BIGINT (blocks, epochs, miner uids) or :data:`MAX_LIMIT` (``limit``),
and times lie in :data:`TIME_MIN` .. :data:`TIME_MAX` once converted to UTC (the archive's
``started_at`` is an Arrow ``timestamp('us', tz='UTC')``; Python's datetime ends at year
9999). A filter that passes is what :meth:`TraceFilter.key` names for caches.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
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

from shopbench.archive.errors import FilterError
from shopbench.errors import first_error
from shopbench.records.diagnosis import DiagnosisKind
from shopbench.records.task import Intent
from shopbench.records.trajectory import TerminationReason, ToolErrorCode

MAX_TEXT_CHARS = 200
"""The longest full-text search a filter takes."""
GATE_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
"""What a judge gate's name looks like (the rubric's names: lower case, digits, ``_``)."""
CONSTRAINT_PATTERN = r"^[a-z_]{1,32}(:[^\x00-\x1f\x7f,]{1,96})?$"
"""What a diagnosis's failing constraint looks like: ``price``, ``attribute:<name>`` …"""
EPISODE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
"""What an episode id looks like (the archive's ids are hex digests; an id of any other
shape matches no episode and is refused as a filter)."""


BIGINT_MAX = 2**63 - 1
"""The largest block, epoch or miner uid a filter takes (DuckDB's BIGINT, the columns' type)."""
MAX_LIMIT = 2**31 - 1
"""The largest ``limit`` a filter (or the API's ``limit`` parameter) takes."""
TIME_MIN = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest ``since``/``until`` (unix time 0): no episode started before it."""
TIME_MAX = datetime.max.replace(tzinfo=UTC)
"""The latest ``since``/``until``, in UTC (the end of year 9999, where datetime stops)."""
_UNIX_END = (TIME_MAX - TIME_MIN) // timedelta(seconds=1) + 1  # the first second past it
_TIME_RANGE = "from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z in UTC"

Score = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
"""A score filter's bound: finite, in [0, 1] like every score a record holds."""
WholeNumber = Annotated[int, Field(ge=0, le=BIGINT_MAX)]
"""A block, epoch or miner uid: 0 to :data:`BIGINT_MAX`."""


def _from_unix(seconds: float) -> datetime:
    """The UTC time `seconds` after the epoch; ValueError outside the archive's times."""
    if not math.isfinite(seconds):
        raise ValueError(f"{seconds} is not a finite number of unix seconds")
    if not 0 <= seconds < _UNIX_END:
        raise ValueError(f"{seconds} unix seconds is outside the archive's times")
    return TIME_MIN + timedelta(seconds=seconds)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class TraceFilter(BaseModel):
    """Which archived episodes a query returns (every field optional; all given must hold)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    episode_id: list[Annotated[str, StringConstraints(pattern=EPISODE_ID_PATTERN)]] | None = (
        Field(default=None, description="episode ids (an empty list matches none)")
    )
    block_min: WholeNumber | None = Field(default=None, description="first block (inclusive)")
    block_max: WholeNumber | None = Field(default=None, description="last block (inclusive)")
    epoch_min: WholeNumber | None = Field(default=None, description="first epoch (inclusive)")
    epoch_max: WholeNumber | None = Field(default=None, description="last epoch (inclusive)")
    since: datetime | None = Field(
        default=None, description="episodes started at or after this time (ISO 8601 or unix s)"
    )
    until: datetime | None = Field(
        default=None, description="episodes started before this time (ISO 8601 or unix s)"
    )
    intent: list[Intent] | None = Field(default=None, description="task intents")
    cluster: list[str] | None = Field(default=None, description="task cluster ids")
    miner_uid: list[WholeNumber] | None = Field(default=None, description="miner uids")
    miner_hotkey: list[str] | None = Field(default=None, description="miner hotkeys")
    validator: list[str] | None = Field(default=None, description="validator hotkeys")
    agent: list[str] | None = Field(default=None, description="agent (policy or model) names")
    judge_id: list[str] | None = Field(default=None, description="judge ids")
    termination: list[TerminationReason] | None = Field(
        default=None, description="termination reasons"
    )
    success: bool | None = Field(default=None, description="outcome success")
    failure: list[DiagnosisKind] | None = Field(
        default=None, description="how the episode ended (the diagnosis's kind)"
    )
    failure_constraint: list[
        Annotated[str, StringConstraints(pattern=CONSTRAINT_PATTERN)]
    ] | None = Field(
        default=None, description="the diagnosis's failing constraint, e.g. price, attribute:color"
    )  # fmt: skip
    tool_error: list[ToolErrorCode] | None = Field(
        default=None, description="some tool call failed with one of these error codes"
    )
    score_min: Score | None = Field(default=None, description="lowest final score (inclusive)")
    score_max: Score | None = Field(default=None, description="highest final score (inclusive)")
    rule_score_min: Score | None = Field(default=None, description="lowest mean rule score")
    rule_score_max: Score | None = Field(default=None, description="highest mean rule score")
    judge_score_min: Score | None = Field(default=None, description="lowest judge score")
    judge_score_max: Score | None = Field(default=None, description="highest judge score")
    text: str | None = Field(
        default=None, min_length=1, max_length=MAX_TEXT_CHARS,
        description="full-text search: the query, or an assistant turn's reasoning, "
        "contains this (case-insensitive)",
    )  # fmt: skip
    slow_turn_ms: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="some turn waited at least this long for the policy (ms)",
    )  # fmt: skip
    gate_failed: list[Annotated[str, StringConstraints(pattern=GATE_PATTERN)]] | None = Field(
        default=None, description="the judge failed one of these gates"
    )
    limit: int | None = Field(
        default=None, ge=1, le=MAX_LIMIT, description="at most this many rows"
    )

    @field_validator("since", "until", mode="before")
    @classmethod
    def _unix_seconds(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = float(value)  # also "nan", "inf", "1e18": refused below, by name
            except ValueError:
                return value  # ISO 8601 text, for pydantic to read
        if isinstance(value, int | float) and not isinstance(value, bool):
            return _from_unix(value)
        return value

    @field_validator("since", "until")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        # A naive time is UTC; an offset is converted, and a time whose conversion leaves
        # datetime's range (9999-12-31T23:00:00-05:00) is refused like any other outside.
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        try:
            utc = value.astimezone(UTC)
        except OverflowError:
            utc = None
        if utc is None or utc < TIME_MIN:
            raise ValueError(f"{value.isoformat()} is outside the archive's times")
        return utc

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

    def key(self) -> str:
        """The filter's canonical text, for caches: two filters share a key only when every
        field holds the same value.

        It is the JSON of ``[[field, value], ...]`` over the fields in declaration order,
        the filter validated again first (a copy made with ``model_copy`` skips validation).
        Each field has one type, so its name fixes how its value reads back: a number is
        finite (``nan`` or ``inf`` would make ``json.dumps`` raise, never come out as
        ``null``, the way pydantic's JSON writes them, which made a ``score_min=nan`` filter
        read as no filter at all), a time is UTC, unset is ``null``."""
        checked = type(self).model_validate(self.model_dump())
        fields = checked.model_dump(mode="json")
        return json.dumps(
            [[name, fields[name]] for name in type(self).model_fields],
            allow_nan=False, ensure_ascii=True, separators=(",", ":"),
        )  # fmt: skip

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
            if is_list_filter(name) and isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            raw[name] = value
        try:
            return cls(**raw)
        except ValidationError as e:
            problem = first_error(e)
            name, message = problem.field, problem.message
            if not name:
                raise FilterError(message) from None
            reason = f"{problem.input!r} refused: {message}{_allowed(name)}"
            raise FilterError(
                f"filter {_flag(name)}: {reason}", filter=name, allowed=allowed_values(name),
                reason=reason,
            ) from None


def is_list_filter(name: str) -> bool:
    """Whether filter `name` takes a list (a comma-separated value on the command line)."""
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
        return (
            " (allowed: an ISO 8601 time such as 2025-01-31T12:00:00Z, or unix seconds, "
            f"{_TIME_RANGE})"
        )
    return ""
