"""Qwen3's tokenizer rebuilt offline from qwen.tiktoken, checked against tiktoken itself on
shopping text; the small BPE tokenizer shipped for fast training tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from support.distill_data import play
from transformers import AutoTokenizer

from shopbench.agents.format.tokens import FORMAT_TOKENS
from shopbench.distill.errors import TokenizerError
from shopbench.distill.qwen_tokenizer import (
    ADDED_TOKENS,
    BASE_VOCAB,
    BYTE_LEVEL,
    PRETOKENIZE_REGEX,
    find_rank_file,
    read_ranks,
)
from shopbench.distill.small_tokenizer import (
    corpus_texts,
    shipped_small_tokenizer,
    train_small_tokenizer,
)
from shopbench.distill.templates import check_tokens


@pytest.fixture(scope="module")
def texts(env: Any, catalog: Any) -> list[str]:
    products = next(iter(catalog.iter_products(batch_size=40)))
    return [t for t in corpus_texts(products, play(env, catalog, 3)) if t]


def test_the_rebuild_has_qwen3s_merges_and_added_tokens(qwen3_tokenizer_dir: Path) -> None:
    data = json.loads((qwen3_tokenizer_dir / "tokenizer.json").read_text())
    merges = data["model"]["merges"]
    assert len(merges) == 151_387 and len(data["model"]["vocab"]) == BASE_VOCAB
    assert merges[:3] == [["Ġ", "Ġ"], ["ĠĠ", "ĠĠ"], ["i", "n"]]
    added = {t["id"]: (t["content"], t["special"]) for t in data["added_tokens"]}
    assert added == {BASE_VOCAB + i: token for i, token in enumerate(ADDED_TOKENS)}
    assert added[151_667] == ("<think>", False) and added[151_645] == ("<|im_end|>", True)
    assert [s["type"] for s in data["pre_tokenizer"]["pretokenizers"]] == ["Split", "ByteLevel"]
    assert data["normalizer"] == {"type": "NFC"}
    assert data["post_processor"] == data["decoder"] == BYTE_LEVEL
    assert {k: v for k, v in data["model"].items() if k not in ("vocab", "merges")} == {
        "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
        "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
        "ignore_merges": False,
    }  # fmt: skip


def test_the_rebuild_encodes_as_tiktoken_does(qwen3_tokenizer_dir: Path, texts: list[str]) -> None:
    tok = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    assert type(tok).__name__ == "Qwen2Tokenizer" and len(tok) == 151_669
    reference = tiktoken.Encoding(
        "qwen", pat_str=PRETOKENIZE_REGEX, mergeable_ranks=read_ranks(find_rank_file()),
        special_tokens={t: BASE_VOCAB + i for i, (t, _) in enumerate(ADDED_TOKENS)},
    )  # fmt: skip
    assert tok("Hello world")["input_ids"] == [9707, 1879]
    for text in texts[:400]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == reference.encode(text), text[:80]
        assert tok.decode(ids) == text
    assert tok.convert_tokens_to_ids(["<tool_call>", "</think>"]) == [151_657, 151_668]
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    check_tokens(tok)


def test_a_malformed_rank_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "qwen.tiktoken"
    bad.write_text("IQ== 0\nnot-a-line\n")
    with pytest.raises(TokenizerError, match=r"qwen.tiktoken:2: not 'base64 rank'"):
        read_ranks(bad)
    bad.write_text("IQ== 0\nIg== 5\n")
    with pytest.raises(TokenizerError, match="ranks are not 0..1"):
        read_ranks(bad)


def test_the_shipped_small_tokenizer_speaks_qwen3s_format() -> None:
    tok = AutoTokenizer.from_pretrained(shipped_small_tokenizer())
    assert len(tok) == 4096
    check_tokens(tok)
    for token in FORMAT_TOKENS:
        assert len(tok.encode(token, add_special_tokens=False)) == 1
    text = "I'm looking for a Dexel power strip under ₱500 with COD."
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert len(tok.encode(text, add_special_tokens=False)) < len(text.encode()) / 2
    rendered = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_a_small_tokenizer_trains_on_shopping_text(texts: list[str], tmp_path: Path) -> None:
    out = train_small_tokenizer(texts, tmp_path / "tok", vocab_size=600)
    tok = AutoTokenizer.from_pretrained(out)
    assert len(tok) == 600
    check_tokens(tok)
    sample = texts[0]
    assert tok.decode(tok.encode(sample, add_special_tokens=False)) == sample
    with pytest.raises(TokenizerError, match="cannot hold"):
        train_small_tokenizer(texts, tmp_path / "tiny", vocab_size=100)
