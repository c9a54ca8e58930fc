"""The tokens the text format needs from a tokenizer, and which of them are special.

Each marker is one token of the vocabulary, so a model writes it in one step, a loss mask
finds it, and decoding can keep it while dropping the special tokens around a turn.
"""

from __future__ import annotations

from shopbench.agents.format.markers import (
    CALL_CLOSE,
    CALL_OPEN,
    END_OF_TEXT,
    RESPONSE_CLOSE,
    RESPONSE_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    TURN_CLOSE,
    TURN_OPEN,
)

REPLY_TOKENS = (CALL_OPEN, CALL_CLOSE, THINK_OPEN, THINK_CLOSE)
"""The markers a model writes in its reply: the parser reads them, so decoding keeps them,
and a model trained on the format must have each as a single token."""

FORMAT_TOKENS = (CALL_OPEN, CALL_CLOSE, RESPONSE_OPEN, RESPONSE_CLOSE, THINK_OPEN, THINK_CLOSE)
"""The tokens the format writes around tool calls, tool results and reasoning."""

CHAT_TOKENS: tuple[tuple[str, bool], ...] = (
    (END_OF_TEXT, True), (TURN_OPEN, True), (TURN_CLOSE, True),
    *((t, False) for t in FORMAT_TOKENS),
)  # fmt: skip
"""Every token of the format, in the order Qwen3's vocabulary holds them, and whether each
is special (the turn markers are; the format's markers are text a decoder keeps)."""
