"""The rubric judge: the default process judge — deterministic, no model.

The criteria, their order, fail scores and bonus weights live in a versioned TOML file
(``data/rubric_v1.toml``); each criterion's name selects one check below. A check reads the
:class:`~shopbench.grading.evidence.Evidence` of a trajectory and returns whether it passed
and the evidence in one line. No check can be satisfied by text that merely claims things:
every one needs tool-log facts or words verified against earlier observations, and the
checks on the words (fabricated ids, judge-directed text) can only fail a trajectory.

Scoring follows SN15's gated rubric: the first failing gate, in file order, sets the score
to its fail_score; a trajectory that passes every gate scores pass_score plus the bonuses it
earned, capped at max_score.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shopbench.grading.evidence import Evidence, EvidenceRules, extract
from shopbench.grading.grounding import GroundingRules
from shopbench.grading.judge import JudgeError, Verdict
from shopbench.trajectory import Trajectory

JUDGE_VERSION = "1"
"""Version of the rubric judge's code (its checks); a consensus parameter with the rubric's."""

DEFAULT_RUBRIC = "rubric_v1.toml"


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


class RubricParams(BaseModel):
    """The thresholds the checks use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grounding_run: int = Field(default=3, ge=1, description="unknown words in a row")
    leak_limit: int = Field(
        default=1, ge=0, description="unknown words of the hidden answer in a query; 0: off"
    )
    price_window: float = Field(
        default=0.02, ge=0, lt=1, description="relative width of a price filter naming a price"
    )
    title_ngram: int = Field(default=4, ge=2, description="title words that name a product")
    price_tolerance: float = Field(default=0.01, ge=0, lt=1, description="relative")
    min_call_match: float = Field(default=0.75, ge=0, le=1)
    min_unverified_prices: int = Field(default=2, ge=1)
    max_unverified_price_share: float = Field(default=0.34, ge=0, le=1)


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


class Rubric(BaseModel):
    """A whole rubric file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rubric: RubricInfo
    criteria: list[CriterionSpec] = Field(min_length=1)
    params: RubricParams = RubricParams()
    grounding: GroundingSection = GroundingSection()
    matching: MatchingSection = MatchingSection()
    injection: InjectionSection = InjectionSection()

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
        )


def load_rubric(path: str | Path | None = None) -> Rubric:
    """Read a rubric file (the packaged v1 when `path` is None).

    Raises :class:`JudgeError` naming the file and what is wrong with it.
    """
    if path is None:
        where = f"shopbench/grading/data/{DEFAULT_RUBRIC}"
        text = resources.files("shopbench.grading").joinpath("data", DEFAULT_RUBRIC).read_text()
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise JudgeError(f"{where}: cannot read rubric file ({e.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise JudgeError(f"{where}: not TOML ({e})") from None
    try:
        return Rubric.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        raise JudgeError(f"{where}: {loc + ': ' if loc else ''}{msg}") from None


# -- the checks ----------------------------------------------------------------------------

Check = Callable[[Evidence, RubricParams], tuple[bool, str]]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def check_real_output(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """The agent wrote words of its own and at least one of its calls ran."""
    with_text = sum(t.has_text for t in ev.turns)
    ran = len(ev.calls())
    passed = with_text > 0 and ran > 0
    return passed, f"{_plural(with_text, 'turn')} with text of {len(ev.turns)}; " \
        f"{_plural(ran, 'call')} ran"


def check_no_judge_directed_text(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """No text addressed to a grader."""
    found = [(t.index, s) for t in ev.turns for s in t.judge_directed]
    if not found:
        return True, "no text addressed to a grader"
    turn, said = found[0]
    return False, f"{_plural(len(found), 'phrase')} addressed to a grader, first in turn " \
        f"{turn + 1}: {said!r}"


def check_grounded_queries(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """Every find_product query's words come from the request or earlier observations."""
    searches = ev.calls("find_product")
    bad = [c for c in searches if c.grounding is not None and not c.grounding.grounded]
    if not bad:
        return True, f"{_plural(len(searches), 'search')}, all grounded"
    g = bad[0].grounding
    assert g is not None
    return False, f"{len(bad)} of {_plural(len(searches), 'search')} ungrounded, first in " \
        f"turn {bad[0].turn + 1}: {g.reason()}"


def check_searched_first(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """A search showed results in a turn before any recommendation was attempted."""
    first_hits = next(
        (c.turn for c in ev.calls("find_product") if c.shown and c.error is None), None
    )
    if first_hits is None:
        return False, "no search showed any result"
    if ev.recommend_turn is not None and ev.recommend_turn <= first_hits:
        return False, f"recommended in turn {ev.recommend_turn + 1}, before seeing search " \
            f"results (first in turn {first_hits + 1})"
    return True, f"search results first seen in turn {first_hits + 1}"


def check_viewed_recommended(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """Every recommended product's details were opened in an earlier turn."""
    if ev.recommend_turn is None:
        return True, "nothing recommended"
    if not ev.recommended:
        return False, "the recommendation was rejected by the environment"
    unseen = [
        t for t in ev.recommended
        if (s := ev.shown.get(t)) is None or s.viewed_turn is None
        or s.viewed_turn >= ev.recommend_turn
    ]
    if unseen:
        return False, f"{len(unseen)} of {len(ev.recommended)} recommended not viewed " \
            f"before: {', '.join(unseen[:3])}"
    return True, f"all {len(ev.recommended)} recommended viewed before recommending"


def check_reasoning_matches_calls(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """Each turn's words name what its calls are about."""
    judged = [c for c in ev.calls() if c.matches_text is not None]
    if not judged:
        return True, "no call to match against its turn's words"
    matched = sum(bool(c.matches_text) for c in judged)
    share = matched / len(judged)
    first_miss = next((c for c in judged if not c.matches_text), None)
    tail = "" if first_miss is None else \
        f"; first mismatch: {first_miss.name} in turn {first_miss.turn + 1}"
    return share >= p.min_call_match, f"{matched} of {_plural(len(judged), 'call')} named in " \
        f"their turn's words ({share:.0%}){tail}"


def check_cites_observed_specifics(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """Cites shown ids, prices or attribute values; no fabricated ids, few unverified prices."""
    ids = sum(len(t.ids_grounded) for t in ev.turns)
    prices = sum(t.prices_cited for t in ev.turns)
    attrs = sum(t.attributes_cited for t in ev.turns)
    fabricated = sorted({i for t in ev.turns for i in t.ids_fabricated})
    unverified = [v for t in ev.turns for v in t.prices_unverified]
    said = f"cited {ids} ids, {prices} prices, {attrs} attribute values"
    if fabricated:
        return False, f"{said}; {_plural(len(fabricated), 'id')} never shown in this episode " \
            f"(fabricated), e.g. {fabricated[0]}"
    claims = prices + len(unverified)
    if len(unverified) >= p.min_unverified_prices and (
        len(unverified) / claims > p.max_unverified_price_share
    ):
        return False, f"{said}; {len(unverified)} of {claims} money amounts match no shown " \
            f"price, e.g. {unverified[0]:g}"
    if ids + prices + attrs == 0:
        return False, "no shown id, price or attribute value cited"
    return True, said


def _named_in(group: set[str], named: set[str], ambiguous: list[frozenset[str]]) -> int:
    """Products of `group` the text names: by id or unique title, plus each title run that
    fits only products of the group and none of those named (one of them is meant)."""
    anonymous = {a for a in ambiguous if a <= group and not a & named}
    return len(group & named) + len(anonymous)


def check_compared_candidates(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """One turn, no later than the recommendation, names two or more products that one
    search or one view showed together (alternatives for the same need) and cites at least
    two shown prices or attribute values: a comparison, not a list of ids."""
    last = ev.recommend_turn if ev.recommend_turn is not None else len(ev.turns)
    groups = [set(c.shown) for c in ev.calls() if len(c.shown) >= 2]
    most = 0
    for t in ev.turns:
        if t.index > last or len(t.mentioned) + len(t.ambiguous) < 2:
            continue
        n = max((_named_in(g, t.mentioned, t.ambiguous) for g in groups), default=0)
        specifics = t.prices_cited + t.attributes_cited
        if n >= 2 and specifics >= 2:
            return True, f"turn {t.index + 1} names {n} products shown together, citing " \
                f"{specifics} prices or attribute values"
        most = max(most, n)
    return False, "no turn names two products shown together with their prices or " \
        f"attributes (at most {most} named)"


def check_recovered(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """A search that missed was followed by a changed search that found on-target results."""
    searches = ev.calls("find_product")
    for i, miss in enumerate(searches):
        if not (miss.error is not None or miss.empty or not miss.on_target):
            continue
        for later in searches[i + 1 :]:
            if later.turn > miss.turn and later.arguments != miss.arguments and later.on_target:
                why = "failed" if miss.error else "was empty" if miss.empty else "missed"
                return True, f"search in turn {miss.turn + 1} {why}; the changed search in " \
                    f"turn {later.turn + 1} found on-target results"
    return False, "no recovery from a missed search"


CHECKS: dict[str, Check] = {
    "real_output": check_real_output,
    "no_judge_directed_text": check_no_judge_directed_text,
    "grounded_queries": check_grounded_queries,
    "searched_first": check_searched_first,
    "viewed_recommended": check_viewed_recommended,
    "reasoning_matches_calls": check_reasoning_matches_calls,
    "cites_observed_specifics": check_cites_observed_specifics,
    "compared_candidates": check_compared_candidates,
    "recovered": check_recovered,
}
"""The checks a rubric file may name, by criterion name."""


def _signals(ev: Evidence) -> dict[str, float]:
    searches = ev.calls("find_product")
    judged = [c for c in ev.calls() if c.matches_text is not None]
    return {
        "turns": len(ev.turns),
        "calls_run": len(ev.calls()),
        "calls_not_run": sum(not c.executed for t in ev.turns for c in t.calls),
        "searches": len(searches),
        "ungrounded_searches": sum(
            1 for c in searches if c.grounding is not None and not c.grounding.grounded
        ),
        "views": len(ev.calls("view_product_information")),
        "ids_cited": sum(len(t.ids_grounded) for t in ev.turns),
        "ids_fabricated": len({i for t in ev.turns for i in t.ids_fabricated}),
        "prices_cited": sum(t.prices_cited for t in ev.turns),
        "prices_unverified": sum(len(t.prices_unverified) for t in ev.turns),
        "attributes_cited": sum(t.attributes_cited for t in ev.turns),
        "max_products_named": max((len(t.mentioned) for t in ev.turns), default=0),
        "call_text_match": (
            sum(bool(c.matches_text) for c in judged) / len(judged) if judged else 1.0
        ),
        "judge_directed": sum(len(t.judge_directed) for t in ev.turns),
    }


class RubricJudge:
    """The deterministic rubric judge (see the module docstring)."""

    id = "rubric"
    version = JUDGE_VERSION

    def __init__(self, rubric: Rubric | None = None) -> None:
        self.rubric = rubric or load_rubric()
        self._rules = self.rubric.evidence_rules()
        info = self.rubric.rubric
        self.judge_id = f"{self.id}-judge/{self.version}+{info.name}/{info.version}"

    def evidence(self, trajectory: Trajectory | Mapping[str, Any]) -> Evidence:
        """The evidence this judge decides on (for inspection and reports)."""
        return extract(trajectory, self._rules)

    def judge(self, trajectory: Trajectory | Mapping[str, Any]) -> Verdict:
        """The verdict on one trajectory; never raises for anything inside the record."""
        return self.judge_evidence(self.evidence(trajectory))

    def judge_evidence(self, ev: Evidence) -> Verdict:
        """The verdict on already-extracted evidence."""
        info = self.rubric.rubric
        params = self.rubric.params
        results: list[dict[str, Any]] = []
        stopped: dict[str, Any] | None = None
        bonus = 0.0
        for spec in self.rubric.criteria:
            passed, why = CHECKS[spec.name](ev, params)
            earned = (spec.weight or 0.0) if spec.kind == "bonus" and passed else 0.0
            result = {
                "name": spec.name, "kind": spec.kind, "passed": passed,
                "fail_score": spec.fail_score, "bonus": earned, "evidence": why,
            }
            results.append(result)
            if spec.kind == "gate" and not passed and stopped is None:
                stopped = result
            bonus += earned
        if stopped is not None:
            score = float(stopped["fail_score"] or 0.0)
            rationale = f"stopped at {stopped['name']} ({score:g}): {stopped['evidence']}"
        else:
            score = min(info.max_score, info.pass_score + bonus)
            earned_names = [r["name"] for r in results if r["kind"] == "bonus" and r["passed"]]
            extra = f" + {', '.join(earned_names)}" if earned_names else ""
            rationale = f"all gates passed ({info.pass_score:g}{extra})"
        if ev.notes:
            rationale += " | input: " + "; ".join(ev.notes)
        # One validation of plain data (pydantic-core) is cheaper than building each model.
        return Verdict.model_validate({
            "score": round(score, 6),
            "gates": {r["name"]: r["passed"] for r in results if r["kind"] == "gate"},
            "rationale": rationale,
            "judge_id": self.judge_id,
            "judge_version": self.version,
            "rubric_version": info.version,
            "stopped_at": stopped["name"] if stopped else None,
            "criteria": results,
            "notes": list(ev.notes),
            "signals": _signals(ev),
        })
