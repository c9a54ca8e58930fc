"""What curation reads off one trajectory, once: its calls, their results, its signals.

:func:`episode_facts` turns a :class:`~shopbench.records.trajectory.Trajectory` into the
plain :class:`EpisodeFacts` every rule and recovery mining decide on. The narrator signals
that need the agent's knowledge at each turn (searches with words it never saw, turns whose
reasoning does not name their call, ids and prices cited that were never shown) are the
rubric judge's own: read from the verdict's ``signals`` when the validator recorded them,
else computed by the rubric judge here. Product tokens are episode-scoped, so everything
compared across episodes (call skeletons, reply fingerprints, near-duplicate shingles,
decision keys) first maps each token to its catalog id.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
import pydantic_core

from shopbench.records.binding import BoundCall, bind_calls
from shopbench.records.tools import Tool
from shopbench.records.trajectory import Trajectory

_TOKEN = re.compile(r"\b\d{6,}\b")
_WORD = re.compile(r"[^\W_]+")
SEARCH = Tool.FIND_PRODUCT
VIEW = Tool.VIEW_PRODUCT_INFORMATION
RECOMMEND = Tool.RECOMMEND_PRODUCT
TERMINATE = Tool.TERMINATE


@dataclass(slots=True)
class Call:
    """One tool call of a turn, with what came back."""

    turn: int  # index among the assistant messages
    name: str
    arguments: dict[str, Any] | str
    answered: bool  # a tool message with this call's id follows
    error: str | None
    shown: list[str] = field(default_factory=list)  # product tokens a search listed

    def ids(self) -> list[str]:
        """The product tokens the call names (``product_ids``), in order."""
        if not isinstance(self.arguments, dict):
            return []
        value = self.arguments.get("product_ids")
        if isinstance(value, list):
            return [str(v).strip() for v in value if str(v).strip()]
        return [p.strip() for p in str(value or "").split(",") if p.strip()]


@dataclass(slots=True)
class EpisodeFacts:
    """The facts of one episode the rules read."""

    calls: list[Call]
    assistant_turns: int
    shown: set[str]  # every product token an observation showed
    text: str  # the agent's words (reasoning and content), tokens mapped to catalog ids
    signals: dict[str, float]  # the rubric's signals (ungrounded searches, call_text_match, ...)
    skeleton: str  # the shape of the calls, whatever their arguments' values
    reply_fingerprint: str  # sha256 of the replies, tokens mapped to catalog ids
    call_keys: list[str]  # name + arguments of each call, tokens mapped
    decisions: list[str] = field(default_factory=list)  # each call, normalised (decision_key)
    opened: list[str] = field(default_factory=list)  # catalog ids opened, sorted
    picks: list[str] = field(default_factory=list)  # catalog ids recommended, in order


def _canonical(token_map: dict[str, str], text: str) -> str:
    return _TOKEN.sub(lambda m: token_map.get(m.group(0), m.group(0)), text)


def _shown_tokens(content: str) -> list[str]:
    if not content.startswith("["):
        return []
    try:
        items = pydantic_core.from_json(content)
    except ValueError:
        return []
    return [
        str(item["product_id"])
        for item in items
        if isinstance(item, dict) and item.get("product_id") is not None
    ]


def _decision(call: Call, token_map: dict[str, str]) -> str:
    """The call as a decision: its name and arguments (keys sorted, tokens mapped to catalog
    ids, case and spacing folded), the products a view opens as a set; no wording."""
    if call.name == VIEW:
        return f"{VIEW}:" + ",".join(sorted({token_map.get(p, p) for p in call.ids()}))
    try:
        text = orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        text = str(call.arguments)
    return f"{call.name}:{' '.join(_canonical(token_map, text).casefold().split())}"


def decision_key(facts: EpisodeFacts, compare: str) -> str:
    """sha256 of what the agent decided: with `compare` ``calls``, the set of its calls as
    decisions (names and normalised arguments) and its picks; with ``picks``, the products
    it opened and its picks. Equal keys on one task are the same episode, whatever was
    said."""
    picks = ",".join(facts.picks)
    body = facts.decisions if compare == "calls" else [f"opened={','.join(facts.opened)}"]
    text = "\x1e".join([*sorted(set(body)), f"picks={picks}"])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _shape(call: Call) -> str:
    if not isinstance(call.arguments, dict):
        return f"{call.name}(?)"
    keys = ",".join(sorted(k for k in call.arguments if k != "page"))
    return f"{call.name}({keys})"


def verdict_signals(t: Trajectory) -> dict[str, float] | None:
    """The rubric signals the recorded verdict carries, or None."""
    if t.judge is None:
        return None
    signals = t.judge.signals
    if not isinstance(signals, dict) or "call_text_match" not in signals:
        return None
    return {k: float(v) for k, v in signals.items() if isinstance(v, int | float)}


@lru_cache(maxsize=1)
def _rubric_judge() -> Any:
    from shopbench.judging.rubric.judge import RubricJudge

    return RubricJudge()


def rubric_signals(t: Trajectory) -> dict[str, float]:
    """The rubric judge's signals for `t`, computed here (for records judged otherwise)."""
    verdict = _rubric_judge().judge(t)
    return {k: float(v) for k, v in (getattr(verdict, "signals", None) or {}).items()}


def episode_facts(t: Trajectory) -> EpisodeFacts:
    """The facts of `t` (never raises for a record that validated)."""
    answers: dict[str, str] = {}
    for m in t.messages:
        if m.role == "tool" and m.tool_call_id and m.tool_call_id not in answers:
            answers[m.tool_call_id] = m.content or ""
    by_message: dict[int, list[BoundCall]] = {}
    for bc in bind_calls(t.messages, t.tool_log):
        by_message.setdefault(bc.message, []).append(bc)
    calls: list[Call] = []
    words: list[str] = []
    shapes: list[str] = []
    turn = -1
    for mi, m in enumerate(t.messages):
        if m.role != "assistant":
            continue
        turn += 1
        words.extend(x for x in (m.reasoning_content, m.content) if x)
        turn_shapes = []
        for bc in by_message.get(mi, []):
            answered = bc.answer is not None
            error = None
            arguments: dict[str, Any] | str = bc.arguments
            if bc.log is not None:  # the validator's own record of what ran
                entry = t.tool_log[bc.log]
                error = entry.error
                arguments = entry.arguments
            elif isinstance(arguments, str):
                try:
                    parsed = pydantic_core.from_json(arguments)
                    arguments = parsed if isinstance(parsed, dict) else arguments
                except ValueError:
                    pass
            call = Call(turn=turn, name=bc.name, arguments=arguments,
                        answered=answered, error=error)  # fmt: skip
            if call.name == SEARCH and answered and error is None:
                call.shown = _shown_tokens(answers[bc.call_id])
            calls.append(call)
            turn_shapes.append(_shape(call))
        shapes.append("+".join(sorted(set(turn_shapes))))
    shown = {p for c in calls for p in c.shown}
    for c in calls:
        if c.name == VIEW and c.answered and c.error is None:
            shown.update(c.ids())
    tm = t.token_map
    text = _canonical(tm, "\n".join(words))
    keys = [
        f"{c.name}:{_canonical(tm, pydantic_core.to_json(c.arguments).decode())}" for c in calls
    ]
    fingerprint = hashlib.sha256(
        "\x1e".join([text, *keys]).encode("utf-8", "surrogatepass")
    ).hexdigest()
    signals = verdict_signals(t)
    if signals is None:
        signals = rubric_signals(t)
    opened = {tm.get(p, p) for c in calls if c.name == VIEW and c.error is None for p in c.ids()}
    return EpisodeFacts(
        calls=calls, assistant_turns=turn + 1, shown=shown, text=text, signals=signals,
        skeleton=" | ".join(shapes), reply_fingerprint=fingerprint, call_keys=keys,
        decisions=[_decision(c, tm) for c in calls], opened=sorted(opened),
        picks=[p or "" for p in t.recommended_ids],
    )  # fmt: skip


def content_words(facts: EpisodeFacts) -> list[str]:
    """The agent's words and calls as lower-case words (what near-duplicates share)."""
    return _WORD.findall(" ".join([facts.text, *facts.call_keys]).lower())
