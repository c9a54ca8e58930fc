"""A trajectory as the LLM judge shows it: the tool log, and the transcript in framed blocks.

The view separates what the validator knows from what the agent says. The tool log (every
call that ran) is the validator's; a tool message is shown as an *observation* only when
its sha256 matches a tool-log entry, matched in log order, and otherwise as an *unlogged*
message, untrusted like the agent's own words. Every piece of text keeps its original and
how much of it is shown, so that truncation (:mod:`shopbench.judging.llm.truncate`) can
cut and uncut without losing anything.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from shopbench.judging.record import JudgedRecord
from shopbench.records.binding import bind_tool_messages

ARGUMENT_CHARS = 300  # an argument list is shown up to this many characters
_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_MARKUP = re.compile(r"<(\s*/?\s*)(agent|observation|unlogged|environment)", re.IGNORECASE)

BlockKind = Literal["agent", "observation", "unlogged", "environment"]


def defang(text: str) -> str:
    """`text` with anything that reads like the judge's own block markup disarmed, so that
    quoted or planted text can never open or close a block."""
    return _MARKUP.sub(lambda m: "\u2039" + m.group(1) + m.group(2), text)


def tool_name(name: str | None) -> str:
    """A tool name as shown: the agent chose it, so only name characters pass (64 at most)."""
    return _NAME.sub("?", name or "")[:64] or "?"


def _short(text: str, cap: int = ARGUMENT_CHARS) -> str:
    return text if len(text) <= cap else text[:cap] + f"... [{len(text) - cap} chars cut]"


def arguments_text(arguments: Mapping[str, Any] | str | None) -> str:
    """Arguments as compact JSON (text kept as it came), cut to :data:`ARGUMENT_CHARS`."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return defang(_short(arguments))
    return defang(_short(json.dumps(arguments, ensure_ascii=False, sort_keys=True)))


@dataclass(slots=True)
class Part:
    """One piece of text: the original, and how many characters of it are shown."""

    label: str
    original: str
    keep: int | None = None  # None: all of it

    @property
    def cut(self) -> int:
        """Characters not shown."""
        return 0 if self.keep is None else max(0, len(self.original) - self.keep)

    def shown(self) -> str:
        """The text as the prompt shows it, with a marker where it was cut."""
        if not self.cut:
            return self.original
        assert self.keep is not None
        return self.original[: self.keep] + f" [... {self.cut} characters cut for length ...]"


@dataclass(slots=True)
class Block:
    """One transcript entry: an agent turn, an observation, an unlogged tool message, or a
    message of the episode loop (``environment``)."""

    kind: BlockKind
    turn: int
    parts: list[Part]
    log_number: int | None = None  # observations: the tool-log entry they answer
    calls: list[tuple[str, str, int | None]] = field(default_factory=list)
    # agent turns: (tool name, arguments text, tool-log number or None when it did not run)


@dataclass(slots=True)
class LogLine:
    """One tool-log entry as shown."""

    number: int
    turn: int
    name: str
    arguments: str
    outcome: str


@dataclass(slots=True)
class View:
    """What the judge shows of one trajectory."""

    intent: str
    query: str
    log: list[LogLine]
    blocks: list[Block]
    content_hash: str  # sha256 of the judged content: the cache's trajectory hash
    nonce: str  # delimits untrusted blocks; unknowable to the text inside them

    def parts(self, kind: BlockKind) -> list[Part]:
        """Every part of every block of `kind`, in transcript order."""
        return [p for b in self.blocks if b.kind == kind for p in b.parts]


def content_hash(record: JudgedRecord, intent: str) -> str:
    """sha256 over what the judge reads — intent, query, messages, tool log without its
    latencies — as canonical JSON; equal for equal episodes whoever recorded them."""
    data = {
        "intent": intent,
        "query": record.query,
        "messages": [m.model_dump(mode="json", exclude_none=True) for m in record.messages],
        "tool_log": [
            e.model_dump(mode="json", exclude={"latency_ms"}) for e in record.tool_log
        ],
    }
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_view(record: JudgedRecord, intent: str) -> View:
    """The view of a judged record (see the module docstring); never raises."""
    digest = content_hash(record, intent)
    log = [
        LogLine(
            number=i + 1, turn=e.turn, name=tool_name(e.name),
            arguments=arguments_text(e.arguments),
            outcome="ok" if e.error is None else f"error: {e.error}",
        )
        for i, e in enumerate(record.tool_log)
    ]
    messages = record.messages
    bound = bind_tool_messages(messages, record.tool_log)
    by_call_id = {
        messages[mi].tool_call_id: li for mi, li in bound.items() if messages[mi].tool_call_id
    }
    blocks: list[Block] = []
    turn = 0
    query_seen = False
    for mi, m in enumerate(messages):
        if m.role == "system":
            continue  # the environment's own system prompt: known, not evidence
        if m.role == "user":
            if not query_seen and (m.content or "") == record.query:
                query_seen = True  # the request itself, shown in the task section
                continue
            blocks.append(Block("environment", turn, [Part("text", defang(m.content or ""))]))
            continue
        if m.role == "assistant":
            calls = [
                (tool_name(c.function.name), arguments_text(c.function.arguments),
                 (li + 1) if (li := by_call_id.get(c.id)) is not None else None)
                for c in m.tool_calls or []
            ]
            logged = [record.tool_log[n - 1].turn for _, _, n in calls if n is not None]
            turn = logged[0] if logged else turn + 1
            parts = [
                Part(label, defang(text))
                for label, text in (("reasoning", m.reasoning_content), ("answer", m.content))
                if text
            ]
            blocks.append(Block("agent", turn, parts, calls=calls))
            continue
        li = bound.get(mi)
        text = defang(m.content or "")
        if li is None:
            blocks.append(Block("unlogged", turn, [Part("text", text)]))
        else:
            blocks.append(Block("observation", record.tool_log[li].turn, [Part("text", text)],
                                log_number=li + 1))
    return View(intent=intent, query=record.query, log=log, blocks=blocks,
                content_hash=digest, nonce=digest[:12])
