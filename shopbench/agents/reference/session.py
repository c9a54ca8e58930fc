"""The careful shopper's moves, shared by the careful and trial-and-error policies.

A :class:`Session` wraps one replayed script: it counts turns, keeps what the agent has seen
(search hits, viewed products) and offers the moves a careful shopper makes — search with
the request's filters, open the closest matches, check them, compare, reformulate after an
empty or off-target page — each as a sub-generator to ``yield from``. Reasoning is written
for every move from the facts at hand, with a note carried into the next turn after a view
(the comparison of what was just seen).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from shopbench.agents.reference.checks import (
    TITLE_OK,
    Check,
    Wanted,
    check_all,
    closeness,
    worth_opening,
)
from shopbench.agents.reference.observations import CallResult
from shopbench.agents.reference.prose import (
    Writer,
    listing,
    money,
    need_words,
    short_title,
)
from shopbench.agents.reference.query_reading import (
    ItemNeed,
    Reading,
    read_price,
    read_services,
)
from shopbench.agents.reference.script import Context, Step
from shopbench.env.results import ProductDetails, ProductHit
from shopbench.records.tools import Tool

MAX_PAGES = 5
VIEW_BATCH = 10
TERSE_MAX = 118  # characters of the terse shopper's one sentence
CLOSING_TURNS = 3  # kept back from the turn budget to recommend and terminate

Moves = Generator[Step, list[CallResult], Any]


@dataclass(slots=True)
class Found:
    """What the search for one item came to: the pick (None if nothing met every
    requirement) and everything checked, best first."""

    pick: Check | None
    checks: list[Check] = field(default_factory=list)

    @property
    def best(self) -> Check | None:
        """The pick, or the closest miss."""
        return self.pick or (self.checks[0] if self.checks else None)


def other_clauses(item: ItemNeed) -> list[str]:
    """The item's clauses that are neither price nor service (attribute values, as written)."""
    rest = item.text
    at = rest.find(item.phrase)
    if at >= 0:
        rest = rest[at + len(item.phrase) :]
    out: list[str] = []
    for raw in rest.replace(" — ", ", ").replace("; ", ", ").split(", "):
        part = raw.split(". ")[0].strip(" .?!\"")
        for lead in ("and ", "It should be ", "I want it ", "Requirements: ", "It has to be ",
                     "It must be "):
            if part.startswith(lead):
                part = part[len(lead) :]
        if not part or read_price(part) or read_services(part):
            continue
        if any(w in part for w in (" with ", " in ", ":", " of ", " is ", "having ")) or (
            part.split(" ", 1)[0] in ("with", "in", "having", "where")
        ):
            out.append(part)
    return out


class Session:
    """One replayed episode of a careful shopper."""

    def __init__(self, ctx: Context, reading: Reading, writer: Writer) -> None:
        self.ctx = ctx
        self.reading = reading
        self.w = writer
        self.turns = 0
        self.note = ""  # reasoning carried into the next turn (what the last results showed)
        self.brief = ""  # the terse shopper's clause about the last results
        self.viewed: dict[str, ProductDetails] = {}
        self.hits: dict[str, ProductHit] = {}

    # -- turns -------------------------------------------------------------------------------

    @property
    def turns_left(self) -> int:
        """Turns left for searching before the agent must recommend."""
        return self.ctx.max_turns - CLOSING_TURNS - self.turns

    def ask(self, step: Step) -> Moves:
        """Play one turn; return its results. The carried note opens the reasoning."""
        if self.note and step.reasoning is not None and not self.w.terse:
            step.reasoning = f"{self.note} {step.reasoning}"
        if self.brief and step.reasoning and self.w.terse:
            joined = f"{self.brief}; {step.reasoning[:1].lower()}{step.reasoning[1:]}"
            step.reasoning = joined if len(joined) <= TERSE_MAX else step.reasoning
        self.note = self.brief = ""
        results = yield step
        self.turns += 1
        for r in results:
            for h in r.hits:
                self.hits.setdefault(h.product_id, h)
            for d in r.details:
                self.viewed[d.product_id] = d
        return results

    # -- arguments ---------------------------------------------------------------------------

    def words_for(self, item: ItemNeed) -> str:
        """What the shopper types to search for the item: its name as the request gives it."""
        return item.phrase

    @staticmethod
    def search_args(
        item: ItemNeed,
        q: str,
        page: int = 1,
        *,
        shop_id: str | None = None,
        sort: str | None = None,
        filters: bool = True,
    ) -> dict[str, Any]:
        """find_product arguments for the item: its words, its price bound and services."""
        args: dict[str, Any] = {"q": q, "page": page}
        if shop_id:
            args["shop_id"] = shop_id
        if filters and item.price is not None:
            args["price"] = item.price.filter()
        if filters and item.services:
            args["service"] = ",".join(item.services)
        if sort:
            args["sort"] = sort
        return args

    def filter_words(self, item: ItemNeed) -> str:
        """The filters of a search in words, for the reasoning."""
        parts: list[str] = []
        if item.price is not None:
            parts.append(f'price "{item.price.filter()}"')
        if item.services:
            parts.append(f'service "{",".join(item.services)}"')
        return listing(parts)

    # -- describing --------------------------------------------------------------------------

    def describe_need(self, item: ItemNeed) -> str:
        """The item and its requirements in a sentence."""
        needs = need_words(item)
        extra = other_clauses(item)
        text = f'"{item.phrase}"'
        if needs or extra:
            text += " that is " + listing([*needs, *(f'"{c}"' for c in extra)])
        return text

    def describe_hits(self, hits: list[ProductHit], wanted: Wanted, n: int = 3) -> str:
        """The closest hits of a page, with their prices."""
        ranked = sorted(hits, key=lambda h: closeness(wanted, h.title), reverse=True)[:n]
        shown = [f'"{short_title(h.title)}" at {money(h.price)}' for h in ranked]
        return listing(shown)

    def describe_check(self, c: Check) -> str:
        """One checked product: what it is, what it costs, what holds and what does not."""
        d = c.details
        head = f'"{short_title(d.title)}" ({d.product_id}, {money(d.price)})'
        if c.ok:
            met = listing(c.met[1:4]) or "the title matches"
            return f"{head} fits: {met}"
        return f"{head} misses: {listing(c.misses[:3])}"

    @staticmethod
    def brief_pair(a: Check, b: Check | None) -> str:
        """One or two checked candidates in a clause: id, price and whether each fits (the
        terse shopper's comparison)."""

        def one(c: Check) -> str:
            d = c.details
            return f"{d.product_id} ({money(d.price)}) {'fits' if c.ok else 'does not'}"

        return one(a) if b is None else f"{one(a)}, {one(b)}"

    def compare(self, checks: list[Check], item: ItemNeed) -> str:
        """Two or more candidates side by side, and which one wins."""
        if not checks:
            return ""
        top = checks[:3]
        lines = [self.describe_check(c) for c in top]
        ok = [c for c in top if c.ok]
        if len(top) == 1:
            verdict = ""
        elif ok and len(ok) >= 2:
            a, b = ok[0], ok[1]
            why = (
                f"it is cheaper ({money(a.details.price)} vs {money(b.details.price)})"
                if a.details.price < b.details.price
                else f"its title is closer to \"{short_title(item.phrase, 50)}\""
            )
            verdict = self.w.pick(
                f"Both fit, but I prefer the first because {why}.",
                f"Between the two that fit, the first wins since {why}.",
                f"Either would do; I'll take the first because {why}.",
            )
        elif ok:
            verdict = self.w.pick(
                "Only the first one meets every requirement.",
                "So the first is the only one that satisfies everything.",
                "That leaves the first as the one that checks every box.",
            )
        else:
            verdict = self.w.pick(
                "None of these meets everything yet.",
                "So far nothing satisfies all the requirements.",
                "None of them fits completely, so I need to keep looking.",
            )
        lead = self.w.pick(
            "Comparing what I opened:", "Checking the details:", "Looking at the details:"
        )
        return self.w.paragraph([lead, "; ".join(lines) + ".", verdict])

    # -- moves -------------------------------------------------------------------------------

    def view(self, ids: list[str], why: str, short: str) -> Moves:
        """Open products; return their details (in the order shown)."""
        step = Step(
            calls=[(Tool.VIEW_PRODUCT_INFORMATION, {"product_ids": ",".join(ids)})],
            reasoning=self.w.turn([why], short),
        )
        results = yield from self.ask(step)
        return [d for r in results for d in r.details]

    def find(
        self,
        item: ItemNeed,
        *,
        q: str | None = None,
        wanted_title: Wanted | None = None,
        must_mention: str | None = None,
        intro: str = "",
        shop_id: str | None = None,
        pages: int = MAX_PAGES,
        title_min: float = TITLE_OK,
    ) -> Moves:
        """Search for one item page by page, open the closest titles, check them; return
        :class:`Found` with the first product meeting every requirement (or the closest)."""
        query = q or self.words_for(item)
        wanted = wanted_title or item.phrase
        mine: dict[str, ProductDetails] = {}
        checks: list[Check] = []
        reformulated = False
        page = 1
        while page <= pages and self.turns_left > 0:
            args = self.search_args(item, query, page, shop_id=shop_id)
            filters = self.filter_words(item)
            if page == 1:
                plan = self.w.pick(
                    f'I\'ll search for "{query}"',
                    f'Let me search for "{query}"',
                    f'First a search for "{query}"',
                )
                plan += f" with {filters}." if filters else ", no filters needed."
                why = [intro, plan]
                short = f'Searching "{short_title(query, 48)}"' + (
                    " with filters." if filters else "."
                )
            else:
                why = [self.w.pick(
                    f"Let me look at page {page} of the same search.",
                    f"I'll check page {page} for more candidates.",
                    f"Moving on to page {page}.",
                )]
                short = f"Checking page {page}."
            intro = ""
            results = yield from self.ask(
                Step(calls=[(Tool.FIND_PRODUCT, args)], reasoning=self.w.turn(why, short))
            )
            r = results[0]
            if not r.ok or not r.hits:
                if page == 1 and not reformulated:
                    shorter = _loosen(query)
                    reason = r.error or "no results"
                    self.note = self.w.pick(
                        f'The search for "{query}" gave {reason}.',
                        f'Nothing usable came back for "{query}" ({reason}).',
                    ) + f' I\'ll loosen the wording to "{shorter}".'
                    query, reformulated = shorter, True
                    continue
                self.note = f"Page {page} is empty, so the search is exhausted."
                break
            fresh = [h for h in r.hits if h.product_id not in mine]
            ranked = sorted(fresh, key=lambda h: closeness(wanted, h.title), reverse=True)
            picks = [h for h in ranked if worth_opening(wanted, h.title)][:VIEW_BATCH]
            if not picks:
                closest = ranked[0] if ranked else r.hits[0]
                self.note = self.w.pick(
                    f'These results are off target: the closest, "{short_title(closest.title)}"'
                    f" ({money(closest.price)}), is a different product.",
                    f'Page {page} doesn\'t have it — the nearest title is '
                    f'"{short_title(closest.title)}" at {money(closest.price)}.',
                )
                self.brief = f"{closest.product_id} ({money(closest.price)}) is off target"
                page += 1
                continue
            seen = self.describe_hits(r.hits, wanted)
            why_view = self.w.pick(
                f"The search returned {len(r.hits)} products; the closest are {seen}.",
                f"{len(r.hits)} results. The most relevant look like {seen}.",
                f"Got {len(r.hits)} hits, among them {seen}.",
            ) + " " + self.w.pick(
                f"Titles alone don't tell me everything, so I'll open the {len(picks)} best"
                " matches and check their details.",
                f"I need the details to verify the requirements; opening {len(picks)} of them.",
                f"Let me view the {len(picks)} that look right and check each requirement.",
            )
            details = yield from self.view(
                [h.product_id for h in picks], why_view, f"Opening the {len(picks)} closest."
            )
            for d in details:
                mine[d.product_id] = d
            checks = check_all(
                item, list(mine.values()), wanted_title=wanted, must_mention=must_mention,
                title_min=title_min,
            )
            self.note = self.compare(checks, item)
            if checks:
                self.brief = self.brief_pair(checks[0], checks[1] if len(checks) > 1 else None)
            good = [c for c in checks if c.ok]
            if good:
                return Found(pick=good[0], checks=checks)
            page += 1
        return Found(pick=None, checks=checks)

    def finish(self, picks: list[Check | None], all_ok: bool) -> Moves:
        """Recommend the picks (in item order) and terminate."""
        chosen = [c for c in picks if c is not None]
        if not chosen:
            yield from self.ask(
                Step(
                    calls=[(Tool.TERMINATE, {"status": "failure"})],
                    reasoning=self.w.turn(
                        [self.w.pick(
                            "I could not find anything that satisfies the request, so I'll end"
                            " here and report failure.",
                            "Nothing in the catalog fits; ending with failure.",
                        )],
                        "Nothing fits; ending.",
                    ),
                )
            )
            return
        ids = [c.details.product_id for c in chosen]
        summary = listing([
            f'"{short_title(c.details.title, 50)}" ({c.details.product_id}) at '
            f"{money(c.details.price)}"
            for c in chosen
        ])
        if all_ok:
            why = self.w.pick(
                f"Everything checks out. I'll recommend {summary}.",
                f"That settles it: {summary} meets every requirement, so I'll recommend it.",
                f"I'm confident in {summary}; recommending now.",
            )
        else:
            why = self.w.pick(
                f"I couldn't satisfy every requirement; the closest I found is {summary}, so I'll"
                " recommend that and say it is not a full match.",
                f"Not a perfect fit, but {summary} is the nearest match I found.",
            )
        yield from self.ask(
            Step(
                calls=[(Tool.RECOMMEND_PRODUCT, {"product_ids": ",".join(ids)})],
                reasoning=self.w.turn([why], f"Recommending {', '.join(ids)}."),
            )
        )
        status = "success" if all_ok else "failure"
        yield from self.ask(
            Step(
                calls=[(Tool.TERMINATE, {"status": status})],
                reasoning=self.w.turn(
                    [self.w.pick(
                        "The recommendation went through, so I can close the task.",
                        "Recommended; wrapping up.",
                        "That's done — ending the session.",
                    )],
                    "Done.",
                ),
                content=_closing(chosen, all_ok),
            )
        )


def _closing(chosen: list[Check], all_ok: bool) -> str:
    names = listing([f"{short_title(c.details.title, 60)} ({money(c.details.price)})"
                     for c in chosen])
    if all_ok:
        return f"I recommend {names}; it meets every requirement you listed."
    return f"The closest match I found is {names}, though it does not meet every requirement."


def _loosen(q: str) -> str:
    """A looser wording: the first content words of the query (at least two)."""
    words = q.split()
    keep = max(2, min(len(words) - 1, 4))
    return " ".join(words[:keep]) if len(words) > 2 else q


def needs_sentence(w: Writer, reading: Reading, session: Session) -> str:
    """The opening read of the request: what is wanted, with every stated requirement."""
    items = reading.items
    if len(items) == 1:
        body = f"The customer wants {session.describe_need(items[0])}."
    else:
        listed = "; ".join(f"({i}) {session.describe_need(it)}" for i, it in enumerate(items, 1))
        body = f"There are {len(items)} items: {listed}."
    extra = ""
    if reading.same_shop:
        extra = " All of them must come from the same shop, so I'll need a shop that has each."
    v = reading.voucher
    if v is not None:
        rule = (
            f"{money(v.value)} off" if v.kind == "fixed"
            else f"{v.value:g}% off (capped at {money(v.cap or 0)})"
        )
        scope = "on items from one shop" if v.scope == "shop" else "on everything"
        extra += (
            f" The budget is {money(v.budget)}, with a voucher of {rule} {scope} once the total"
            f" reaches {money(v.threshold)}."
        )
    return w.paragraph([w.opener(), body + extra])
