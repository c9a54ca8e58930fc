"""The tokenizer's side of a local-model engine, the same whichever runtime computes the logits.

:class:`EngineText` holds a model directory's tokenizer, its end-of-turn ids and the rules that
turn generated ids back into a reply's text; :func:`logits_processors` is what a batch's rows
apply to each step's logits (a constrained row's grammar, a sampled row's seeded draw). The
transformers engine and the onnxruntime-genai engine both build on them, so the two read the
same prompt ids and write the same text for the same tokens.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from shopbench.agents.errors import LocalModelError
from shopbench.agents.format.markers import END_OF_TEXT, TURN_CLOSE
from shopbench.agents.format.render import render_prompt
from shopbench.agents.format.tokens import REPLY_TOKENS
from shopbench.agents.local.request import EngineStats, GenRequest, GenResult
from shopbench.chat import ChatMessage

_END_OF_TURN = (TURN_CLOSE, "<|eot_id|>", END_OF_TEXT)  # ChatML's, Llama 3's, the document's


class EngineText:
    """A model directory's tokenizer, its stop ids and its reply-text rules."""

    path: Path
    tokenizer: Any
    stop_ids: frozenset[int]
    pad_id: int

    def _load_text(self, path: Path, tokenizer: Any, configured_eos: Any) -> None:
        """Set the tokenizer's side up; `configured_eos` is the model's generation config's
        ``eos_token_id`` (an id, a list of ids, or None)."""
        self.path = path
        self.tokenizer = tokenizer
        self.stop_ids = _stop_ids(path, tokenizer, configured_eos)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else min(self.stop_ids)
        specials = set(tokenizer.all_special_tokens) | {
            t.content for t in tokenizer.added_tokens_decoder.values() if t.special
        }
        self._strip = sorted(t for t in specials if t and t not in REPLY_TOKENS)
        self._grammar_tokenizer: Any = None

    def encode(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        template_kwargs: dict[str, Any] | None = None,
    ) -> tuple[int, ...]:
        """The prompt's token ids for the next assistant turn."""
        text = render_prompt(self.tokenizer, messages, tools, template_kwargs or {})
        return tuple(self.tokenizer.encode(text, add_special_tokens=False))

    def grammar_tokenizer(self) -> Any:
        """The tokenizer constrained decoding reads (built on first use, then kept)."""
        if self._grammar_tokenizer is None:
            from shopbench.agents.local.grammar import GrammarTokenizer

            self._grammar_tokenizer = GrammarTokenizer(self.tokenizer, self.stop_ids)
        return self._grammar_tokenizer

    def _processors(self, requests: list[GenRequest]) -> Any:
        return logits_processors(requests, self.grammar_tokenizer)

    def _result(self, request: GenRequest, tokens: list[int]) -> GenResult:
        """The reply of `request` from the ids generated after its prompt: cut at the first
        stop id (or the request's token limit), the special tokens that are not the format's
        own removed."""
        tokens = tokens[: request.max_new_tokens]
        end = next((i for i, t in enumerate(tokens) if t in self.stop_ids), None)
        kept = tokens if end is None else tokens[:end]
        text = self.tokenizer.decode(kept, skip_special_tokens=False)
        for special in self._strip:
            text = text.replace(special, "")
        return GenResult(
            text=text,
            new_tokens=len(kept) + (0 if end is None else 1),
            prompt_tokens=len(request.prompt),
            finished=end is not None,
        )


def _stop_ids(path: Path, tokenizer: Any, configured: Any) -> frozenset[int]:
    ids: set[int] = set()
    if isinstance(configured, int):
        ids.add(configured)
    elif isinstance(configured, list | tuple):
        ids.update(int(i) for i in configured)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    ids.update(vocab[t] for t in _END_OF_TURN if t in vocab)
    if not ids:
        raise LocalModelError(f"{path}: the tokenizer names no end-of-turn token")
    return frozenset(ids)


def logits_processors(requests: list[GenRequest], grammar_tokenizer: Any) -> Any:
    """The logits processors of a batch: each constrained row's grammar first, then each
    sampled row's draw (empty when every row is free and greedy). `grammar_tokenizer` is
    called only when a row has a grammar."""
    from transformers import LogitsProcessorList

    processors = LogitsProcessorList()
    if any(r.grammar is not None for r in requests):
        from shopbench.agents.local.grammar import GrammarMask

        processors.append(GrammarMask(grammar_tokenizer(), [r.grammar for r in requests]))
    if any(r.temperature > 0 for r in requests):
        processors.append(RowSampler(requests))
    return processors


class StepClock:
    """A logits processor that changes nothing and times the call around it: when the first
    step's logits arrived (the prompts' prefill is done by then) and how long `inner`, the
    batch's own processors, took over all steps."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.first: float | None = None
        self.in_processors = 0.0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        if self.inner:
            scores = self.inner(input_ids, scores)
            self.in_processors += time.perf_counter() - now
        return scores

    def record(self, stats: EngineStats, start: float, prefill_tokens: int) -> None:
        """Add this call's prefill and processor time (`start`: when the call began)."""
        stats.prefill_tokens += prefill_tokens
        stats.prefill_seconds += (self.first or time.perf_counter()) - start
        stats.mask_seconds += self.in_processors


class RowSampler:
    """Temperature and top-p sampling per row with the row's own generator; greedy rows
    are left for the argmax. The drawn token is the only one left finite."""

    def __init__(self, requests: list[GenRequest]) -> None:
        import torch

        self._requests = requests
        self._generators = [
            torch.Generator().manual_seed(r.seed) if r.temperature > 0 else None
            for r in requests
        ]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        out = scores.clone()
        for i, (r, g) in enumerate(zip(self._requests, self._generators, strict=True)):
            if g is None:
                continue
            probs = torch.softmax(scores[i].float() / r.temperature, dim=-1)
            if r.top_p < 1.0:
                ordered, order = torch.sort(probs, descending=True)
                keep = torch.cumsum(ordered, dim=-1) - ordered < r.top_p
                probs = torch.zeros_like(probs).scatter(0, order[keep], ordered[keep])
            token = int(torch.multinomial(probs, 1, generator=g).item())
            out[i] = float("-inf")
            out[i, token] = 0.0
        return out
