"""A loaded local model and one batched ``generate`` call over many prompts.

Prompts are left-padded into one batch; rows stop at the model's end-of-turn tokens. Greedy
rows take the argmax; sampled rows draw with temperature and top-p from their own seeded
``torch.Generator`` inside a logits processor, so a row's tokens depend on its prompt and
seed alone, never on which other rows shared its batch.

torch and transformers are imported when an engine is made, not before.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shopbench.agents.local.config import HFPolicyConfig, LocalModelError, check_model_dir
from shopbench.agents.local.parse import CALL_CLOSE, CALL_OPEN, THINK_CLOSE, THINK_OPEN
from shopbench.agents.local.render import render_prompt
from shopbench.chat import ChatMessage

_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>")
_MARKUP = (THINK_OPEN, THINK_CLOSE, CALL_OPEN, CALL_CLOSE)


@dataclass(frozen=True, slots=True)
class GenRequest:
    """One turn to generate: the prompt's token ids and how to decode it."""

    prompt: tuple[int, ...]
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


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
    seconds: float = 0.0


class HFEngine:
    """A model directory loaded with transformers: its tokenizer, its model, its stop ids."""

    def __init__(self, path: Path, *, dtype: str = "float32", threads: int | None = None) -> None:
        check_model_dir(path)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the commands draw their own progress
        if threads is not None:
            torch.set_num_threads(threads)
        self.path = path
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path))
            self.model = AutoModelForCausalLM.from_pretrained(
                str(path), dtype=getattr(torch, dtype)
            )
        except (OSError, ValueError) as e:
            raise LocalModelError(f"{path}: cannot load the model ({e})") from None
        self.model.eval()
        self.stop_ids = self._stop_ids()
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else min(self.stop_ids)
        self.max_positions = int(
            getattr(self.model.config, "max_position_embeddings", 0) or 1 << 30
        )
        specials = set(self.tokenizer.all_special_tokens) | {
            t.content for t in self.tokenizer.added_tokens_decoder.values() if t.special
        }
        self._strip = sorted(t for t in specials if t and t not in _MARKUP)
        self._lock = threading.Lock()
        self.stats = EngineStats()

    def _stop_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(configured, int):
            ids.add(configured)
        elif isinstance(configured, list | tuple):
            ids.update(int(i) for i in configured)
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        vocab = self.tokenizer.get_vocab()
        ids.update(vocab[t] for t in _END_OF_TURN if t in vocab)
        if not ids:
            raise LocalModelError(f"{self.path}: the tokenizer names no end-of-turn token")
        return frozenset(ids)

    def encode(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        template_kwargs: dict[str, Any] | None = None,
    ) -> tuple[int, ...]:
        """The prompt's token ids for the next assistant turn."""
        text = render_prompt(self.tokenizer, messages, tools, template_kwargs or {})
        return tuple(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Generate every request in one batch; results in the requests' order."""
        if not requests:
            return []
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        with self._lock:
            start = time.perf_counter()
            width = max(len(r.prompt) for r in requests)
            ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(requests), width), dtype=torch.long)
            for i, r in enumerate(requests):
                ids[i, width - len(r.prompt) :] = torch.tensor(r.prompt, dtype=torch.long)
                mask[i, width - len(r.prompt) :] = 1
            budget = max(r.max_new_tokens for r in requests)
            processors = LogitsProcessorList()
            if any(r.temperature > 0 for r in requests):
                processors.append(_RowSampler(requests))
            config = GenerationConfig(
                max_new_tokens=budget,
                do_sample=False,
                eos_token_id=sorted(self.stop_ids),
                pad_token_id=self.pad_id,
            )
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    generation_config=config,
                    logits_processor=processors,
                )
            results = [
                self._result(r, out[i, width:].tolist()) for i, r in enumerate(requests)
            ]
            self.stats.calls += 1
            self.stats.rows += len(requests)
            self.stats.new_tokens += sum(r.new_tokens for r in results)
            self.stats.seconds += time.perf_counter() - start
            return results

    def _result(self, request: GenRequest, tokens: list[int]) -> GenResult:
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


class _RowSampler:
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


_ENGINES: dict[tuple[str, str, int | None], HFEngine] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(config: HFPolicyConfig) -> HFEngine:
    """The engine of `config`'s model directory, loaded once per process and shared by every
    policy over it (the K samples of an evaluation share one model and one batcher)."""
    key = (str(config.path.resolve()), config.dtype, config.threads)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = HFEngine(
                config.path, dtype=config.dtype, threads=config.threads
            )
        return engine
