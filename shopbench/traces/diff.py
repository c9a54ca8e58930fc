"""Two episodes of one task side by side, and the turn where they first part.

**Divergence**, decided by :func:`first_divergence` alone: turn *n* (1-based, counting the
assistant's messages as the browser does) is where two episodes diverge when it is the
first turn whose tool calls differ — in number, in order, by tool name, or by normalised
arguments — or the first turn one episode played and the other did not. Reasoning and
content are never compared: a model words the same step differently every time.

**Normalised arguments** (:func:`normalise_arguments`): the call's JSON arguments with keys
sorted, whole floats read as integers and strings stripped; a string that is a
comma-separated list of ids has each id stripped, and each product or shop token the
episode showed replaced by what it resolves to through the record's own ``token_map``
(``product:<catalog id>``). Tokens are minted per episode, so two episodes that open the
same product write different tokens; compared through their maps they are the same call.
A token the episode never showed stays as written. Arguments that are not JSON are
compared as their stripped text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from shopbench.archive.errors import NotComparable
from shopbench.chat import clip, read_arguments
from shopbench.env.tokens import token_kind
from shopbench.records.binding import bind_calls
from shopbench.records.diagnosis import Diagnosis
from shopbench.records.trajectory import Trajectory

SUMMARY_CHARS = 160
"""An observation's summary is cut to this many characters."""

Call = tuple[str, str]
"""One call as compared: the tool's name and its normalised arguments (canonical JSON)."""


def _resolve_piece(piece: str, token_map: Mapping[str, str]) -> str:
    found = token_map.get(piece)
    if found is None:
        return piece
    return f"{token_kind(piece) or 'id'}:{found}"


def _normalise(value: Any, token_map: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {str(k): _normalise(v, token_map) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v, token_map) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        resolved = _resolve_piece(str(value), token_map)
        return value if resolved == str(value) else resolved
    if isinstance(value, str):
        pieces = [p.strip() for p in value.split(",")]
        if any(p in token_map for p in pieces):
            return ",".join(_resolve_piece(p, token_map) for p in pieces)
        return value.strip()
    return value


def normalise_arguments(arguments: str | Mapping[str, Any], token_map: Mapping[str, str]) -> str:
    """`arguments` (JSON text as the agent wrote it, or already parsed) as canonical JSON,
    normalised as the module says, with `token_map` (token → catalog id) resolving tokens."""
    parsed, _ = read_arguments(arguments)
    if parsed is None:  # unreadable: compared as the text it is
        text = arguments if isinstance(arguments, str) else repr(arguments)
        return json.dumps(text.strip(), ensure_ascii=False)
    return json.dumps(
        _normalise(parsed, token_map), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )


def turn_calls(t: Trajectory) -> list[list[Call]]:
    """Each assistant turn's calls of `t`, in order, as :func:`first_divergence` compares them."""
    out: list[list[Call]] = []
    for m in t.messages:
        if m.role != "assistant":
            continue
        out.append([
            (c.function.name, normalise_arguments(c.function.arguments, t.token_map))
            for c in m.tool_calls or []
        ])  # fmt: skip
    return out


class Divergence(BaseModel):
    """Where two episodes first part, and how."""

    turn: int = Field(ge=1, description="the first turn (1-based) that differs")
    reason: str = Field(description="one line: what differs at that turn")


def _names(calls: list[Call]) -> str:
    return ", ".join(name for name, _ in calls) or "no tool"


def first_divergence(a: Trajectory, b: Trajectory) -> Divergence | None:
    """The first turn at which `a` and `b` diverge (the module's definition), None when
    they make the same calls turn by turn and play the same number of turns."""
    ta, tb = turn_calls(a), turn_calls(b)
    for i in range(max(len(ta), len(tb))):
        n = i + 1
        if i >= len(ta) or i >= len(tb):
            short, other = ("a", "b") if i >= len(ta) else ("b", "a")
            return Divergence(turn=n, reason=f"episode {short} ended; episode {other} played "
                                             f"turn {n}")  # fmt: skip
        ca, cb = ta[i], tb[i]
        if ca == cb:
            continue
        if [name for name, _ in ca] != [name for name, _ in cb]:
            why = f"a calls {_names(ca)}; b calls {_names(cb)}"
        else:
            k = next(j for j, (x, y) in enumerate(zip(ca, cb, strict=True)) if x != y)
            why = f"{ca[k][0]} called with other arguments (call {k + 1} of the turn)"
        return Divergence(turn=n, reason=why)
    return None


class DiffCall(BaseModel):
    """One tool call of a turn, with what answered it."""

    name: str
    arguments: str = Field(description="as the agent wrote them")
    normalised: str = Field(description="as compared: tokens resolved, keys sorted")
    resolved: bool = Field(description="the arguments name tokens the episode showed")
    error: str | None = Field(default=None, description="the tool log's error code")
    observation: str = Field(description="a one-line summary of the tool's answer")


class DiffTurn(BaseModel):
    """One assistant turn of one episode."""

    number: int
    reasoning: str
    content: str
    calls: list[DiffCall]


class TurnPair(BaseModel):
    """Turn `number` of both episodes (None where one did not play it)."""

    number: int
    a: DiffTurn | None
    b: DiffTurn | None
    same: bool = Field(description="the two make the same calls (the divergence's test)")


class DiffSide(BaseModel):
    """One episode's identity and result."""

    episode_id: str
    miner_uid: int | None
    miner_hotkey: str | None
    agent: str
    block: int | None
    turns: int
    termination: str
    success: bool
    score: float | None
    rule_score: float
    judge_score: float | None
    diagnosis: Diagnosis
    diagnosis_label: str


class EpisodeDiff(BaseModel):
    """Two episodes of one task, aligned turn by turn, and their first divergence."""

    task_id: str
    intent: str
    query: str
    a: DiffSide
    b: DiffSide
    first_divergence: Divergence | None
    turns: list[TurnPair]


def summarise(text: str | None) -> str:
    """A tool's answer in one line: a JSON list as its length and first title, anything
    else its text with whitespace collapsed, cut to :data:`SUMMARY_CHARS`."""
    if not text:
        return ""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, list):
        first = parsed[0] if parsed else None
        title = first.get("title") if isinstance(first, dict) else None
        line = f"{len(parsed)} result{'s' if len(parsed) != 1 else ''}"
        line += f", first: {title}" if isinstance(title, str) else ""
    else:
        line = " ".join(text.split())
    return clip(line, SUMMARY_CHARS)


def _turns(t: Trajectory) -> list[DiffTurn]:
    bound: dict[int, list[DiffCall]] = {}
    for c in bind_calls(t.messages, t.tool_log):
        answer = t.messages[c.answer].content if c.answer is not None else None
        normalised = normalise_arguments(c.arguments, t.token_map)
        bound.setdefault(c.turn, []).append(DiffCall(
            name=c.name, arguments=c.arguments, normalised=normalised,
            resolved=normalised != normalise_arguments(c.arguments, {}),
            error=t.tool_log[c.log].error if c.log is not None else None,
            observation=summarise(answer) if c.answer is not None else "no result",
        ))  # fmt: skip
    assistant = [m for m in t.messages if m.role == "assistant"]
    return [
        DiffTurn(number=i + 1, reasoning=m.reasoning_content or "", content=m.content or "",
                 calls=bound.get(i, []))
        for i, m in enumerate(assistant)
    ]  # fmt: skip


def _side(t: Trajectory) -> DiffSide:
    d = t.diagnosis
    return DiffSide(
        episode_id=t.episode_id, miner_uid=t.miner_uid, miner_hotkey=t.miner_hotkey,
        agent=t.agent, block=t.block, turns=t.turns, termination=t.termination.value,
        success=t.outcome.success, score=t.score, rule_score=t.outcome.mean_rule,
        judge_score=t.judge.score if t.judge else None, diagnosis=d, diagnosis_label=d.label,
    )  # fmt: skip


def comparable(a: Trajectory, b: Trajectory) -> None:
    """Nothing when `a` and `b` are two episodes of one task; NotComparable saying why not."""
    if a.episode_id == b.episode_id:
        raise NotComparable(f"episode {a.episode_id} given twice: compare two episodes")
    if a.task_id != b.task_id:
        raise NotComparable(
            f"episode {a.episode_id} is of task {a.task_id}, episode {b.episode_id} of task "
            f"{b.task_id}: a diff compares two episodes of one task"
        )


def diff(a: Trajectory, b: Trajectory) -> EpisodeDiff:
    """`a` and `b` aligned turn by turn with their first divergence (NotComparable when
    they are not two episodes of one task)."""
    comparable(a, b)
    da, db = _turns(a), _turns(b)
    ca, cb = turn_calls(a), turn_calls(b)
    pairs = [
        TurnPair(
            number=i + 1, a=da[i] if i < len(da) else None, b=db[i] if i < len(db) else None,
            same=i < len(ca) and i < len(cb) and ca[i] == cb[i],
        )
        for i in range(max(len(da), len(db)))
    ]  # fmt: skip
    return EpisodeDiff(
        task_id=a.task_id, intent=a.intent, query=a.query, a=_side(a), b=_side(b),
        first_divergence=first_divergence(a, b), turns=pairs,
    )  # fmt: skip
