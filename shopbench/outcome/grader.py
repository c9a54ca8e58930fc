"""The outcome grader: ShoppingBench's success rules, applied to recommended products.

Per graded product a rule score = satisfied constraints / constraints, where the constraints
are, as ShoppingBench counts them: each target title (title matcher), each price bound
(inclusive: "less than" is price <= hi, "greater than" price >= lo, "between" lo <= price <=
hi), each required service, and each requested key/value pair of the SKU option and the
attributes, matched exactly (case-sensitive) against the product's attributes united with its
best SKU option (the option that satisfies the most pairs). The exact target (same
product_id) scores 1 whatever its constraints say.

Which ids are graded: the first recommendation for product and knowledge tasks; the i-th for
slot i of shop and voucher tasks (missing ones score 0, extra ones are ignored, duplicates
are graded as given). Success per intent (each intent declares which of these rules it
grades under, as the task's :class:`~shopbench.outcome.spec.GradingRules`):

- product: rule score 1;
- shop: every slot filled, every rule score 1, exactly one shop;
- voucher: every rule score 1 and the budget holds (see :mod:`shopbench.outcome.budget`);
- knowledge: the key attribute appears (case-insensitive) in the title or the description,
  and the title matches at the knowledge threshold; its rule score is the mean of the two.
"""

from __future__ import annotations

from collections.abc import Sequence

from shopbench.catalog.schema import Product
from shopbench.outcome.budget import check_budget
from shopbench.outcome.spec import GradedTask, PriceBound, Slot
from shopbench.outcome.title import LexicalTitleMatcher, TitleMatcher
from shopbench.records.dialogue import Dialogue
from shopbench.records.outcome import ConstraintHit, ConstraintKind, Outcome, SlotGrade

DEFAULT_MATCHER: TitleMatcher = LexicalTitleMatcher()


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def _price_hit(bound: PriceBound, price: float) -> bool:
    if bound.mode == "less than":
        return bound.hi is not None and price <= bound.hi
    if bound.mode == "greater than":
        return bound.lo is not None and price >= bound.lo
    return bound.lo is not None and bound.hi is not None and bound.lo <= price <= bound.hi


def _price_text(bound: PriceBound) -> str:
    if bound.mode == "less than":
        return f"<= {_num(bound.hi)}"
    if bound.mode == "greater than":
        return f">= {_num(bound.lo)}"
    return f"{_num(bound.lo)}..{_num(bound.hi)}"


def _pair_checks(slot: Slot, product: Product) -> tuple[list[ConstraintHit], str | None]:
    """The SKU-option and attribute pairs against attributes ∪ the best SKU option."""
    wanted: list[tuple[ConstraintKind, str, str]] = []
    for option in slot.sku_options or []:
        wanted += [("sku", k, v) for k, v in option.items()]
    for attr in slot.attributes or []:
        wanted += [("attribute", k, v) for k, vs in attr.items() for v in vs]
    if not wanted:
        return [], None

    attrs = {(k, v) for k, vs in product.attributes.items() for v in vs}
    # No option at all is a candidate too: a product without SKUs is judged on attributes.
    options: list[tuple[str | None, dict[str, str]]] = [(None, {})]
    options += list(product.sku_options.items())
    best_key: str | None = None
    best_set: dict[str, str] = {}
    best_hits = -1
    for key, option in options:
        pairs = attrs | set(option.items())
        hits = sum((k, v) in pairs for _, k, v in wanted)
        if hits > best_hits:  # strict: the first option reaching the best count wins
            best_key, best_set, best_hits = key, option, hits
    pairs = attrs | set(best_set.items())

    out: list[ConstraintHit] = []
    for kind, k, v in wanted:
        hit = (k, v) in pairs
        if hit:
            actual = v
        else:
            have = sorted({val for key, val in pairs if key == k})
            actual = ", ".join(have) if have else "(absent)"
        out.append(ConstraintHit(kind=kind, name=k, expected=v, actual=actual, hit=hit))
    return out, best_key


def grade_slot(
    slot: Slot, product: Product, matcher: TitleMatcher | None = None, *, index: int = 0
) -> SlotGrade:
    """Grade one product against one slot of a product, shop or voucher task."""
    m = matcher or DEFAULT_MATCHER
    hits: list[ConstraintHit] = []
    for title in slot.title:
        tm = m.match(product.title, title)
        hits.append(
            ConstraintHit(
                kind="title",
                name="title",
                expected=title,
                actual=product.title,
                hit=tm.hit,
                score=tm.score,
            )
        )
    for bound in slot.price or []:
        hits.append(
            ConstraintHit(
                kind="price",
                name=f"price {bound.mode}",
                expected=_price_text(bound),
                actual=_num(product.price),
                hit=_price_hit(bound, product.price),
            )
        )
    for service in slot.service or []:
        hits.append(
            ConstraintHit(
                kind="service",
                name="service",
                expected=service,
                actual=",".join(product.service) or "(none)",
                hit=service in product.service,
            )
        )
    pair_hits, best_sku = _pair_checks(slot, product)
    hits += pair_hits
    n_hit = sum(h.hit for h in hits)
    exact = slot.product_id is not None and slot.product_id == product.product_id
    return SlotGrade(
        slot=index,
        product_id=product.product_id,
        shop_id=product.shop_id,
        price=product.price,
        exact_target=exact,
        best_sku=best_sku,
        constraints=hits,
        n_constraints=len(hits),
        n_hit=n_hit,
        rule_score=1.0 if exact else n_hit / len(hits),
    )


def _grade_knowledge(task: GradedTask, product: Product, matcher: TitleMatcher) -> SlotGrade:
    return grade_knowledge_slot(task.reward[0], task.knowledge_attribute or "", product, matcher)


def grade_knowledge_slot(
    slot: Slot, key: str, product: Product, matcher: TitleMatcher | None = None
) -> SlotGrade:
    """Grade one product against a knowledge task's slot and its key attribute `key`."""
    matcher = matcher or DEFAULT_MATCHER
    in_title = key.lower() in product.title.lower()
    in_desc = key.lower() in product.description.lower()
    key_hit = ConstraintHit(
        kind="key_attribute",
        name="key_attribute",
        expected=key,
        actual="title" if in_title else "description" if in_desc else "(absent)",
        hit=in_title or in_desc,
    )
    # A slot normally has one title; with several, the best-matching one counts.
    best = max(
        (matcher.match(product.title, t, knowledge=True) for t in slot.title),
        key=lambda tm: tm.score,
    )
    title_hit = ConstraintHit(
        kind="title",
        name="title",
        expected=slot.title[0],
        actual=product.title,
        hit=best.hit,
        score=best.score,
    )
    hits = [key_hit, title_hit]
    n_hit = sum(h.hit for h in hits)
    exact = slot.product_id is not None and slot.product_id == product.product_id
    return SlotGrade(
        slot=0,
        product_id=product.product_id,
        shop_id=product.shop_id,
        price=product.price,
        exact_target=exact,
        constraints=hits,
        n_constraints=2,
        n_hit=n_hit,
        rule_score=1.0 if exact else n_hit / 2,
    )


def _missed(g: SlotGrade) -> str:
    misses = [f"{h.name} {h.expected!r} (got {h.actual!r})" for h in g.constraints if not h.hit]
    return "; ".join(misses)


def grade(
    task: GradedTask,
    recommended: Sequence[Product | None],
    matcher: TitleMatcher | None = None,
    dialogue: Dialogue | None = None,
) -> Outcome:
    """Grade the products an agent recommended for `task`, in the order it recommended them.

    `recommended[i]` is None where the agent's id did not resolve to a product. Follows the
    module's rules; never raises on missing, duplicate or extra recommendations. A clarify
    episode's `dialogue` (the shopper's log) goes into the outcome: it decides nothing here,
    and the episode score takes its question cost.
    """
    m = matcher or DEFAULT_MATCHER
    n_slots = len(task.reward)
    rules = task.rules
    if rules.single_pick:
        graded: list[Product | None] = [recommended[0] if recommended else None]
    else:
        graded = [recommended[i] if i < len(recommended) else None for i in range(n_slots)]

    slots: list[SlotGrade] = []
    for i, (slot, product) in enumerate(zip(task.reward, graded, strict=True)):
        if product is None:
            slots.append(SlotGrade(slot=i, product_id=None))
        elif rules.answer:
            slots.append(_grade_knowledge(task, product, m))
        else:
            slots.append(grade_slot(slot, product, m, index=i))

    rule_scores = [g.rule_score for g in slots]
    shops = len({p.shop_id for p in graded if p is not None})
    budget = check_budget(task.voucher, graded) if task.voucher is not None else None

    reasons: list[str] = []
    missing = [g.slot + 1 for g in slots if g.product_id is None]
    if missing:
        what = "no product recommended" if n_slots == 1 else f"no product for slot(s) {missing}"
        reasons.append(what)
    for g in slots:
        if g.product_id is not None and g.rule_score < 1:
            where = "" if n_slots == 1 else f"slot {g.slot + 1} "
            reasons.append(f"{where}rule score {g.rule_score:.3f} < 1: missed {_missed(g)}")
    if rules.one_shop and not missing and shops != 1:
        reasons.append(f"products from {shops} shops; a {task.intent} task needs one")
    if budget is not None and not budget.holds and not missing:
        reasons.append(f"budget: {budget.reason}")

    return Outcome(
        task_id=task.id,
        intent=task.intent,
        success=not reasons,
        rule_scores=rule_scores,
        mean_rule=sum(rule_scores) / n_slots,
        slots=slots,
        shops=shops,
        budget=budget,
        reason="; ".join(reasons) or None,
        matcher=m.name,
        dialogue=dialogue,
    )
