"""What the validator knows and the agent's words cannot show: the recommendation against the
task's constraints, the alternatives the agent opened, and how its claims stand.

The rubric computes these facts (:mod:`shopbench.judging.rubric.decisions`); the LLM judge is
given them in its prompt, so that it judges the decision and the claims on the grader's
record rather than on how the reasoning sounds. No hidden answer is shown: only the visible
constraints (price bound, service, SKU option, attribute value), which the request states.
"""

from __future__ import annotations

from shopbench.judging.rubric.decisions import Decisions
from shopbench.records.dialogue import Dialogue

NO_FACTS = (
    "(no graded recommendation: there is no recommended product to check decisions or claims "
    "against)"
)


def dialogue_lines(dialogue: Dialogue | None, recommend_turn: int | None) -> list[str]:
    """A clarify episode's shopper log as the prompt lists it: which topics the request held
    back (never their values), which were asked before the recommendation, and how many
    questions revealed nothing held back."""
    if dialogue is None:
        return []
    before = None if recommend_turn is None else recommend_turn + 1
    asked = dialogue.asked(before_turn=before)
    done = ", ".join(t for t in dialogue.hidden if t in asked) or "none"
    missing = ", ".join(t for t in dialogue.hidden if t not in asked) or "none"
    when = "before the recommendation" if before is not None else "in the episode"
    return [
        f"The request held back (the shopper answers ask_shopper about them): "
        f"{', '.join(dialogue.hidden)}.",
        f"Asked {when}: {done}; never asked: {missing}.",
        f"{dialogue.wasted()} of {dialogue.questions} questions revealed nothing held back.",
    ]


def facts_text(
    decisions: Decisions | None,
    dialogue: Dialogue | None = None,
    recommend_turn: int | None = None,
) -> str:
    """The facts as the prompt lists them, one line each (a clarify episode's shopper log
    last)."""
    asking = dialogue_lines(dialogue, recommend_turn)
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
