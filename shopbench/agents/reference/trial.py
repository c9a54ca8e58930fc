"""The trial-and-error shopper: tries a loose search first, notices it failed, recovers.

It starts the way a hasty agent does — a few words of the item, the price bound pasted as
the customer wrote it — reads the error or the misfit products that come back, says what
went wrong, and then shops carefully: the full item name, well-formed filters, checks and
comparisons. These recovery traces are what the arena is short of.
"""

from __future__ import annotations

from shopbench.agents.reference.careful import careful_plan
from shopbench.agents.reference.checks import check_all
from shopbench.agents.reference.prose import Writer, listing, money, short_title
from shopbench.agents.reference.query_reading import read_query
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.agents.reference.session import Moves, Session, needs_sentence
from shopbench.records.tools import Tool

LOOSE_WORDS = 2
LOOSE_VIEW = 3


def loose_try(s: Session) -> Moves:
    """The hasty first attempt and what the agent learns from it."""
    item = s.reading.items[0]
    loose = " ".join(item.phrase.split()[:LOOSE_WORDS]) or item.phrase
    args: dict[str, object] = {"q": loose, "page": 1}
    if item.price is not None:
        args["price"] = item.price.text  # as the customer wrote it, not "lo-hi"
    intro = s.w.paragraph([
        needs_sentence(s.w, s.reading, s),
        s.w.pick(
            f'A quick search for "{loose}" should show what the shop has.',
            f'I\'ll try a broad search for "{loose}" first.',
        ),
    ])
    results = yield from s.ask(
        Step(calls=[(Tool.FIND_PRODUCT, args)], reasoning=s.w.turn([intro], f'Trying "{loose}".'))
    )
    r = results[0]
    if not r.ok:
        fix = f'"{item.price.filter()}"' if item.price is not None else "a valid value"
        s.note = s.w.pick(
            f"That failed: {r.error} The price filter has to be a range like {fix}, not the"
            " customer's words.",
            f"Error — {r.error} I passed the price as written; it needs the form {fix}.",
        ) + " " + s.w.pick(
            "Two words were too vague anyway; I'll search the full name with proper filters.",
            "I'll also use the full product name this time.",
        )
        return
    if not r.hits:
        s.note = f'"{loose}" found nothing. I\'ll use the full product name and the filters.'
        return
    ids = [h.product_id for h in r.hits[:LOOSE_VIEW]]
    seen = listing([f'"{short_title(h.title, 50)}" at {money(h.price)}' for h in r.hits[:3]])
    details = yield from s.view(
        ids,
        f"The broad search shows {seen}. Let me open the first {len(ids)} and see if any fits.",
        f"Opening the first {len(ids)}.",
    )
    checks = check_all(item, details)
    misses = [c for c in checks if not c.ok]
    if misses:
        c = misses[0]
        s.note = s.w.pick(
            f'None of those work: "{short_title(c.details.title, 50)}" misses '
            f"{listing(c.misses[:2])}.",
            f'That was too loose — "{short_title(c.details.title, 50)}" at '
            f"{money(c.details.price)} fails: {listing(c.misses[:2])}.",
        ) + " " + s.w.pick(
            "I need the full name and the filters from the request.",
            "Let me redo this properly with every requirement as a filter where possible.",
        )
    else:
        s.note = (
            "One of these happens to fit, but I got lucky; let me search properly to be sure"
            " it's the best option."
        )


class TrialAndErrorPolicy(ScriptedPolicy):
    """Loose queries first, notices the failure, then recovers with the careful moves."""

    name = "trial_and_error"
    honest = True

    def script(self, ctx: Context) -> Script:
        """A hasty start, the lesson drawn from it, then careful shopping."""
        reading = read_query(ctx.query, knowledge=ctx.offers(Tool.WEB_SEARCH))
        s = Session(ctx, reading, Writer(ctx.rng))
        yield from loose_try(s)
        picks, all_ok = yield from careful_plan(s)
        yield from s.finish(picks, all_ok)
