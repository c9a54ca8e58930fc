"""The wire models: OpenAI shapes in and out, and every limit of an episode enforced."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from shopbench.chat import (
    MAX_TEXT_BYTES,
    AssistantMessage,
    ChatMessage,
    FunctionCall,
    ToolCall,
)
from shopbench.env.tools import ShopTools
from template.protocol import (
    MAX_MESSAGES,
    AgentCard,
    StepRequest,
    StepResponse,
    ToolSchema,
    WireAssistantMessage,
    WireMessage,
)

TOOLS = [spec.openai_schema() for spec in ShopTools.tool_specs().values()]


def conversation() -> list[ChatMessage]:
    call = ToolCall(id="c1", function=FunctionCall(name="find_product", arguments='{"q": "mug"}'))
    return [
        ChatMessage(role="system", content="You are a shopping agent."),
        ChatMessage(role="user", content="a ceramic mug under 300 pesos"),
        ChatMessage(role="assistant", reasoning_content="search first", tool_calls=[call]),
        ChatMessage(role="tool", tool_call_id="c1", name="find_product", content="[]"),
    ]


def request(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "episode_id": "ep-1",
        "turn": 2,
        "max_turns": 30,
        "deadline_ms": 30_000,
        "messages": [m.to_openai() for m in conversation()],
        "tools": TOOLS,
    }
    return {**base, **changes}


def test_a_request_round_trips_the_conversation_and_the_real_tool_schemas() -> None:
    req = StepRequest.model_validate(request())
    again = StepRequest.model_validate_json(req.model_dump_json(exclude_none=True))
    assert again.chat_messages() == conversation()
    assert again.tool_dicts() == TOOLS
    assert again.protocol_version == 1


def test_wire_messages_convert_both_ways() -> None:
    for message in conversation():
        assert WireMessage.from_chat(message).to_chat() == message


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"protocol_version": 2}, "protocol_version"),
        ({"turn": 31, "max_turns": 30}, "turn"),
        ({"turn": 5, "max_turns": 4}, "max_turns 4"),
        ({"max_turns": 31}, "max_turns"),
        ({"turn": 0}, "turn"),
        ({"deadline_ms": 0}, "deadline_ms"),
        ({"deadline_ms": 600_001}, "deadline_ms"),
        ({"episode_id": "has space"}, "episode_id"),
        ({"episode_id": "x" * 65}, "episode_id"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "q"}] * (MAX_MESSAGES + 1)}, "messages"),
        ({"messages": [{"role": "robot", "content": "q"}]}, "role"),
        ({"tools": TOOLS * 5}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "name"),
    ],
)
def test_a_request_out_of_bounds_is_refused_naming_the_field(
    changes: dict[str, object], where: str
) -> None:
    with pytest.raises(ValidationError) as info:
        StepRequest.model_validate(request(**changes))
    assert where in str(info.value)


def test_text_limits_count_utf8_bytes_not_characters() -> None:
    fits = "a" * MAX_TEXT_BYTES
    euros = "€" * (MAX_TEXT_BYTES // 3 + 1)  # fewer characters than the limit, more bytes
    assert len(euros) < MAX_TEXT_BYTES < len(euros.encode("utf-8"))
    assert WireAssistantMessage(content=fits).content == fits
    for field in ("content", "reasoning_content"):
        with pytest.raises(ValidationError, match="the limit is 16384"):
            WireAssistantMessage.model_validate({field: euros})
        with pytest.raises(ValidationError, match="the limit is 16384"):
            AssistantMessage.model_validate({field: euros})
    with pytest.raises(ValidationError, match="the limit is 16384"):
        StepResponse.model_validate({"message": {"reasoning": euros}})
    history = [m.to_openai() for m in conversation()]
    history.append({"role": "assistant", "reasoning_content": euros})
    with pytest.raises(ValidationError, match=r"messages\.4\.reasoning_content"):
        StepRequest.model_validate(request(messages=history))
    with pytest.raises(ValidationError, match="assistant content"):
        WireMessage(role="assistant", content=euros)
    # A tool result may be longer than an assistant's text.
    assert WireMessage(role="tool", content=euros, tool_call_id="c1").content == euros


def test_only_assistant_messages_carry_tool_calls() -> None:
    call = {"id": "c", "function": {"name": "terminate", "arguments": "{}"}}
    with pytest.raises(ValidationError, match="user message cannot carry tool_calls"):
        WireMessage.model_validate({"role": "user", "content": "q", "tool_calls": [call]})


def test_a_vllm_style_reply_is_accepted_and_normalised() -> None:
    body = {
        "message": {
            "role": "assistant",
            "content": None,
            "reasoning": "the first result fits",
            "refusal": None,
            "tool_calls": [
                {
                    "id": "chatcmpl-tool-1",
                    "type": "function",
                    "function": {"name": "recommend_product", "arguments": {"product_ids": "1"}},
                },
                {"id": None, "function": {"name": "terminate", "arguments": None}},
            ],
        },
        "model": "Qwen/Qwen3-4B",
        "usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940},
    }
    reply = StepResponse.model_validate_json(json.dumps(body))
    message = reply.message.to_assistant()
    assert message.reasoning_content == "the first result fits"
    assert message.tool_calls is not None
    assert message.tool_calls[0].parsed_arguments() == {"product_ids": "1"}
    assert (message.tool_calls[1].id, message.tool_calls[1].function.arguments) == ("", "{}")
    assert reply.usage is not None and reply.usage.total_tokens == 940


@pytest.mark.parametrize(
    ("message", "where"),
    [
        ({"tool_calls": [{"function": {"name": "terminate"}}] * 6}, "tool_calls"),
        ({"tool_calls": [{"function": {"name": "x" * 65}}]}, "name"),
        ({"tool_calls": [{"function": {"name": "f", "arguments": "x" * 5000}}]}, "arguments"),
        ({"tool_calls": [{"type": "code", "function": {"name": "f"}}]}, "type"),
        ({"role": "user"}, "role"),
    ],
)
def test_a_reply_out_of_bounds_is_refused(message: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError) as info:
        StepResponse.model_validate({"message": message})
    assert where in str(info.value)


ARGS_OVER = '{"q": "' + "€" * 1400 + '"}'  # 1,408 characters, 4,208 bytes


@pytest.mark.parametrize(
    ("call", "where"),
    [
        ({"id": "i" * 129, "function": {"name": "f"}}, "id"),
        ({"function": {"name": "n" * 65}}, "name"),
        ({"function": {"name": "f", "arguments": ARGS_OVER}}, "arguments"),
        ({"type": "code", "function": {"name": "f"}}, "type"),
    ],
)
def test_the_wire_refuses_a_tool_call_exactly_where_the_chat_type_does(
    call: dict[str, object], where: str
) -> None:
    with pytest.raises(ValidationError) as chat:
        ToolCall.model_validate(call)
    with pytest.raises(ValidationError) as wire:
        StepResponse.model_validate({"message": {"tool_calls": [call]}})
    assert chat.value.errors()[0]["msg"] == wire.value.errors()[0]["msg"]
    assert where in str(chat.value) and where in str(wire.value)


def test_wire_messages_are_the_chat_types_and_add_only_wire_rules() -> None:
    reply = StepResponse.model_validate(
        {"message": {"tool_calls": [{"id": None, "function": {"name": "f", "arguments": {}}}]}}
    ).message
    assert isinstance(reply, AssistantMessage)
    assert reply.tool_calls is not None and isinstance(reply.tool_calls[0], ToolCall)
    assert isinstance(WireMessage(role="user", content="q"), ChatMessage)
    # What only the wire refuses: a nameless call; what only the wire reads: `null` ids.
    assert ToolCall.model_validate({"function": {"name": ""}}).function.name == ""
    with pytest.raises(ValidationError, match="at least 1 character"):
        StepResponse.model_validate({"message": {"tool_calls": [{"function": {"name": ""}}]}})
    with pytest.raises(ValidationError, match="valid string"):
        ToolCall.model_validate({"id": None, "function": {"name": "f"}})


def test_a_policy_message_becomes_a_reply_unchanged() -> None:
    message = AssistantMessage(
        content="done",
        tool_calls=[ToolCall(id="t", function=FunctionCall(name="terminate", arguments="{}"))],
    )
    assert WireAssistantMessage.from_assistant(message).to_assistant() == message


def test_agent_card_limits() -> None:
    assert AgentCard(model="Qwen/Qwen3-4B", revision="abc123").revision == "abc123"
    with pytest.raises(ValidationError):
        AgentCard(model="")
    with pytest.raises(ValidationError):
        AgentCard(model="m" * 129)


def test_tool_schema_passes_unknown_function_keys_through() -> None:
    schema = {"type": "function", "function": {"name": "f", "parameters": {}, "strict": True}}
    assert ToolSchema.model_validate(schema).to_openai() == {
        "type": "function",
        "function": {"name": "f", "description": "", "parameters": {}, "strict": True},
    }
