"""What an engine of a local model is asked and answers: :class:`GenRequest` in, :class:`GenResult`
out, and the :class:`EngineStats` it keeps. Every engine (transformers, onnxruntime-genai) speaks
these; nothing here imports a runtime."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GenRequest:
    """One turn to generate: the prompt's token ids and how to decode it."""

    prompt: tuple[int, ...]
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    grammar: str | None = None
    """A Lark grammar the turn is decoded under (:mod:`shopbench.agents.local.grammar`)."""


@dataclass(frozen=True, slots=True)
class GenResult:
    """One generated turn: its text (end-of-turn token removed) and its token counts."""

    text: str
    new_tokens: int
    prompt_tokens: int
    finished: bool
    """True when the model ended its turn; False when the token limit cut it."""


@dataclass(slots=True)
class EngineStats:
    """What an engine has generated so far (read by the bench)."""

    calls: int = 0
    rows: int = 0
    new_tokens: int = 0
    cached_prompt_tokens: int = 0
    """Prompt tokens served from the shared-prefix cache instead of being processed."""
    prefill_tokens: int = 0
    """Prompt positions run through the model before the first new token (padding included:
    a batch's rows are padded to its longest)."""
    seconds: float = 0.0
    prefill_seconds: float = 0.0
    """Of `seconds`, the time until each call's first new token: the prompts' prefill."""
    mask_seconds: float = 0.0
    """Of `seconds`, the time spent in logits processors (a constrained row's grammar mask,
    a sampled row's draw)."""
