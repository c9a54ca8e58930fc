"""The recommendation against what the validator knows: the task's constraints, the products
the agent opened, and what each observation showed.

A reader of the reasoning sees only words. The validator also holds the grader's record of
each graded slot (:class:`~shopbench.records.outcome.Outcome`: every constraint, met or
missed) and the trusted observations (:mod:`knowledge`). From them, per graded slot:

- **candidates**: the products whose details the agent opened before recommending and
  whose title the grader accepts for the slot (alternatives for the same need), plus the
  pick, each graded against the slot with the one grader
  (:func:`~shopbench.outcome.grader.grade_slot` on the slot rebuilt by
  :func:`~shopbench.outcome.constraints.slot_from_grade`), counting the *visible*
  constraints (price, service, SKU option, attribute) it meets;
- **better**: the candidates meeting more visible constraints than the pick;
- **rules**: among the products opened before recommending from the searches that listed
  the pick (the alternatives for the same need), which one each trivial rule
  (cheapest opened, first listed, most sold, first opened) would have picked, and which
  meet the most of the task's checkable constraints (the visible ones and a knowledge
  task's key attribute; a title is graded against a hidden target title, so it is left
  out) — what the round's decision check compares the miner's picks with;
- **misses**: the visible constraints the pick misses, and whether what the agent was shown
  revealed the miss (price and services show in every listing, SKU options and attributes
  in the details).

And **claims**: each sentence of the recommending turn and later ones (reasoning or final
message) that asserts the pick meets every requirement, or names a missed constraint's
value as met, and ``terminate(status="success")`` itself. A claim is *false* when the pick
misses a visible constraint whose miss the agent had been shown, *unsupported* when the
miss was never shown to it (details it never opened), and *true* otherwise. The slots the
recommendation left empty are kept beside them (**empty**): from rubric v4 on, a claim of
success with a slot empty is false whatever the filled slots hold.
"""

from __future__ import annotations

import re

from shopbench.catalog.schema import Product
from shopbench.judging.record import JudgedRecord
from shopbench.judging.rubric.facts import (
    RULES,
    Candidate,
    Claim,
    ClaimKind,
    Decisions,
    EvidenceRules,
    Miss,
    Shown,
    SlotDecision,
    TurnFacts,
)

__all__ = ["RULES", "Candidate", "Claim", "Decisions", "Miss", "SlotDecision", "decide"]
from shopbench.judging.rubric.grounding import fold
from shopbench.outcome.constraints import LISTED_KINDS, Regrader, visible
from shopbench.records.outcome import ConstraintHit, SlotGrade
from shopbench.records.tools import Tool
from shopbench.tasks.intent_registry import intent_spec

_SENTENCE = re.compile(r"(?:[^.!?;\n]|(?<=\d)\.(?=\d))+")  # "1,299.50" stays whole
_ID = re.compile(r"(?<!\d)\d{10}(?!\d)")
_SERVICE_WORDS: dict[str, tuple[str, ...]] = {
    "freeShipping": ("free shipping", "free delivery"),
    "COD": ("cash on delivery", "cod"),
    "official": ("official store", "official shop", "official seller"),
    "flashsale": ("flash sale", "flashsale"),
}
_NUMBER = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\d.,])\d+(?:\.\d+)?")


def _product(token: str, shown: Shown, record: JudgedRecord) -> Product | None:
    d = shown.details
    if d is None:
        return None
    # Built without validation: the grader reads these fields only, and they came from a
    # trusted observation the environment's own result model already validated.
    return Product.model_construct(
        product_id=record.token_map.get(token, token), shop_id=d.shop_id, brand="",
        category="", title=d.title, short_description="", description=d.description,
        specification="", price=d.price, sold_count=shown.sold or 0,
        sku_options=d.sku_options, attributes=d.attributes, service=list(d.service),
        base_id=None,
    )


def _rule_picks(cands: list[Candidate]) -> dict[str, str]:
    inf = float("inf")
    return {
        "cheapest_opened": min(
            cands, key=lambda c: (inf if c.price is None else c.price, c.order)
        ).token,
        "first_listed": min(cands, key=lambda c: (inf if c.listed is None else c.listed,
                                                  c.order)).token,
        "most_sold": min(cands, key=lambda c: (-(c.sold or 0), c.order)).token,
        "first_opened": min(cands, key=lambda c: (inf if c.opened is None else c.opened,
                                                  c.order)).token,
    }


def _seen_turn(kind: str, shown: Shown | None) -> int | None:
    if shown is None:
        return None
    if kind in LISTED_KINDS:
        return -1  # the listing that gave the agent the token showed price and services
    return shown.viewed_turn


def _candidate(token: str, s: Shown, hits: list[ConstraintHit]) -> Candidate:
    return Candidate(
        token=token, title_ok=all(h.hit for h in hits if h.kind == "title"),
        hits=sum(h.hit for h in hits if visible(h)),
        met=sum(h.hit for h in hits if h.kind != "title"),
        price=s.price, order=s.order, listed=s.listed, opened=s.opened, sold=s.sold,
    )


def _siblings(pick: str, turns: list[TurnFacts]) -> set[str]:
    """The products listed by the searches that listed `pick` (any page of the same words):
    the alternatives the agent had for the same need."""
    searches = [c for t in turns for c in t.calls if c.executed and c.name == Tool.FIND_PRODUCT]
    words = {str(c.arguments.get("q", "")) for c in searches if pick in c.shown}
    return {tok for c in searches if str(c.arguments.get("q", "")) in words for tok in c.shown}


def _slot_decision(
    grade: SlotGrade, pick: str, record: JudgedRecord, shown: dict[str, Shown],
    turns: list[TurnFacts], before: int, products: dict[str, Product | None],
) -> SlotDecision | None:
    regrader = Regrader(grade)
    if not regrader.ok:
        return None
    n_visible = sum(visible(h) for h in grade.constraints)
    pick_shown = shown.get(pick)
    misses = [
        Miss(slot=grade.slot, kind=h.kind, name=h.name, expected=h.expected, actual=h.actual,
             seen_turn=_seen_turn(h.kind, pick_shown))
        for h in grade.constraints if visible(h) and not h.hit and not grade.exact_target
    ]  # fmt: skip
    if pick_shown is None:
        return SlotDecision(grade.slot, pick, n_visible, 0, [], [], [], set(), {}, misses)
    mine = _candidate(pick, pick_shown, grade.constraints)
    opened = [mine]
    for token, s in shown.items():
        if token == pick or s.viewed_turn is None or s.viewed_turn >= before:
            continue
        if token not in products:  # built once, graded against every slot
            products[token] = _product(token, s, record)
        product = products[token]
        if product is not None:
            opened.append(_candidate(token, s, regrader.constraints(product)))
    opened.sort(key=lambda c: c.order)
    candidates = [c for c in opened if c.title_ok or c.token == pick]
    siblings = _siblings(pick, turns)
    pool = [c for c in opened if c.token in siblings or c.token == pick]
    top = max(c.met for c in pool)
    return SlotDecision(
        slot=grade.slot, pick=pick, visible=n_visible, pick_hits=mine.hits,
        candidates=candidates, better=[c for c in candidates if c.hits > mine.hits],
        pool=pool, best={c.token for c in pool if c.met == top}, rules=_rule_picks(pool),
        misses=misses,
    )


def _negated(sentence: str, upto: int, negations: frozenset[str]) -> bool:
    head = sentence[:upto]
    return any(w in negations for w in re.findall(r"[a-z']+", head)) or "n't" in head


def _value_words(m: Miss) -> list[str]:
    if m.kind == "service":
        return list(_SERVICE_WORDS.get(m.expected, (fold(m.expected),)))
    if m.kind == "price":
        return []
    return [fold(m.expected)] if len(m.expected) >= 3 else []


def _bound_numbers(m: Miss) -> set[float]:
    return {float(x) for x in re.findall(r"\d+(?:\.\d+)?", m.expected)} if m.kind == "price" \
        else set()


def _judge(misses: list[Miss], turn: int, kind: ClaimKind, said: str) -> Claim:
    seen = [m for m in misses if m.seen_before(turn)]
    if seen:
        return Claim(turn, kind, said, "false", f"misses {seen[0].text()}, shown to the agent")
    if misses:
        return Claim(turn, kind, said, "unsupported",
                     f"misses {misses[0].text()}, in details the agent never opened")
    return Claim(turn, kind, said, "true", "every visible constraint holds")


def _claims(
    turns: list[TurnFacts], start: int, by_pick: dict[str, list[Miss]], rules: EvidenceRules
) -> list[Claim]:
    """The claims of the recommending turn and later ones. A sentence's subject is the
    picks it names by id, else the picks the turn named last ("this one fits"), else all
    of them; a sentence naming only other products is about them."""
    everything = [m for ms in by_pick.values() for m in ms]
    out: list[Claim] = []
    for t in turns[start:]:
        folded = fold(t.text)
        subject: list[Miss] = everything
        for sm in _SENTENCE.finditer(folded):
            sentence = sm.group(0)
            ids = set(_ID.findall(sentence))
            if ids:
                named = [p for p in by_pick if p in ids]
                if not named:
                    continue  # about other products
                subject = [m for p in named for m in by_pick[p]]
            for pattern in rules.claim_patterns:
                m = pattern.search(sentence)
                if m and not _negated(sentence, m.start(), rules.negations):
                    out.append(_judge(subject, t.index, "all", m.group(0)[:80]))
                    break
            else:
                for miss in subject:
                    said = _names_value(sentence, miss, rules.negations)
                    if said:
                        out.append(_judge([miss], t.index, "value", said))
                        break
        if any(
            c.executed and c.name == Tool.TERMINATE and c.error is None
            and str(c.arguments.get("status", "")).strip().lower() == "success"
            for c in t.calls
        ):
            out.append(_judge(everything, t.index, "status", 'terminate(status="success")'))
    return out


def _names_value(sentence: str, miss: Miss, negations: frozenset[str]) -> str:
    for words in _value_words(miss):
        at = re.search(rf"(?<![\w]){re.escape(words)}(?![\w])", sentence)
        if at and not _negated(sentence, at.start(), negations):
            return words
    bounds = _bound_numbers(miss)
    if bounds:
        for nm in _NUMBER.finditer(sentence):
            value = float(nm.group(0).replace(",", ""))
            if value in bounds and not _negated(sentence, nm.start(), negations):
                return nm.group(0)
    return ""


def decide(
    record: JudgedRecord,
    shown: dict[str, Shown],
    turns: list[TurnFacts],
    recommended: list[str],
    recommend_turn: int | None,
    rules: EvidenceRules,
) -> Decisions | None:
    """The recommendation's decisions and claims, or None when nothing graded was
    recommended (no outcome, no accepted recommendation)."""
    outcome = record.outcome
    if outcome is None or recommend_turn is None or not recommended:
        return None
    picks = recommended[:1] if intent_spec(outcome.intent).grading.single_pick else recommended
    out = Decisions(empty=[g.slot for g in outcome.slots if g.product_id is None])
    products: dict[str, Product | None] = {}
    for grade, pick in zip(outcome.slots, picks, strict=False):
        if grade.product_id is None or not pick:
            continue
        d = _slot_decision(grade, pick, record, shown, turns, recommend_turn, products)
        if d is not None:
            out.slots.append(d)
    if not out.slots:
        return out
    by_pick: dict[str, list[Miss]] = {}
    for slot in out.slots:
        by_pick.setdefault(slot.pick, []).extend(slot.misses)
    out.claims = _claims(turns, recommend_turn, by_pick, rules)
    return out
