"""Sizes of text are UTF-8 bytes everywhere: the policy's message, the wire, the episode
record and the judge all count bytes, so multi-byte text under the character count of a
limit but over its bytes is refused or cut at a byte bound, never split inside a character."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import ValidationError
from support.judge_agents import record

from shopbench.chat import (
    MAX_ARGUMENTS_BYTES,
    MAX_TEXT_BYTES,
    AssistantMessage,
    ChatMessage,
    FunctionCall,
    ToolCall,
)
from shopbench.env.env import ShoppingEnv
from shopbench.judging.record import MAX_JUDGED_TEXT_BYTES, read_record, turn_text
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.outcome.spec import Slot
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from template.protocol import StepResponse

# "€" is three bytes: 5,462 characters (under 16,384) make 16,386 bytes (over it).
EUROS = "€" * (MAX_TEXT_BYTES // 3 + 1)


def test_the_text_is_under_the_limit_in_characters_and_over_it_in_bytes() -> None:
    assert len(EUROS) < MAX_TEXT_BYTES < len(EUROS.encode("utf-8"))


def test_a_multibyte_reasoning_over_16_kb_is_refused_by_the_message_and_the_wire() -> None:
    with pytest.raises(ValidationError, match="is 16386 bytes; the limit is 16384"):
        AssistantMessage(reasoning_content=EUROS)
    with pytest.raises(ValidationError, match="is 16386 bytes; the limit is 16384"):
        StepResponse.model_validate_json(json.dumps({"message": {"reasoning": EUROS}}))
    fits = EUROS[:-1]  # 16,383 bytes
    assert AssistantMessage(reasoning_content=fits).reasoning_content == fits


def test_the_judge_reader_cuts_multibyte_text_at_a_byte_bound() -> None:
    head = "Compare the two flasks. "
    message = ChatMessage(role="assistant", reasoning_content=head + EUROS)
    text, cut = turn_text(message)
    assert cut
    size = len(text.encode("utf-8"))
    assert MAX_JUDGED_TEXT_BYTES - 3 < size <= MAX_JUDGED_TEXT_BYTES  # whole characters only
    assert text.startswith(head) and (head + EUROS).startswith(text)
    assert turn_text(ChatMessage(role="assistant", content=EUROS[:-1])) == (EUROS[:-1], False)


def test_the_judge_notes_a_multibyte_cut_in_bytes() -> None:
    raw = record("find a flask", [(EUROS, [])])
    read = read_record(raw)
    assert [turn_text(m)[1] for m in read.messages if m.role == "assistant"] == [True]
    verdict = RubricJudge().judge(raw)
    assert any("cut to 16384 bytes for judging" in n for n in verdict.notes), verdict.notes


class _OneReply:
    """Returns `first`, then terminates."""

    name = "one-reply"

    def __init__(self, first: Any) -> None:
        self.first, self.turns = first, 0

    async def act(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> Any:
        self.turns += 1
        if self.turns == 1:
            return self.first
        call = ToolCall(function=FunctionCall(name="terminate", arguments='{"status": "failure"}'))
        return AssistantMessage(tool_calls=[call])


def test_multibyte_arguments_over_4_kb_are_refused_and_recorded_cut_at_a_byte_bound(
    catalog: Any,
) -> None:
    p = next(iter(catalog.iter_products(batch_size=10)))[0]
    task = Task(
        id="t-bytes", intent="product", query=f"I want {p.title}.",
        reward=[Slot(product_id=p.product_id, title=[p.title])],
    )
    arguments = json.dumps({"q": "€" * 1400}, ensure_ascii=False)  # 1,410 chars, 4,210 bytes
    assert len(arguments) < MAX_ARGUMENTS_BYTES < len(arguments.encode("utf-8"))
    call = {"id": "a", "function": {"name": "find_product", "arguments": arguments}}
    reply = {"tool_calls": [call]}
    t = asyncio.run(run_episode(ShoppingEnv(catalog), task, _OneReply(reply), key=b"k" * 32))
    stored = (t.messages[2].tool_calls or [])[0].function.arguments
    assert arguments.startswith(stored)
    assert MAX_ARGUMENTS_BYTES - 3 < len(stored.encode("utf-8")) <= MAX_ARGUMENTS_BYTES
    assert t.tool_log[0].error == "bad_argument"
    logged = t.tool_log[0].arguments  # the validator's own log cuts at the same byte bound
    assert isinstance(logged, str) and logged.endswith("...")
    assert arguments.startswith(logged[:-3]) and logged[:-3] == stored
    assert "longer than the limit of 4096 bytes" in (t.messages[3].content or "")
