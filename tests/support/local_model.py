"""Tiny local models for the tests of ``hf:`` policies: built from the real builder, and
one taught to answer every first turn with a fixed reply (a few seconds of training)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shopbench.agents.local.engine import HFEngine
from shopbench.distill.tiny_model import TinyModelConfig, tiny_qwen3, train_tiny_tokenizer


def train_to_say(
    path: Path, prompts: Sequence[tuple[int, ...]], reply: str, *, steps: int, context: int
) -> None:
    """Fit the model in `path` so that after each of `prompts` it writes `reply` and ends
    its turn; saved back to `path`. Only the last `context` tokens of each prompt are
    trained on: exact for a windowed model that reads no further back."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path))
    target = tok.encode(reply, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    torch.manual_seed(0)
    optim = torch.optim.AdamW(model.parameters(), lr=3e-2)
    rows = [list(p[-context:]) + target for p in prompts]
    model.train()
    for step in range(steps):
        row = rows[step % len(rows)]
        ids = torch.tensor([row])
        labels = torch.full_like(ids, -100)
        labels[0, len(row) - len(target) :] = ids[0, len(row) - len(target) :]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optim.step()
        optim.zero_grad()
    model.eval()
    model.save_pretrained(path)


def tiny_engine(path: Path, texts: Sequence[str], **size: int | float) -> HFEngine:
    """A tiny model built at `path` with its tokenizer trained on `texts`, loaded."""
    tiny_qwen3(path, TinyModelConfig(**size), train_tiny_tokenizer(texts))
    return HFEngine(path)
