"""The shopper pack: ``ask_shopper``, the customer a clarify task's agent asks about what
its request held back.

The validator's shopper (its handler, :mod:`shopbench.env.shopper`) answers from the task's
hidden card and logs each answered question (:class:`~shopbench.records.dialogue.Dialogue`,
in the outcome). Here is how the other layers show that conversation: an answer is the
customer's words (an ATIF user step, a row of the episode page's dialogue), the judge's
facts say which held-back topics were asked, and a replay offers an LLM shopper's archived
words in place of the rules' answer.
"""

from __future__ import annotations

from typing import Any

from shopbench.chat import ChatMessage
from shopbench.packs.pack import ToolPack, Voice
from shopbench.records.binding import bind_calls, bind_tool_messages
from shopbench.records.outcome import Outcome
from shopbench.records.tools import Tool
from shopbench.records.trajectory import ToolLogEntry, Trajectory

ASK = Tool.ASK_SHOPPER


def voice(message: ChatMessage, entry: ToolLogEntry) -> Voice | None:
    """An answered question's answer (the validator's own log says the message is one) as
    the customer's words."""
    if entry.error is not None:
        return None
    extra = {
        "shopper": True, "tool_call_id": message.tool_call_id,
        "result_digest": entry.result_digest, "latency_ms": entry.latency_ms,
    }  # fmt: skip
    return Voice(message=message.content or "", extra=extra)


def page_rows(t: Trajectory) -> list[dict[str, Any]]:
    """A clarify episode's conversation with the shopper, in order: each question the
    validator's log backs and answered, with the answer and the held-back topics the log says
    it revealed (empty for any other episode)."""
    d = t.outcome.dialogue
    if d is None:
        return []
    asked = [
        bc for bc in bind_calls(t.messages, t.tool_log)
        if bc.log is not None and bc.answer is not None
        and t.tool_log[bc.log].name == ASK and t.tool_log[bc.log].error is None
    ]  # fmt: skip
    out = []
    for bc, said in zip(asked, d.turns, strict=False):
        arguments = t.tool_log[bc.log].arguments  # type: ignore[index]
        question = arguments.get("question") if isinstance(arguments, dict) else arguments
        out.append({
            "turn": bc.turn + 1, "question": str(question or ""),
            "answer": t.messages[bc.answer].content or "",  # type: ignore[index]
            "revealed": said.revealed, "refused": said.refused, "by": said.by,
        })  # fmt: skip
    return out


def facts(outcome: Outcome | None, recommend_turn: int | None) -> list[str]:
    """A clarify episode's shopper log as the judge's prompt lists it: which topics the
    request held back (never their values), which were asked before the recommendation, and
    how many questions revealed nothing held back."""
    dialogue = outcome.dialogue if outcome is not None else None
    if dialogue is None:
        return []
    before = None if recommend_turn is None else recommend_turn + 1
    asked = dialogue.asked(before_turn=before)
    done = ", ".join(t for t in dialogue.hidden if t in asked) or "none"
    missing = ", ".join(t for t in dialogue.hidden if t not in asked) or "none"
    when = "before the recommendation" if before is not None else "in the episode"
    return [
        f"The request held back (the shopper answers {ASK} about them): "
        f"{', '.join(dialogue.hidden)}.",
        f"Asked {when}: {done}; never asked: {missing}.",
        f"{dialogue.wasted()} of {dialogue.questions} questions revealed nothing held back.",
    ]


def rewordings(record: Trajectory) -> list[str | None]:
    """Per answered question of the record, in order, the words an LLM shopper gave (the
    tool message the log binds to it), or None where the rules answered."""
    dialogue = record.outcome.dialogue
    if dialogue is None or not any(t.by == "llm" for t in dialogue.turns):
        return []
    bound = bind_tool_messages(record.messages, record.tool_log)
    by_entry = {li: mi for mi, li in bound.items()}
    answered = [i for i, e in enumerate(record.tool_log) if e.name == ASK and e.error is None]
    out: list[str | None] = []
    for i, turn in zip(answered, dialogue.turns, strict=False):
        mi = by_entry.get(i)
        text = record.messages[mi].content if mi is not None else None
        out.append(text if turn.by == "llm" else None)
    return out


PACK = ToolPack(
    name="shopper", tools=(ASK,), handler="shopbench.env.shopper.tools",
    voice=voice, page_rows=page_rows, facts=facts, rewordings=rewordings,
)  # fmt: skip
