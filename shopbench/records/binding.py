"""The one binding of a conversation's tool calls to the validator's own tool log.

A record holds two accounts of the tool calls: the conversation (the agent's calls, and
the tool messages that answered them) and the validator's tool log (what the environment
ran, with the sha256 of each result). The log is the fact; the messages are what the agent
read. :func:`bind_tool_messages` ties each tool message to the log entry whose digest its
text has — each entry used once, in log order, which is message order — and
:func:`bind_calls` follows each assistant call through the tool message that answers it
(the first with its id) to that entry. A call that no logged entry backs was not run by
the validator, whatever the conversation shows. Everyone who trusts a call — the rubric,
the LLM judge's view, curation's features, the trace browser — reads it through here.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from shopbench.chat import ChatMessage
from shopbench.records.trajectory import ToolLogEntry


class Said(Protocol):
    """What the binding reads of a message (a :class:`ChatMessage`, or a judge's view of one)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str | None: ...


def result_digest(text: str | None) -> str:
    """The digest the tool log records for an observation's text."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


def bind_tool_messages(
    messages: Sequence[Said], tool_log: Sequence[ToolLogEntry]
) -> dict[int, int]:
    """Message index → tool-log index, for each tool message whose text's digest matches an
    unused entry after the last bound one (an entry is bound at most once)."""
    by_digest: dict[str, list[int]] = {}
    for i, entry in enumerate(tool_log):
        by_digest.setdefault(entry.result_digest, []).append(i)
    bound: dict[int, int] = {}
    last = -1
    for mi, m in enumerate(messages):
        if m.role != "tool":
            continue
        queue = by_digest.get(result_digest(m.content))
        if not queue:
            continue
        j = bisect.bisect_right(queue, last)
        if j < len(queue):
            last = queue.pop(j)
            bound[mi] = last
    return bound


class BoundCall(NamedTuple):
    """One call of an assistant turn, with the tool message that answered it and the log
    entry that backs that message (None where there is none)."""

    turn: int  # 0-based index among the assistant turns
    message: int  # index of the assistant message
    call_id: str
    name: str  # as the agent wrote it
    arguments: str  # as the agent wrote them (JSON text)
    answer: int | None  # index of the answering tool message
    log: int | None  # index of the backing tool-log entry


def bind_calls(
    messages: Sequence[ChatMessage], tool_log: Sequence[ToolLogEntry]
) -> list[BoundCall]:
    """Every assistant tool call in order, bound as the module says."""
    answers: dict[str, int] = {}
    for mi, m in enumerate(messages):
        if m.role == "tool" and m.tool_call_id and m.tool_call_id not in answers:
            answers[m.tool_call_id] = mi
    bound = bind_tool_messages(messages, tool_log)
    out: list[BoundCall] = []
    turn = -1
    for mi, m in enumerate(messages):
        if m.role != "assistant":
            continue
        turn += 1
        for tc in m.tool_calls or []:
            answer = answers.get(tc.id)
            log = bound.get(answer) if answer is not None else None
            out.append(BoundCall(turn, mi, tc.id, tc.function.name, tc.function.arguments,
                                 answer, log))  # fmt: skip
    return out
