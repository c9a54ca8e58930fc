"""The rubric's checks: one function per criterion a rubric file may name.

A check reads the :class:`~shopbench.judging.rubric.evidence.Evidence` of a trajectory and the
rubric's thresholds, and returns whether the criterion holds and the evidence in one line.
No check can be satisfied by text that merely claims things: each needs tool-log facts or
words verified against earlier observations, and the checks on words alone (fabricated
ids, judge-directed text) can only fail a trajectory.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from shopbench.judging.rubric.evidence import Evidence
from shopbench.records.tools import Tool


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
    max_wasted_questions: int = Field(
        default=1, ge=0, description="questions to the shopper that revealed nothing held back"
    )
    success_fills_every_slot: bool = Field(
        default=False, description="claims_supported: a claim of success (terminate's status, "
        "or every requirement met) with a slot of the task left empty is false (rubric v4 on)",
    )  # fmt: skip


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
    searches = ev.calls(Tool.FIND_PRODUCT)
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
        (c.turn for c in ev.calls(Tool.FIND_PRODUCT) if c.shown and c.error is None), None
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
    searches = ev.calls(Tool.FIND_PRODUCT)
    for i, miss in enumerate(searches):
        if not (miss.error is not None or miss.empty or not miss.on_target):
            continue
        for later in searches[i + 1 :]:
            if later.turn > miss.turn and later.arguments != miss.arguments and later.on_target:
                why = "failed" if miss.error else "was empty" if miss.empty else "missed"
                return True, f"search in turn {miss.turn + 1} {why}; the changed search in " \
                    f"turn {later.turn + 1} found on-target results"
    return False, "no recovery from a missed search"


def check_claims_supported(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """No claim that the recommendation meets the requirements is false (the grader finds a
    visible constraint missed that the agent had been shown, or, with
    ``success_fills_every_slot``, a slot of the task left empty); unsupported ones are
    noted."""
    d = ev.decisions
    if d is None or not d.slots:
        return True, "no graded recommendation to hold a claim against"
    false = [c for c in d.claims if c.verdict == "false"]
    unsupported = sum(c.verdict == "unsupported" for c in d.claims)
    tail = f"; {_plural(unsupported, 'claim')} unsupported (details never opened)" \
        if unsupported else ""
    declared = [c for c in d.claims if c.kind in ("status", "all")]
    if p.success_fills_every_slot and d.empty and declared:
        c = declared[0]
        empty = ", ".join(str(s + 1) for s in d.empty)
        return False, f"turn {c.turn + 1} claims success ({c.said!r}), but the " \
            f"recommendation has no product for slot {empty} of " \
            f"{len(d.slots) + len(d.empty)}{tail}"
    if false:
        c = false[0]
        return False, f"{_plural(len(false), 'false claim')} of {len(d.claims)}, first in " \
            f"turn {c.turn + 1}: {c.said!r}, but the recommendation {c.why}{tail}"
    if not d.claims:
        return True, f"no claim that the recommendation meets the requirements{tail}"
    return True, f"{_plural(len(d.claims), 'claim')}, none false{tail}"


def check_decision_follows_constraints(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """No product the agent opened (with the item's title) meets more of the task's visible
    constraints than the one it recommended."""
    d = ev.decisions
    slots = [s for s in d.slots if s.visible] if d is not None else []
    if not slots:
        return True, "no recommendation with visible constraints to decide on"
    beaten = [s for s in slots if s.better]
    if beaten:
        s = beaten[0]
        b = max(s.better, key=lambda c: c.hits)
        where = f"slot {s.slot + 1}: " if len(slots) > 1 else ""
        return False, f"{where}recommended {s.pick} meets {s.pick_hits} of {s.visible} " \
            f"visible constraints; opened {b.token} meets {b.hits}"
    chosen = sum(len(s.candidates) >= 2 for s in slots)
    return True, f"every pick meets the most visible constraints among the products opened " \
        f"({chosen} of {_plural(len(slots), 'pick')} chosen among two or more)"


def check_asked_before_assuming(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """On a clarify task, the shopper was asked about everything the request held back
    before anything was recommended (the validator's own log says what was asked)."""
    d = ev.dialogue
    if d is None:
        return True, "no shopper to ask in this task"
    if ev.recommend_turn is None:
        return True, "nothing recommended"
    # The log counts turns from 1; the evidence from 0.
    asked = d.asked(before_turn=ev.recommend_turn + 1)
    guessed = [t for t in d.hidden if t not in asked]
    if guessed:
        return False, f"recommended in turn {ev.recommend_turn + 1} without asking about " \
            f"{_plural(len(guessed), 'held-back topic')} ({', '.join(guessed[:3])}) of " \
            f"{len(d.hidden)}"
    return True, f"asked about all {_plural(len(d.hidden), 'held-back topic')} before " \
        "recommending"


def check_asked_only_what_mattered(ev: Evidence, p: RubricParams) -> tuple[bool, str]:
    """On a clarify task, at most `max_wasted_questions` questions revealed nothing held
    back (asked about what the request stated, about nothing it constrains, or for the
    product itself)."""
    d = ev.dialogue
    if d is None or not d.questions:
        return True, "no question asked of the shopper"
    wasted = d.wasted()
    said = f"{wasted} of {_plural(d.questions, 'question')} revealed nothing held back"
    return wasted <= p.max_wasted_questions, said


CHECKS: dict[str, Check] = {
    "real_output": check_real_output,
    "no_judge_directed_text": check_no_judge_directed_text,
    "grounded_queries": check_grounded_queries,
    "searched_first": check_searched_first,
    "viewed_recommended": check_viewed_recommended,
    "claims_supported": check_claims_supported,
    "reasoning_matches_calls": check_reasoning_matches_calls,
    "decision_follows_constraints": check_decision_follows_constraints,
    "cites_observed_specifics": check_cites_observed_specifics,
    "compared_candidates": check_compared_candidates,
    "recovered": check_recovered,
    "asked_before_assuming": check_asked_before_assuming,
    "asked_only_what_mattered": check_asked_only_what_mattered,
}
"""The checks a rubric file may name, by criterion name."""
