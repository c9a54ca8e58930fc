"""Qwen3's tokenizer rebuilt offline from the ``qwen.tiktoken`` rank file.

Qwen publishes its byte-level BPE as a tiktoken rank file (Apache-2.0) that PyPI packages
such as ``dashscope`` and ``qwen-agent`` ship. The Hugging Face ``tokenizer.json`` of Qwen3
holds the same ranks in another form: the vocabulary is every rank's bytes through GPT-2's
byte-to-unicode map, and the merges list one merge per multi-byte token, in rank order, each
the pair of tokens that byte-level BPE (restricted to lower ranks) leaves just before the
token forms. 151,643 ranks give 151,387 merges; Qwen3's added tokens follow at
151,643–151,668, with the chat template :mod:`trl` ships as Qwen3's.
"""

from __future__ import annotations

import base64
import importlib.resources
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

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
from shopbench.distill.errors import TokenizerError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Qwen2/Qwen3's pre-tokenizer split (the same pattern as the tiktoken ``pat_str``)."""

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
              "use_regex": False}  # fmt: skip
"""Qwen3's byte-level post-processor and decoder, as its tokenizer.json writes them."""

RANK_FILE_PACKAGES = ("dashscope", "qwen_agent")
"""Packages that ship ``qwen.tiktoken``, searched in this order."""

BASE_VOCAB = 151_643
"""Ranks in ``qwen.tiktoken``."""

ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    (END_OF_TEXT, True), (TURN_OPEN, True), (TURN_CLOSE, True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True),
    ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True),
    (CALL_OPEN, False), (CALL_CLOSE, False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
    (RESPONSE_OPEN, False), (RESPONSE_CLOSE, False),
    (THINK_OPEN, False), (THINK_CLOSE, False),
)  # fmt: skip
"""Qwen3's added tokens from id 151,643 on, and whether each is special (the text format's
markers among them, from :mod:`shopbench.agents.format.markers`)."""


@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable characters."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def find_rank_file() -> Path:
    """The ``qwen.tiktoken`` shipped by an installed package of :data:`RANK_FILE_PACKAGES`;
    TokenizerError naming them when none is installed."""
    for package in RANK_FILE_PACKAGES:
        if importlib.util.find_spec(package) is None:
            continue
        for where in ("resources/qwen.tiktoken", "qwen.tiktoken"):
            path = Path(str(importlib.resources.files(package).joinpath(where)))
            if path.is_file():
                return path
    raise TokenizerError(
        "no qwen.tiktoken found: install one of " + ", ".join(RANK_FILE_PACKAGES)
        + " (pip install dashscope), or pass the file's path"
    )


def read_ranks(path: Path) -> dict[bytes, int]:
    """The rank file's ``base64 rank`` lines as bytes → rank; TokenizerError naming the line
    when one is malformed or the ranks are not 0..n-1."""
    ranks: dict[bytes, int] = {}
    with Path(path).open("rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
            except ValueError as e:
                raise TokenizerError(f"{path}:{number}: not 'base64 rank' ({e})") from None
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise TokenizerError(f"{path}: ranks are not 0..{len(ranks) - 1}, each once")
    return ranks


def _last_merge(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes]:
    """The two parts byte-level BPE joins last to form `token`: BPE over its bytes with
    only the ranks below the token's own."""
    limit = ranks[token]
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best_rank, best_at = limit, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1], limit)
            if r < best_rank:
                best_rank, best_at = r, i
        if best_at < 0:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    if len(parts) != 2:
        raise TokenizerError(f"token of rank {limit} cannot be formed from lower ranks")
    return parts[0], parts[1]


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The byte-level vocabulary and the merges, in rank order, for `ranks`."""
    table = bytes_to_unicode()

    def show(b: bytes) -> str:
        return "".join(table[x] for x in b)

    vocab = {show(token): rank for token, rank in ranks.items()}
    merges = [
        (show(left), show(right))
        for token, _ in sorted(ranks.items(), key=lambda kv: kv[1])
        if len(token) > 1
        for left, right in [_last_merge(token, ranks)]
    ]
    return vocab, merges


def qwen3_chat_template() -> str:
    """Qwen3's inference chat template as :mod:`trl` ships it (for identity comparison)."""
    try:
        return (
            importlib.resources.files("trl").joinpath("chat_templates/qwen3.jinja").read_text()
        )
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise TokenizerError(f"Qwen3's chat template comes with trl ({e})") from None


def qwen3_pipeline(tok: Tokenizer) -> None:
    """Give `tok` Qwen3's text pipeline: NFC, the split regex then byte-level
    pre-tokenisation, and byte-level post-processing and decoding (every option false, as
    Qwen3's ``tokenizer.json`` writes them)."""
    from tokenizers import Regex, decoders, normalizers, pre_tokenizers, processors

    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.post_processor = processors.ByteLevel(
        add_prefix_space=False, trim_offsets=False, use_regex=False
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)


def build_qwen3_tokenizer(out: Path, rank_file: Path | None = None) -> Path:
    """Write Qwen3's tokenizer (``tokenizer.json``, ``tokenizer_config.json``) to `out`,
    rebuilt from `rank_file` (default: :func:`find_rank_file`), and return `out`.

    ``transformers.AutoTokenizer.from_pretrained(out)`` loads it offline."""
    from tokenizers import AddedToken, Tokenizer
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    ranks = read_ranks(rank_file or find_rank_file())
    if len(ranks) != BASE_VOCAB:
        raise TokenizerError(f"qwen.tiktoken has {len(ranks)} ranks, Qwen3's has {BASE_VOCAB}")
    vocab, merges = vocab_and_merges(ranks)
    tok = Tokenizer(
        BPE(
            vocab=vocab, merges=merges, dropout=None, unk_token=None,
            continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False,
            byte_fallback=False, ignore_merges=False,
        )
    )  # fmt: skip
    qwen3_pipeline(tok)
    tok.add_tokens(
        [
            AddedToken(text, special=special, normalized=False, lstrip=False, rstrip=False)
            for text, special in ADDED_TOKENS
        ]
    )
    if tok.token_to_id(ADDED_TOKENS[0][0]) != BASE_VOCAB:
        raise TokenizerError("Qwen3's added tokens did not land at 151643")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=TURN_CLOSE, pad_token=END_OF_TEXT,
        unk_token=None, bos_token=None, model_max_length=131_072,
        clean_up_tokenization_spaces=False, split_special_tokens=False, errors="replace",
        chat_template=qwen3_chat_template(),
    )  # fmt: skip
    out = Path(out)
    fast.save_pretrained(out)
    # tokenizers serialises its ByteLevel decoder with its defaults whatever it was given;
    # Qwen3's file spells the three options out as false (decoding is the same either way).
    tok_path = out / "tokenizer.json"
    data = json.loads(tok_path.read_text(encoding="utf-8"))
    data["decoder"] = dict(BYTE_LEVEL)
    tok_path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "Qwen2Tokenizer"
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return out
