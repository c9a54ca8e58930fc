"""Copies of the careful shopper: the miners a subnet must not pay twice.

``copycat`` replays, word for word, the episode ``careful`` plays with the seed just below
its own — in an arena, where each reference miner's seed is its uid, the careful miner
registered one uid before it. ``padder`` plays careful's episode for its own seed and opens
its pick once more just before recommending it: one extra ``view_product_information`` of a
product it had already opened, the cheapest way to make a call list differ. Neither adds a
decision: the same searches, the same products opened, the same picks. They are attacks on
the weights and on curation, played by name only (see ``paraphraser`` for the third copy,
careful's decisions with every sentence reworded).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from shopbench.agents.reference.careful import CarefulPolicy
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.records.tools import Tool


def careful_script(ctx: Context, seed: int) -> Script:
    """Careful's script for this request, as careful plays it with `seed`."""
    inner = Context(
        query=ctx.query, tools=ctx.tools, seed=seed, max_turns=ctx.max_turns,
        rng=random.Random(f"{CarefulPolicy.name}|{seed}|{ctx.query}"),
    )  # fmt: skip
    return CarefulPolicy(seed=seed).script(inner)


class CopycatPolicy(ScriptedPolicy):
    """Careful's episode for the seed below this one, word for word."""

    name = "copycat"
    honest = None  # an honest policy's replies under another name: a copy, not a cheat
    adversary = True

    def script(self, ctx: Context) -> Script:
        """Careful's steps as careful plays them with seed ``seed - 1``."""
        yield from careful_script(ctx, max(0, ctx.seed - 1))


class PadderPolicy(ScriptedPolicy):
    """Careful's episode with one more view of the pick before recommending it."""

    name = "padder"
    honest = None
    adversary = True

    def script(self, ctx: Context) -> Script:
        """Careful's steps; the first step that recommends is preceded by a view of the
        products it recommends (the results of that view are not passed on)."""
        careful = careful_script(ctx, ctx.seed)
        try:
            step = next(careful)
            padded = False
            while True:
                if not padded:
                    for extra in _one_more_look(step):
                        padded = True
                        yield extra
                results = yield step
                step = careful.send(results)
        except StopIteration:
            return


def _one_more_look(step: Step) -> Iterator[Step]:
    for name, args in step.calls:
        if name == Tool.RECOMMEND_PRODUCT and isinstance(args, dict) and args.get("product_ids"):
            yield Step(
                calls=[(Tool.VIEW_PRODUCT_INFORMATION, {"product_ids": args["product_ids"]})],
                reasoning="One more look at my pick before I recommend it.",
            )
            return
