"""SFT rows in TRL's conversational format, from curated episodes.

A row is ``messages`` (the OpenAI chat list: system prompt, user query, assistant turns with
``reasoning_content`` and ``tool_calls``, tool results) and ``tools`` (the function schemas
offered, as one JSON string), plus ``train_turns``: one flag per assistant message, True
where the loss is taken. Tool-call arguments stay the JSON text the model wrote, so
``datasets`` never merges argument dicts of different tools into one struct padded with nulls.

Two layouts (:class:`RowFormat`):

- ``episode``: one row per user turn of an episode, every assistant step of it trained in one
  sequence;
- ``step``: one row per trained assistant step, the history before it as context (the
  rejection-sampling layout of ShoppingBench's SFT data).

Qwen3's inference template keeps reasoning only after the last user query, so an episode
with several user turns becomes one row per user turn: the earlier turns' assistant steps
are context, without their reasoning and never trained. Every trained step must carry its
reasoning; a row that would train a step without it is left out and counted.

The tool messages are shown in the build's observation view
(:mod:`shopbench.agents.format.views`): the context a step is trained on is the context a
policy reading that view gives it (in the step layout, the history window counts back from
the trained step; in the episode layout, from the episode's end).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.format.views import FULL, ObservationView, apply_view, view_tools
from shopbench.chat import ChatMessage
from shopbench.curation.curated import CuratedEpisode


class RowFormat(StrEnum):
    """How episodes become rows."""

    episode = "episode"
    """One row per user turn, all its assistant steps trained together."""
    step = "step"
    """One row per trained assistant step, with the history as context."""


class SftRow(BaseModel):
    """One training sample: the conversation, the tools, which assistant messages to train."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    task_id: str
    cluster: str
    intent: str
    segment: int = Field(ge=0, description="which user turn of the episode (0 = the first)")
    step: int | None = Field(default=None, description="the trained step (step layout only)")
    weight: float = Field(ge=0.0, description="curation's weight of the episode")
    messages: list[dict[str, Any]]
    tools: str = Field(description="the OpenAI function schemas, as one JSON string")
    train_turns: list[bool] = Field(description="per assistant message: True = trained")


class RowsOutcome(BaseModel):
    """An episode's rows, and why any of it was left out."""

    rows: list[SftRow] = Field(default_factory=list)
    dropped: dict[str, int] = Field(default_factory=dict, description="reason → rows left out")


def message_dict(m: ChatMessage, *, keep_reasoning: bool = True) -> dict[str, Any]:
    """A message as a row stores it: every key present (None where unset), the arguments of
    each tool call as JSON text."""
    calls = None
    if m.tool_calls:
        calls = [
            {
                "id": c.id,
                "type": c.type,
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in m.tool_calls
        ]
    reasoning = m.reasoning_content if keep_reasoning and m.role == "assistant" else None
    return {
        "role": m.role,
        "content": m.content,
        "reasoning_content": reasoning or None,
        "tool_calls": calls,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
    }


def user_turns(messages: list[ChatMessage]) -> list[int]:
    """Indices of the user messages that open a user turn."""
    return [i for i, m in enumerate(messages) if m.role == "user"]


def _segment_ends(messages: list[ChatMessage]) -> list[tuple[int, int]]:
    """(start, end) of each user turn's messages: from the user message to the next one."""
    starts = user_turns(messages) or [0]
    ends = [*starts[1:], len(messages)]
    return list(zip(starts, ends, strict=True))


def rows_of(
    episode: CuratedEpisode, fmt: RowFormat = RowFormat.episode, view: ObservationView = FULL
) -> RowsOutcome:
    """The SFT rows of one curated episode in layout `fmt`, its tool messages in `view`;
    rows with nothing to train, or that would train a step without reasoning, are left out
    and counted by reason."""
    t = episode.trajectory
    messages = t.messages
    assistant_at = [i for i, m in enumerate(messages) if m.role == "assistant"]
    mask = episode.turn_mask if episode.turn_mask is not None else [True] * len(assistant_at)
    trained_at = {i for i, keep in zip(assistant_at, mask, strict=True) if keep}
    # Key order as offered: the template renders the schemas as they were given at inference.
    tools = json.dumps(view_tools(t.tools, view), ensure_ascii=False)
    out = RowsOutcome()

    def drop(reason: str) -> None:
        out.dropped[reason] = out.dropped.get(reason, 0) + 1

    def row(segment: int, end: int, start: int, trained: set[int], step: int | None) -> None:
        if step is None:
            seen = apply_view(messages[:end], view, t.tools)
        else:  # the trained step's context, as a policy would have given it, then the step
            seen = [*apply_view(messages[: end - 1], view, t.tools), messages[end - 1]]
        shown = [message_dict(m, keep_reasoning=i >= start) for i, m in enumerate(seen)]
        flags = [i in trained for i in range(end) if messages[i].role == "assistant"]
        out.rows.append(
            SftRow(
                episode_id=t.episode_id, task_id=t.task_id, cluster=t.cluster or t.task_id,
                intent=str(t.intent), segment=segment, step=step, weight=episode.weight,
                messages=shown, tools=tools, train_turns=flags,
            )
        )  # fmt: skip

    for segment, (start, end) in enumerate(_segment_ends(messages)):
        trained = {i for i in trained_at if start <= i < end}
        if not trained:
            drop("no trained step")
            continue
        if any(not (messages[i].reasoning_content or "").strip() for i in trained):
            drop("a trained step has no reasoning")
            continue
        if fmt is RowFormat.episode:
            row(segment, end, start, trained, None)
        else:
            for i in sorted(trained):
                row(segment, i + 1, start, {i}, assistant_at.index(i))
    return out
