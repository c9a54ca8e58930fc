"""What the validator knows and the agent's words cannot show: the recommendation against the
task's constraints, the alternatives the agent opened, and how its claims stand.

The rubric computes these facts (:mod:`shopbench.judging.rubric.decisions`); the LLM judge is
given them in its prompt, so that it judges the decision and the claims on the grader's
record rather than on how the reasoning sounds. No hidden answer is shown: only the visible
constraints (price bound, service, SKU option, attribute value), which the request states.
"""

from __future__ import annotations

from shopbench.judging.rubric.decisions import Decisions
from shopbench.packs.pack import pack_facts
from shopbench.records.outcome import Outcome

NO_FACTS = (
    "(no graded recommendation: there is no recommended product to check decisions or claims "
    "against)"
)


def facts_text(
    decisions: Decisions | None,
    outcome: Outcome | None = None,
    recommend_turn: int | None = None,
) -> str:
    """The facts as the prompt lists them, one line each; the lines of the episode's tool
    packs last (a clarify episode's shopper log: :func:`~shopbench.packs.pack.pack_facts`),
    from its graded `outcome` and the turn of its recommendation."""
    asking = pack_facts(outcome, recommend_turn)
    if decisions is None or not decisions.slots:
        return "\n".join([NO_FACTS, *asking])
    lines: list[str] = []
    for s in decisions.slots:
        head = f"Item {s.slot + 1}: recommended {s.pick}"
        if not s.visible:
            lines.append(f"{head}; the item has no visible constraint to check.")
            continue
        lines.append(f"{head}; it meets {s.pick_hits} of {s.visible} visible constraints.")
        for m in s.misses:
            seen = "shown to the agent" if m.seen_turn is not None else \
                "in details the agent never opened"
            lines.append(f"  missed: {m.text()}, {seen}")
        others = [c for c in s.candidates if c.token != s.pick]
        if others:
            listed = ", ".join(f"{c.token} meets {c.hits}" for c in others[:10])
            lines.append(f"  other opened products with the item's title: {listed}")
        if s.better:
            lines.append(
                "  a product the agent opened meets more visible constraints than its pick: "
                + ", ".join(c.token for c in s.better[:5])
            )
    if decisions.claims:
        for c in decisions.claims[:8]:
            turn = f"turn {c.turn + 1}"
            lines.append(f"Claim in {turn}: {c.said!r} is {c.verdict} ({c.why}).")
    else:
        lines.append("The agent makes no claim that its recommendation meets the requirements.")
    return "\n".join([*lines, *asking])
