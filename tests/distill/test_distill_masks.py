"""Rows and loss masks with Qwen3's real tokenizer (rebuilt offline): token by token, exactly
the trained assistant turns take loss; reasoning on every step; several user turns split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.distill_data import assistant_turns, play, with_second_user_turn
from transformers import AutoTokenizer

from shopbench.curation.curated import CuratedEpisode
from shopbench.distill.errors import TemplateError
from shopbench.distill.masks import IGNORE, encode_row, runs
from shopbench.distill.rows import RowFormat, rows_of
from shopbench.distill.templates import training_template
from shopbench.records.trajectory import Trajectory

HEADER = "<|im_start|>assistant\n"
END = "<|im_end|>\n"


@pytest.fixture(scope="module")
def played(env: Any, catalog: Any) -> list[Trajectory]:
    return play(env, catalog, 2)


@pytest.fixture(scope="module")
def qwen3(qwen3_tokenizer_dir: Path) -> Any:
    return AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)


def _expected_labels(tok: Any, text: str, ids: list[int], flags: list[bool]) -> list[int]:
    """Labels worked out from the rendered text alone: a token is trained when it starts
    inside a trained assistant message (after its header, up to and including its end)."""
    spans, at = [], 0
    while (at := text.find(HEADER, at)) >= 0:
        start = at + len(HEADER)
        end = text.index(END, start) + len(END)
        spans.append((start, end))
        at = end
    assert len(spans) == len(flags)
    trained = [s for s, keep in zip(spans, flags, strict=True) if keep]
    offsets = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert len(offsets) == len(ids)
    return [
        i if any(s <= o[0] < e for s, e in trained) else IGNORE
        for i, o in zip(ids, offsets, strict=True)
    ]


def test_exactly_the_trained_assistant_turns_take_loss(
    played: list[Trajectory], qwen3: Any
) -> None:
    t = played[1]
    n = assistant_turns(t)
    mask = [k % 2 == 1 for k in range(n)]
    [row] = rows_of(CuratedEpisode(trajectory=t, turn_mask=mask)).rows
    data = row.model_dump()
    template = training_template(qwen3)
    enc = encode_row(qwen3, template, data)
    text = qwen3.apply_chat_template(
        data["messages"], tools=json.loads(data["tools"]), chat_template=template, tokenize=False
    )
    assert qwen3(text, add_special_tokens=False)["input_ids"] == enc.input_ids
    assert enc.labels == _expected_labels(qwen3, text, enc.input_ids, mask)
    # Each trained run is the whole assistant message: reasoning, the call as written, the end.
    assistants = [m for m in t.messages if m.role == "assistant"]
    spans = runs([label != IGNORE for label in enc.labels])
    trained = [m for m, keep in zip(assistants, mask, strict=True) if keep]
    assert len(spans) == len(trained)
    for (start, end), m in zip(spans, trained, strict=True):
        shown = qwen3.decode(enc.input_ids[start:end])
        assert shown.startswith("<think>\n" + m.reasoning_content.strip() + "\n</think>\n\n")
        call = m.tool_calls[0].function
        assert f'{{"name": "{call.name}", "arguments": {call.arguments}}}' in shown
        assert shown.endswith("</tool_call><|im_end|>\n")


def test_arguments_and_tools_stay_json_text(played: list[Trajectory]) -> None:
    [row] = rows_of(CuratedEpisode(trajectory=played[0])).rows
    assert json.loads(row.tools) == played[0].tools
    assert list(json.loads(row.tools)[0]["function"]) == list(played[0].tools[0]["function"])
    calls = [c for m in row.messages if m["tool_calls"] for c in m["tool_calls"]]
    assert calls and all(isinstance(c["function"]["arguments"], str) for c in calls)
    assert all(set(m) == set(row.messages[0]) for m in row.messages)


def test_an_episode_with_two_user_turns_becomes_one_row_per_turn(
    played: list[Trajectory], qwen3: Any
) -> None:
    t = with_second_user_turn(played[0])
    first, second = rows_of(CuratedEpisode(trajectory=t)).rows
    n = assistant_turns(played[0])
    assert first.train_turns == [True] * n and len(first.messages) == len(played[0].messages)
    assert second.train_turns == [False] * n + [True]
    earlier = [m for m in second.messages[: len(played[0].messages)] if m["role"] == "assistant"]
    assert all(m["reasoning_content"] is None for m in earlier)
    enc = encode_row(qwen3, training_template(qwen3), second.model_dump())
    trained = qwen3.decode([i for i in enc.labels if i != IGNORE])
    assert trained == (
        "<think>\nThe listing I viewed says COD.\n</think>\n\n"
        "Yes, it ships with cash on delivery.<|im_end|>\n"
    )


def test_the_step_layout_trains_one_turn_per_row(played: list[Trajectory]) -> None:
    t = played[1]
    n = assistant_turns(t)
    mask = [k != 0 for k in range(n)]
    rows = rows_of(CuratedEpisode(trajectory=t, turn_mask=mask), RowFormat.step).rows
    assert [r.step for r in rows] == list(range(1, n))
    for r in rows:
        assert r.messages[-1]["role"] == "assistant"
        assert r.train_turns == [False] * r.step + [True]


def test_a_trained_step_without_reasoning_is_left_out(played: list[Trajectory]) -> None:
    messages = [m.model_copy() for m in played[0].messages]
    at = next(i for i, m in enumerate(messages) if m.role == "assistant")
    messages[at] = messages[at].model_copy(update={"reasoning_content": "  "})
    t = played[0].model_copy(update={"messages": messages})
    made = rows_of(CuratedEpisode(trajectory=t))
    assert made.rows == [] and made.dropped == {"a trained step has no reasoning": 1}
    mask = [k != 0 for k in range(assistant_turns(t))]
    assert len(rows_of(CuratedEpisode(trajectory=t, turn_mask=mask)).rows) == 1


def test_templates_without_markers_are_refused(qwen3: Any) -> None:
    tok = qwen3.__class__.from_pretrained(qwen3.name_or_path)
    tok.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    with pytest.raises(TemplateError, match="neither one TRL knows"):
        training_template(tok)
    tok.chat_template = None
    with pytest.raises(TemplateError, match="no chat template"):
        training_template(tok)
