"""An SFT dataset tokenized for training, with the max length decided and what it cut.

Everything here runs before a model is loaded, so a dataset with no usable sample, a
template the trainer cannot mask, or a tokenizer without the format's tokens fails first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from shopbench.distill.config import TrainConfig
from shopbench.distill.dataset import SPLITS, load_sft
from shopbench.distill.errors import NoSamplesError
from shopbench.distill.masks import IGNORE, Encoded, encode_row
from shopbench.distill.templates import check_tokens, training_template


class LengthReport(BaseModel):
    """How the max length was chosen and what it did to the samples."""

    max_length: int = Field(description="tokens per sample in training")
    source: str = Field(description="config, data, or the model's context")
    longest: int = Field(description="the longest sample's tokens")
    cut: dict[str, int] = Field(description="split → samples cut to max_length")
    dropped: dict[str, int] = Field(description="split → samples dropped (too long, or "
                                    "nothing left to train)")  # fmt: skip


class Samples(BaseModel):
    """The tokenized splits and how they were made."""

    train: list[Encoded]
    validation: list[Encoded]
    lengths: LengthReport

    def tokens(self, split: str = "train") -> int:
        """Tokens of the split's samples."""
        return sum(len(e.input_ids) for e in getattr(self, split))

    def trained_tokens(self, split: str = "train") -> int:
        """Tokens of the split's samples that take loss."""
        return sum(e.trained for e in getattr(self, split))


def prepare_samples(
    tokenizer: Any, data: Path, config: TrainConfig, context: int | None
) -> Samples:
    """The SFT dataset at `data` tokenized with `tokenizer`'s training template, lengths
    settled: ``config.max_length``, else the longest sample capped by the model's `context`;
    a longer sample is dropped or cut (``config.overlong``). NoSamplesError when no train
    sample is left."""
    template = training_template(tokenizer)
    check_tokens(tokenizer)
    rows = load_sft(data)
    encoded: dict[str, list[Encoded]] = {
        s: [encode_row(tokenizer, template, r) for r in rows[s]] for s in SPLITS
    }
    longest = max(len(e.input_ids) for split in encoded.values() for e in split)
    if config.max_length is not None:
        limit, source = config.max_length, "config"
    elif context is not None and longest > context:
        limit, source = context, "the model's context"
    else:
        limit, source = longest, "data"
    kept: dict[str, list[Encoded]] = {}
    cut = {s: 0 for s in SPLITS}
    dropped = {s: 0 for s in SPLITS}
    for s, samples in encoded.items():
        kept[s] = []
        for e in samples:
            if len(e.input_ids) > limit:
                if config.overlong == "drop":
                    dropped[s] += 1
                    continue
                cut[s] += 1
                e = Encoded(input_ids=e.input_ids[:limit], labels=e.labels[:limit])
            if all(x == IGNORE for x in e.labels):
                dropped[s] += 1
                continue
            kept[s].append(e)
    lengths = LengthReport(
        max_length=limit, source=source, longest=longest, cut=cut, dropped=dropped
    )
    if not kept["train"]:
        raise NoSamplesError(
            f"{data}: none of {len(encoded['train'])} train samples fits max_length {limit} "
            f"with a trained token left ({dropped['train']} dropped); raise max_length"
            + ("" if config.overlong == "cut" else " or set overlong: cut")
        )
    return Samples(train=kept["train"], validation=kept["validation"], lengths=lengths)
