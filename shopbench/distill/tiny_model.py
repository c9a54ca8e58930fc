"""Tiny random-initialised Qwen3 models, made on the spot for tests, benches and training runs.

:func:`tiny_qwen3` saves a ``Qwen3ForCausalLM`` of a few tens of thousands of parameters,
whose weights come from the seed, beside a tokenizer in Qwen3's format: the shipped small
one (:func:`~shopbench.distill.small_tokenizer.shipped_small_tokenizer`), any other folder, or
one :func:`train_tiny_tokenizer` fits to the texts at hand. ``hf:DIR`` plays it and
``shopbench distill train`` trains it like any model directory: the template, the tool
schemas, the batcher, the parser and the trainer are the real ones; only the weights know
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.format.markers import END_OF_TEXT, TURN_CLOSE
from shopbench.agents.format.tokens import CHAT_TOKENS
from shopbench.distill.qwen_tokenizer import qwen3_chat_template
from shopbench.distill.small_tokenizer import shipped_small_tokenizer


class TinyModelConfig(BaseModel):
    """The size and the seed of a tiny model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hidden_size: int = Field(default=32, ge=8, description="width of the model")
    layers: int = Field(default=2, ge=1, description="decoder layers")
    heads: int = Field(default=4, ge=1, description="attention heads (half as many key/values)")
    max_positions: int = Field(default=8192, ge=256, description="context length")
    sliding_window: int | None = Field(
        default=None, ge=2,
        description="attention window of every layer; None: full attention. A windowed "
        "model's next token depends on the last layers × window tokens only",
    )  # fmt: skip
    initializer_range: float = Field(
        default=0.2, gt=0,
        description="std of the initial weights (wide, so a random model's logits differ; "
        "Qwen3's own is 0.02)",
    )  # fmt: skip
    seed: int = Field(default=0, description="seed of the weights")

    @classmethod
    def trainable(cls, seed: int = 0) -> TinyModelConfig:
        """The model ``shopbench distill prepare --model tiny`` writes for training runs to
        start from: twice as wide, with Qwen3's own initialisation."""
        return cls(hidden_size=64, initializer_range=0.02, seed=seed)


def train_tiny_tokenizer(texts: Iterable[str], vocab_size: int = 600) -> Any:
    """A byte-level BPE of `vocab_size` tokens trained on `texts`, with the text format's
    tokens (:data:`~shopbench.agents.format.tokens.CHAT_TOKENS`) and Qwen3's chat template:
    a ``PreTrainedTokenizerFast`` for :func:`tiny_qwen3`."""
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(CHAT_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[],
    )  # fmt: skip
    tok.train_from_iterator((t for t in texts if t), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in CHAT_TOKENS])
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, eos_token=TURN_CLOSE, pad_token=END_OF_TEXT,
        chat_template=qwen3_chat_template(), clean_up_tokenization_spaces=False,
    )  # fmt: skip


def tiny_qwen3(out: Path, config: TinyModelConfig, tokenizer: Path | Any | None = None) -> Path:
    """Write a random-initialised ``Qwen3ForCausalLM`` of `config` (deterministic for its
    seed) and `tokenizer` (a tokenizer folder, a loaded tokenizer, or by default the shipped
    small one) to `out`; return `out`."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    if tokenizer is None or isinstance(tokenizer, str | Path):
        tok = AutoTokenizer.from_pretrained(str(tokenizer or shipped_small_tokenizer()))
    else:
        tok = tokenizer
    model_config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=config.hidden_size,
        intermediate_size=config.hidden_size * 2,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=max(1, config.heads // 2),
        head_dim=config.hidden_size // config.heads,
        max_position_embeddings=config.max_positions,
        initializer_range=config.initializer_range,
        use_sliding_window=config.sliding_window is not None,
        sliding_window=config.sliding_window,
        max_window_layers=0,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(config.seed)
    model = Qwen3ForCausalLM(model_config)
    model.generation_config.eos_token_id = model_config.eos_token_id
    model.generation_config.pad_token_id = model_config.pad_token_id
    out = Path(out)
    tok.save_pretrained(out)
    model.save_pretrained(out)
    return out
