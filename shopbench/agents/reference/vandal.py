"""The vandal: the careful shopper's episode, after one turn of arguments no reader can trust.

``vandal`` opens every episode with one turn of calls whose arguments are built to break
whoever reads them back: JSON nested 1,400 levels deep (2.8 KB, under the size cap), text
that is not JSON, ``NaN``, a number too large for a float (``1e400``) and an integer of
4,000 digits. The environment refuses each of them (an error observation, as for any bad
call); then the vandal shops exactly as ``careful`` does. Its records are what a hostile
miner leaves in an honest validator's archive: every reader of tool arguments (pages,
diffs, exports, training rows, curation, ``verify``) must show them as inert text and go on.
"""

from __future__ import annotations

import random

from shopbench.agents.reference.careful import CarefulPolicy
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.records.tools import Tool

DEEP = 1400  # levels of nesting in the deep call: ~2.8 KB of brackets

HOSTILE_ARGUMENTS: tuple[tuple[str, str], ...] = (
    (Tool.FIND_PRODUCT, '{"q": ' + "[" * DEEP + "]" * DEEP + "}"),
    (Tool.FIND_PRODUCT, "{q: shoes, page: one"),
    (Tool.FIND_PRODUCT, '{"q": "shoes", "page": NaN}'),
    (Tool.VIEW_PRODUCT_INFORMATION, '{"product_ids": 1e400}'),
    (Tool.FIND_PRODUCT, '{"q": "shoes", "page": ' + "9" * 4000 + "}"),
)
"""(tool, arguments text) of the vandal's first turn, one attack each."""


class VandalPolicy(ScriptedPolicy):
    """One turn of unreadable arguments, then the careful shopper's episode."""

    name = "vandal"
    honest = None  # careful's shopping after a turn of garbage: neither a cheat nor honest
    adversary = True

    def script(self, ctx: Context) -> Script:
        """A turn of hostile calls (their errors ignored), then careful's steps."""
        yield Step(
            calls=list(HOSTILE_ARGUMENTS),
            reasoning="Checking how the tools handle a few inputs first.",
        )
        inner = Context(
            query=ctx.query, tools=ctx.tools, seed=ctx.seed, max_turns=ctx.max_turns - 1,
            rng=random.Random(f"{CarefulPolicy.name}|{ctx.seed}|{ctx.query}"),
        )  # fmt: skip
        yield from CarefulPolicy(seed=ctx.seed).script(inner)
