"""The calibration targets: what a judge must show on the reference policies, as data.

The targets live in ``shopbench/calibration/data/calibration_targets.toml`` (the file says how
a target reads); :func:`load_targets` reads and validates it (or another file, for an
experiment) and :func:`check_targets` measures a calibration against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.agents.registry import POLICY_NAMES
from shopbench.calibration.errors import CalibrationError
from shopbench.calibration.report import PolicySummary
from shopbench.datafiles import load_toml

TARGETS_FILE = "calibration_targets.toml"
RoundMeasure = Literal["auc", "injection_delta"]
PolicyMeasure = Literal[
    "mean_process", "mean_process_successes", "grounding_caught", "template_factor",
    "decision_factor",
]
_ROUND_WIDE = frozenset({"auc", "injection_delta"})


class Condition(BaseModel):
    """One bound on one measure of the report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    measure: RoundMeasure | PolicyMeasure
    policy: str | None = Field(default=None, description="the policy a per-policy measure reads")
    minus: str | None = Field(default=None, description="the measure of this policy subtracted")
    at_least: float | None = None
    at_most: float | None = None
    below: float | None = None

    @model_validator(mode="after")
    def _well_formed(self) -> Condition:
        bounds = [b for b in (self.at_least, self.at_most, self.below) if b is not None]
        if len(bounds) != 1:
            raise ValueError("give exactly one of at_least, at_most, below")
        if self.measure in _ROUND_WIDE and (self.policy or self.minus):
            raise ValueError(f"{self.measure} is round-wide: it takes no policy or minus")
        if self.measure not in _ROUND_WIDE and self.policy is None:
            raise ValueError(f"{self.measure} is per policy: name the policy")
        for name in (self.policy, self.minus):
            if name is not None and name not in POLICY_NAMES:
                raise ValueError(
                    f"unknown policy {name!r}; reference policies: {', '.join(POLICY_NAMES)}"
                )
        return self

    def policies(self) -> set[str]:
        """The policies this condition reads."""
        return {n for n in (self.policy, self.minus) if n is not None}

    def holds(self, value: float) -> bool:
        """Whether the measured `value` is within the bound."""
        if self.at_least is not None:
            return value >= self.at_least
        if self.at_most is not None:
            return value <= self.at_most
        assert self.below is not None  # the validator leaves exactly one bound
        return value < self.below


class Target(BaseModel):
    """A named target: holds when all its conditions hold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="its key in the report's acceptance")
    conditions: list[Condition] = Field(min_length=1)


class CalibrationTargets(BaseModel):
    """A targets file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(ge=1)
    targets: list[Target] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> CalibrationTargets:
        names = [t.name for t in self.targets]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"target names must be distinct: {', '.join(twice)}")
        return self


def load_targets(path: str | Path | None = None) -> CalibrationTargets:
    """Read a targets file (the packaged one when `path` is None).

    Raises :class:`CalibrationError` naming the file, the entry and what is wrong with it.
    """
    return load_toml(
        CalibrationTargets, path, package="shopbench.calibration", name=TARGETS_FILE,
        what="targets", error=CalibrationError,
    )


def _measure(
    c: Condition, auc: float, injection_delta: float, by_policy: Mapping[str, PolicySummary]
) -> float:
    if c.measure == "auc":
        return auc
    if c.measure == "injection_delta":
        return injection_delta
    assert c.policy is not None  # per-policy measures name one

    def of(name: str) -> float:
        return float(getattr(by_policy[name], c.measure))

    return of(c.policy) - (of(c.minus) if c.minus is not None else 0.0)


def check_targets(
    targets: CalibrationTargets,
    auc: float,
    injection_delta: float,
    by_policy: Mapping[str, PolicySummary],
) -> dict[str, bool]:
    """Each target whose policies were all played (keys of `by_policy`) → whether it holds."""
    out: dict[str, bool] = {}
    for target in targets.targets:
        if not all(c.policies() <= by_policy.keys() for c in target.conditions):
            continue
        out[target.name] = all(
            c.holds(_measure(c, auc, injection_delta, by_policy)) for c in target.conditions
        )
    return out
