"""The careful shopper: reads every constraint, searches with filters, checks, compares.

``careful`` reads the request (price bounds, services, attribute values, one shop, the
voucher, the question to look up), searches with the request's filters, opens the closest
matches, checks each requirement against the details, compares at least two candidates
with their prices and attributes, reformulates after empty or off-target results, then
recommends and terminates. ``careful_terse`` makes exactly the same calls with one short
sentence of reasoning per turn. On a clarify request it first asks the shopper about each
thing the request holds back; ``presumer`` never asks and ``interrogator`` asks about
everything (:mod:`.asking`), and both otherwise shop as it does.
"""

from __future__ import annotations

from typing import ClassVar

from shopbench.agents.reference.asking import Asking, ask_moves
from shopbench.agents.reference.knowledge import knowledge_moves
from shopbench.agents.reference.multi import shop_moves, voucher_moves
from shopbench.agents.reference.prose import Writer
from shopbench.agents.reference.query_reading import read_query
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy
from shopbench.agents.reference.session import Moves, Session, needs_sentence
from shopbench.records.tools import Tool


def careful_plan(s: Session, asking: Asking = "needed") -> Moves:
    """Find the products for the whole request; return (picks in item order, all_ok). A
    clarify request's held-back part is asked about first, as `asking` says."""
    kind = s.reading.kind
    held = s.reading.held_back
    if held is not None and s.ctx.offers(Tool.ASK_SHOPPER) and len(s.reading.items) == 1:
        s.reading.items[0] = yield from ask_moves(s, s.reading.items[0], held, asking)
    if kind == "knowledge":
        return (yield from knowledge_moves(s))
    if kind == "shop":
        return (yield from shop_moves(s))
    if kind == "voucher":
        return (yield from voucher_moves(s))
    picks = []
    all_ok = True
    for i, item in enumerate(s.reading.items):
        intro = needs_sentence(s.w, s.reading, s) if i == 0 else f"Now item {i + 1}."
        found = yield from s.find(item, intro=intro)
        picks.append(found.best)
        all_ok = all_ok and found.pick is not None
    return picks, all_ok


class CarefulPolicy(ScriptedPolicy):
    """Reads the constraints, searches with filters, checks details, compares, recommends."""

    name = "careful"
    honest: ClassVar[bool | None] = True
    terse = False
    asking: ClassVar[Asking] = "needed"
    """How it asks the shopper of a clarify request (:mod:`.asking`)."""

    def script(self, ctx: Context) -> Script:
        """The careful shopper's episode."""
        reading = read_query(ctx.query, knowledge=ctx.offers(Tool.WEB_SEARCH))
        s = Session(ctx, reading, Writer(ctx.rng, terse=self.terse))
        picks, all_ok = yield from careful_plan(s, self.asking)
        yield from s.finish(picks, all_ok)


class CarefulTersePolicy(CarefulPolicy):
    """The careful shopper's exact calls, with one short sentence of reasoning per turn."""

    name = "careful_terse"
    terse = True


class PresumerPolicy(CarefulPolicy):
    """The careful shopper that never asks: a clarify request's hints go unheeded, and it
    shops for what the request states."""

    name = "presumer"
    honest = False  # on a clarify task it guesses what it was told to ask: a judge scores it low
    asking = "never"


class InterrogatorPolicy(CarefulPolicy):
    """The careful shopper that asks about everything before it shops: the price, the
    services and every attribute it can think of, until the shopper answers no more."""

    name = "interrogator"
    honest = None
    asking = "everything"
