"""Agents that never find anything: ``guesser`` invents ids, ``random`` acts at random.

``guesser`` recommends product ids it was never shown (the environment rejects them) and
terminates. ``random`` searches random words, views and recommends random products among
those shown, with no regard for the request; both sit at an ASR of zero.
"""

from __future__ import annotations

from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.records.tools import Tool

RANDOM_WORDS = (
    "gift", "set", "classic", "mini", "portable", "deluxe", "bundle", "kit", "holder",
    "cover", "stand", "organizer", "accessory", "refill", "spare", "replacement",
)  # fmt: skip
RANDOM_TURNS = (3, 8)


class GuesserPolicy(ScriptedPolicy):
    """Recommends made-up product ids without searching."""

    name = "guesser"
    honest = False

    def script(self, ctx: Context) -> Script:
        """Guess, then terminate."""
        ids = [str(ctx.rng.randrange(10**9, 10**10)) for _ in range(ctx.rng.randint(1, 3))]
        yield Step(
            calls=[(Tool.RECOMMEND_PRODUCT, {"product_ids": ",".join(ids)})],
            reasoning="I'm confident these products match the request.",
        )
        yield Step(calls=[(Tool.TERMINATE, {"status": "success"})], reasoning="Done.")


class RandomPolicy(ScriptedPolicy):
    """Random searches, random views, a random recommendation among what it was shown."""

    name = "random"

    def script(self, ctx: Context) -> Script:
        """A few random moves, then a random recommendation."""
        rng = ctx.rng
        shown: list[str] = []
        for _ in range(rng.randint(*RANDOM_TURNS)):
            if shown and rng.random() < 0.3:
                ids = rng.sample(shown, min(len(shown), rng.randint(1, 3)))
                step = Step(calls=[(Tool.VIEW_PRODUCT_INFORMATION, {"product_ids": ",".join(ids)})])
            else:
                q = " ".join(rng.sample(RANDOM_WORDS, rng.randint(1, 3)))
                step = Step(calls=[(Tool.FIND_PRODUCT, {"q": q, "page": rng.randint(1, 5)})])
            step.reasoning = "Let me try something."
            results = yield step
            for r in results:
                shown += [h.product_id for h in r.hits if h.product_id not in shown]
        if shown:
            yield Step(
                calls=[(Tool.RECOMMEND_PRODUCT, {"product_ids": rng.choice(shown)})],
                reasoning="This one.",
            )
        yield Step(calls=[(Tool.TERMINATE, {"status": "success"})], reasoning="Done.")
