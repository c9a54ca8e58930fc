"""Rubric files: the criteria, their order, scores and thresholds, as versioned data.

A rubric file (TOML; the packaged one is ``data/rubric_v1.toml``) names its criteria — each
name selects a check of :mod:`shopbench.judging.rubric.checks` — with their kind (gate or bonus),
fail score or weight and description, the checks' thresholds, the generic words query
grounding treats as known, the words that claim a search is filtered, and the patterns of
judge-directed text. :func:`load_rubric` reads and validates one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.datafiles import load_toml
from shopbench.judging.errors import JudgeError
from shopbench.judging.rubric.checks import CHECKS, RubricParams
from shopbench.judging.rubric.evidence import EvidenceRules
from shopbench.judging.rubric.grounding import GroundingRules

DEFAULT_RUBRIC = "rubric_v4.toml"
"""The release's rubric; ``rubric_v1.toml`` to ``rubric_v3.toml`` stay packaged for re-judging
older records."""


class CriterionSpec(BaseModel):
    """One criterion as the rubric file declares it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="selects the check; see CHECKS")
    kind: Literal["gate", "bonus"]
    description: str
    fail_score: float | None = Field(default=None, ge=0, le=1, description="gates only")
    weight: float | None = Field(default=None, ge=0, le=1, description="bonuses only")

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> CriterionSpec:
        if self.kind == "gate" and self.fail_score is None:
            raise ValueError(f"gate {self.name!r} needs a fail_score")
        if self.kind == "bonus" and self.weight is None:
            raise ValueError(f"bonus {self.name!r} needs a weight")
        return self


class RubricInfo(BaseModel):
    """The rubric's header."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    description: str = ""
    pass_score: float = Field(ge=0, le=1)
    max_score: float = Field(ge=0, le=1)


class GroundingSection(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    common_words: list[str] = Field(default_factory=list)


class MatchingSection(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    filter_claims: list[str] = Field(
        default_factory=list, description="words that claim a search is filtered"
    )


class InjectionPattern(BaseModel):
    """A judge-directed phrase: a regular expression and the substrings it cannot miss."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    needles: list[str] = Field(min_length=1, description="one must occur for a match")
    pattern: str

    @model_validator(mode="after")
    def _compiles(self) -> InjectionPattern:
        try:
            re.compile(self.pattern)
        except re.error as e:
            raise ValueError(f"pattern {self.pattern!r} does not compile: {e}") from None
        return self


class InjectionSection(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    patterns: list[InjectionPattern] = Field(default_factory=list)


class ClaimsSection(BaseModel):
    """How claims that the recommendation meets the requirements are read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    patterns: list[str] = Field(
        default_factory=list, description="regular expressions (lower-cased text) of a claim "
        "that the recommendation meets every requirement",
    )  # fmt: skip
    negations: list[str] = Field(
        default_factory=list, description="words that, earlier in the sentence, make a claim "
        "phrase a denial",
    )  # fmt: skip

    @model_validator(mode="after")
    def _compiles(self) -> ClaimsSection:
        for p in self.patterns:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"claim pattern {p!r} does not compile: {e}") from None
        return self


class Rubric(BaseModel):
    """A whole rubric file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rubric: RubricInfo
    criteria: list[CriterionSpec] = Field(min_length=1)
    params: RubricParams = RubricParams()
    grounding: GroundingSection = GroundingSection()
    matching: MatchingSection = MatchingSection()
    injection: InjectionSection = InjectionSection()
    claims: ClaimsSection = ClaimsSection()

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        names = [c.name for c in self.criteria]
        unknown = [n for n in names if n not in CHECKS]
        if unknown:
            raise ValueError(
                f"unknown criteria {unknown}; known: {', '.join(sorted(CHECKS))}"
            )
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"criteria listed twice: {dupes}")
        info = self.rubric
        for c in self.criteria:
            if c.kind == "gate" and c.fail_score is not None and c.fail_score >= info.pass_score:
                raise ValueError(
                    f"gate {c.name!r}: fail_score {c.fail_score} must be below pass_score "
                    f"{info.pass_score}"
                )
        if info.max_score < info.pass_score:
            raise ValueError(f"max_score {info.max_score} is below pass_score {info.pass_score}")
        return self

    def evidence_rules(self) -> EvidenceRules:
        """The evidence-extraction knobs this rubric sets."""
        return EvidenceRules(
            grounding=GroundingRules(
                run_length=self.params.grounding_run,
                common=frozenset(w.lower() for w in self.grounding.common_words),
                leak_limit=self.params.leak_limit,
                price_window=self.params.price_window,
            ),
            title_ngram=self.params.title_ngram,
            price_tolerance=self.params.price_tolerance,
            filter_claims=frozenset(w.lower() for w in self.matching.filter_claims),
            judge_patterns=tuple(
                (tuple(p.needles), re.compile(p.pattern)) for p in self.injection.patterns
            ),
            claim_patterns=tuple(re.compile(p) for p in self.claims.patterns),
            negations=frozenset(w.lower() for w in self.claims.negations),
        )


def load_rubric(path: str | Path | None = None) -> Rubric:
    """Read a rubric file (the release's, :data:`DEFAULT_RUBRIC`, when `path` is None).

    Raises :class:`JudgeError` naming the file and what is wrong with it.
    """
    return load_toml(
        Rubric, path, package="shopbench.judging.rubric", name=DEFAULT_RUBRIC,
        what="rubric file", error=JudgeError,
    )
