"""A small byte-level BPE tokenizer in Qwen3's format, for fast training tests and benches.

Qwen3's own vocabulary (151,669 tokens) makes a tiny test model mostly embedding and its
softmax the cost of every step. This one is trained on catalog and trajectory text
(:func:`corpus_texts`) with Qwen3's pre-tokenizer, added tokens and chat template, so every
row renders exactly as it would for Qwen3, in a few thousand tokens.

The shipped copy (:func:`shipped_small_tokenizer`) was made by :func:`train_small_tokenizer`
on :func:`corpus_texts` of the 2,000-product catalog of seed 7 and 64 reference episodes.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from shopbench.agents.format.markers import END_OF_TEXT, TURN_CLOSE
from shopbench.catalog.schema import Product
from shopbench.distill.errors import TokenizerError
from shopbench.distill.qwen_tokenizer import (
    ADDED_TOKENS,
    bytes_to_unicode,
    qwen3_chat_template,
    qwen3_pipeline,
)
from shopbench.records.trajectory import Trajectory

SMALL_VOCAB = 4096
"""Tokens of the shipped small tokenizer, added tokens included."""


def corpus_texts(products: Iterable[Product], trajectories: Iterable[Trajectory]) -> Iterator[str]:
    """The text a shopping agent's tokenizer sees: product titles, categories, descriptions
    and specifications; the tool schemas and every message of the trajectories."""
    for p in products:
        yield from (p.title, p.category, p.short_description, p.description, p.specification)
    for t in trajectories:
        yield json.dumps(t.tools, ensure_ascii=False)
        for m in t.messages:
            yield from (m.content or "", m.reasoning_content or "")
            for c in m.tool_calls or []:
                yield json.dumps({"name": c.function.name, "arguments": c.function.arguments})


def train_small_tokenizer(texts: Iterable[str], out: Path, vocab_size: int = SMALL_VOCAB) -> Path:
    """Train a byte-level BPE of `vocab_size` tokens on `texts` in Qwen3's format (its
    pre-tokenizer, its added tokens, its chat template), write it to `out`, return `out`."""
    from tokenizers import AddedToken, Tokenizer, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(ADDED_TOKENS) + 1:
        raise TokenizerError(
            f"vocab_size {vocab_size} cannot hold the 256 bytes and the added tokens"
        )
    tok = Tokenizer(BPE(dropout=None, unk_token=None, fuse_unk=False, byte_fallback=False))
    qwen3_pipeline(tok)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(ADDED_TOKENS), show_progress=False,
        initial_alphabet=sorted(bytes_to_unicode().values()), special_tokens=[],
    )  # fmt: skip
    tok.train_from_iterator((t for t in texts if t), trainer=trainer)
    tok.add_tokens(
        [
            AddedToken(text, special=special, normalized=False, lstrip=False, rstrip=False)
            for text, special in ADDED_TOKENS
        ]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=TURN_CLOSE, pad_token=END_OF_TEXT,
        unk_token=None, bos_token=None, model_max_length=131_072,
        clean_up_tokenization_spaces=False, split_special_tokens=False,
        chat_template=qwen3_chat_template(),
    )  # fmt: skip
    out = Path(out)
    fast.save_pretrained(out)
    return out


def shipped_small_tokenizer() -> Path:
    """The folder of the small tokenizer shipped with shopbench (loads with
    ``AutoTokenizer.from_pretrained``)."""
    path = Path(
        str(importlib.resources.files("shopbench.distill").joinpath("data/small_tokenizer"))
    )
    if not (path / "tokenizer.json").is_file():
        raise TokenizerError(f"the shipped small tokenizer is missing from {path}")
    return path
