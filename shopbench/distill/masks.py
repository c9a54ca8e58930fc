"""Token ids and loss labels of an SFT row, through the training chat template.

The template's generation markers give the assistant's tokens; each assistant message
renders as one contiguous run of them, so the row's ``train_turns`` picks the runs that
are trained. Every other token (system prompt, tools, user turns, tool results, the
``<|im_start|>assistant`` headers, untrained steps) gets the label -100.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from shopbench.distill.errors import TemplateError

IGNORE = -100
"""The label of a token that takes no loss."""


class Encoded(BaseModel):
    """One row as the trainer takes it."""

    input_ids: list[int]
    labels: list[int]

    @property
    def trained(self) -> int:
        """How many tokens take loss."""
        return sum(1 for x in self.labels if x != IGNORE)


def runs(mask: list[int]) -> list[tuple[int, int]]:
    """The (start, end) of every run of ones in `mask`."""
    out: list[tuple[int, int]] = []
    start = None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            out.append((start, i))
            start = None
    return out


def encode_row(tokenizer: Any, template: str, row: dict[str, Any]) -> Encoded:
    """`row` (``messages``, ``tools`` as JSON text, ``train_turns``) rendered with `template`
    and tokenized; labels only on the assistant messages ``train_turns`` marks. TemplateError
    when the template's assistant runs do not match the row's assistant messages."""
    tools = row.get("tools")
    tools = json.loads(tools) if isinstance(tools, str) else tools
    out = tokenizer.apply_chat_template(
        row["messages"], tools=tools or None, chat_template=template, tokenize=True,
        return_dict=True, return_assistant_tokens_mask=True,
    )  # fmt: skip
    ids = list(out["input_ids"])
    spans = runs(list(out["assistant_masks"]))
    flags = list(row["train_turns"])
    if len(spans) != len(flags):
        raise TemplateError(
            f"the chat template marks {len(spans)} assistant runs in a row with "
            f"{len(flags)} assistant messages (episode {row.get('episode_id')})"
        )
    labels = [IGNORE] * len(ids)
    for (start, end), train in zip(spans, flags, strict=True):
        if train:
            labels[start:end] = ids[start:end]
    return Encoded(input_ids=ids, labels=labels)
