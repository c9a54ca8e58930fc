"""A tiny random-initialised Qwen3 model directory, made on the spot for tests and benches.

A byte-level BPE of a few hundred tokens is trained on the given texts, given Qwen3's chat
markers (``<|im_start|>``, ``<|im_end|>``, ``<think>``, ``<tool_call>``, ...) and the
Qwen3 chat template :mod:`trl` ships, and saved beside a ``Qwen3ForCausalLM`` of a few tens
of thousands of parameters whose weights come from the seed. ``hf:DIR`` plays it like any
model directory: the template, the tool schemas, the batcher and the parser are the real
ones; only the weights know nothing.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

MARKERS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
)  # fmt: skip
"""Qwen3's chat markers the tiny tokenizer adds, and whether each is special."""


class TinyModelConfig(BaseModel):
    """The size of a tiny model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vocab_size: int = Field(default=600, ge=300, description="tokens, markers included")
    hidden_size: int = Field(default=32, ge=8, description="width of the model")
    layers: int = Field(default=2, ge=1, description="decoder layers")
    heads: int = Field(default=4, ge=1, description="attention heads")
    max_positions: int = Field(default=8192, ge=256, description="context length")
    sliding_window: int | None = Field(
        default=None, ge=2,
        description="attention window of every layer; None: full attention. A windowed "
        "model's next token depends on the last layers × window tokens only",
    )  # fmt: skip
    initializer_range: float = Field(
        default=0.2, gt=0, description="std of the initial weights (wide, so logits differ)"
    )
    seed: int = Field(default=0, description="seed of the weights")


def qwen3_template() -> str:
    """Qwen3's chat template as :mod:`trl` ships it."""
    return importlib.resources.files("trl").joinpath("chat_templates/qwen3.jinja").read_text()


def build_tiny_model(
    out: Path, texts: Iterable[str], config: TinyModelConfig | None = None
) -> Path:
    """Train the tokenizer on `texts`, make the model, save both to `out`; return `out`."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    cfg = config or TinyModelConfig()
    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size - len(MARKERS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[],
    )  # fmt: skip
    tok.train_from_iterator((t for t in texts if t), trainer=trainer)
    tok.add_tokens(
        [AddedToken(t, special=s, normalized=False) for t, s in MARKERS]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template=qwen3_template(), clean_up_tokenization_spaces=False,
    )  # fmt: skip
    out = Path(out)
    fast.save_pretrained(out)
    model_config = Qwen3Config(
        vocab_size=len(fast),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.hidden_size * 2,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=max(1, cfg.heads // 2),
        head_dim=cfg.hidden_size // cfg.heads,
        max_position_embeddings=cfg.max_positions,
        initializer_range=cfg.initializer_range,
        use_sliding_window=cfg.sliding_window is not None,
        sliding_window=cfg.sliding_window,
        max_window_layers=0,
        tie_word_embeddings=True,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(cfg.seed)
    model = Qwen3ForCausalLM(model_config)
    model.generation_config.eos_token_id = model_config.eos_token_id
    model.generation_config.pad_token_id = model_config.pad_token_id
    model.save_pretrained(out)
    return out
