"""Benchmark of the engine settings an ``hf:`` model can be evaluated with: the weights'
dtype (float32, or int8 by dynamic quantization) and torch's CPU threads, or the
onnxruntime-genai engine over the model's float32 export (``onnx:THREADS``).

The same product tasks are played by the same model, greedily, several episodes at once,
once per setting, in one run, with the keys and values kept across turns as the
experiment's evaluation keeps them. The first setting is the reference: every other
setting's episodes are compared with its episodes message by message, and the first
difference is named. A faster setting is fit to evaluate with only where its episodes equal
the reference's, since a greedy evaluation is meant to be the model's one answer.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.local.grammar import Decoding
from shopbench.agents.local.ort_engine import Precision
from shopbench.bench.hf_episodes import PlayedFigure, play_episodes, product_tasks
from shopbench.errors import ShopbenchError
from shopbench.records.trajectory import Trajectory

Dtype = Literal["float32", "bfloat16", "int8"]
Engine = Literal["transformers", "onnxruntime-genai"]
SETTING = re.compile(
    r"^(float32|bfloat16|int8|onnx|onnx-int8|onnx-int4):([1-9][0-9]?)(:buffered)?$"
)
ONNX = "onnx"
"""The setting's first part that names the onnxruntime-genai engine (float32; ``onnx-int4``
and ``onnx-int8`` its quantized exports, in the folders beside the float32 one)."""
DEFAULT_SETTINGS = ("float32:2", "float32:1", "int8:2")
"""The settings played when none is given."""


class EngineSetting(BaseModel):
    """One way to run the model: the engine, its weights' dtype, its threads, and whether
    the transformers engine's key-value cache is buffered (written in place) rather than
    concatenated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: Engine = "transformers"
    dtype: Dtype
    threads: int = Field(ge=1, le=99)
    buffered: bool = False
    precision: Precision = "fp32"
    """The onnxruntime-genai export played (the transformers engine's is its dtype)."""

    @classmethod
    def parse(cls, text: str) -> EngineSetting:
        """``DTYPE:THREADS[:buffered]`` (``float32:2``, ``int8:1``, ``float32:2:buffered``)
        or ``onnx[-int8|-int4]:THREADS``; ShopbenchError when malformed."""
        found = SETTING.match(text.strip())
        onnx = found is not None and found.group(1).startswith(ONNX)
        if found is None or (onnx and found.group(3) is not None):
            raise ShopbenchError(
                f"engine setting {text!r}: give DTYPE:THREADS[:buffered], DTYPE float32, "
                "bfloat16 or int8, or onnx[-int8|-int4]:THREADS (e.g. float32:2, "
                "float32:2:buffered, onnx:2, onnx-int4:2)"
            )
        if onnx:
            precision = found.group(1).removeprefix(ONNX).lstrip("-") or "fp32"
            return cls(engine="onnxruntime-genai", dtype="float32", threads=int(found.group(2)),
                       precision=precision)  # type: ignore[arg-type]  # fmt: skip
        return cls(dtype=found.group(1), threads=int(found.group(2)),  # type: ignore[arg-type]
                   buffered=found.group(3) is not None)  # fmt: skip

    @property
    def name(self) -> str:
        """The setting as it was given."""
        if self.engine == "onnxruntime-genai":
            quantized = "" if self.precision == "fp32" else f"-{self.precision}"
            return f"{ONNX}{quantized}:{self.threads}"
        return f"{self.dtype}:{self.threads}" + (":buffered" if self.buffered else "")


class EnginesBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Path = Field(description="the model directory to play (hf:PATH's PATH)")
    catalog: Path = Field(description="the catalog the tasks are played on")
    tasks: Path = Field(description="a task file (its first product tasks are played)")
    settings: list[EngineSetting] = Field(
        default_factory=lambda: [EngineSetting.parse(s) for s in DEFAULT_SETTINGS],
        min_length=1, description="settings to play; the first is the reference",
        json_schema_extra={"flag": "setting"},
    )  # fmt: skip
    view: str | None = Field(default=None, description="view (None: the model's recorded one)")
    episodes: int = Field(default=8, ge=1, description="episodes played per setting")
    max_turns: int = Field(default=8, ge=1, description="assistant turns an episode")
    max_tokens: int = Field(default=312, ge=1, description="tokens generated a turn")
    max_idle_turns: int = Field(default=2, ge=1, description="idle turns that end an episode")
    concurrency: int = Field(default=8, ge=1, description="episodes played at once")
    kv_tokens: int = Field(default=65_536, ge=0, description="keys and values kept (0: none)")
    decoding: Decoding = Field(
        default="free", description="tool calls free, or each turn under the grammar of the "
        "tool schemas and the ids shown, prices grounded too with grounded (the same in "
        "every setting)",
    )  # fmt: skip
    onnx_dir: Path | None = Field(
        default=None, description="the onnx settings' onnxruntime-genai folder (None: the "
        "model's onnx folder, as `shopbench distill export-onnx` writes it)",
    )  # fmt: skip


class EngineFigure(PlayedFigure):
    """One setting's figures."""

    setting: str
    tokens_per_s: float = Field(description="generated tokens a second")
    solved: int = Field(description="episodes the outcome grader counts a success")
    same_as_reference: bool = Field(description="every episode's messages equal the first's")
    same_episodes: int = Field(description="episodes whose messages equal the reference's")
    first_difference: str | None = Field(
        default=None, description="where the first differing episode parts from the reference"
    )
    engine_s: float = Field(description="seconds inside the engine's generate calls")
    prefill_s: float = Field(
        description="of engine_s, until each call's first new token: the prompts' prefill"
    )
    mask_s: float = Field(
        description="of engine_s, in the logits processors (the grammar masks of constrained "
        "rows)"
    )
    prefill_tokens: int = Field(
        description="prompt positions the engine ran (padding to a batch's longest row "
        "included; kept or cached ones not)"
    )


class EnginesBenchResult(BaseModel):
    """The measurement."""

    model: str
    reference: str
    figures: list[EngineFigure]


def first_difference(ours: list[Trajectory], theirs: list[Trajectory]) -> str | None:
    """Where `ours` first parts from `theirs` (``episode 3, message 7``); None when equal."""
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for j, (m, n) in enumerate(zip(a.messages, b.messages, strict=False)):
            if m != n:
                return f"episode {i}, message {j} ({m.role})"
        if len(a.messages) != len(b.messages):
            return f"episode {i}, message {min(len(a.messages), len(b.messages))} (one ends)"
    return None


def run(cfg: EnginesBenchConfig) -> EnginesBenchResult:
    """Play the episodes once per setting; the figures, each compared with the first's."""
    import torch

    from shopbench.agents.local.config import HFPolicyConfig
    from shopbench.agents.local.engine import HFEngine
    from shopbench.agents.local.ort_engine import ORTEngine, onnx_folder
    from shopbench.agents.local.policy import HFPolicy
    from shopbench.chat import EpisodeLimits
    from shopbench.env.env import ShoppingEnv
    from shopbench.trajectory.loop import RunLimits

    tasks = product_tasks(cfg.tasks, cfg.episodes)
    env = ShoppingEnv.open(cfg.catalog, EpisodeLimits(max_turns=cfg.max_turns))
    limits = RunLimits(max_idle_turns=cfg.max_idle_turns)
    before = torch.get_num_threads()
    figures: list[EngineFigure] = []
    reference: list[Trajectory] = []
    try:
        for setting in cfg.settings:
            engine: HFEngine | ORTEngine
            folder = onnx_folder(cfg.model, cfg.onnx_dir, setting.precision)
            if setting.engine == "onnxruntime-genai":
                engine = ORTEngine(cfg.model, onnx_dir=folder, threads=setting.threads)
            else:
                engine = HFEngine(cfg.model, dtype=setting.dtype, threads=setting.threads,
                                  kv_tokens=cfg.kv_tokens, buffered=setting.buffered)  # fmt: skip
            policy = HFPolicy(
                HFPolicyConfig(path=cfg.model, max_new_tokens=cfg.max_tokens, view=cfg.view,
                               max_batch=cfg.concurrency, dtype=setting.dtype,
                               buffered_cache=setting.buffered, engine=setting.engine,
                               onnx_dir=folder, decoding=cfg.decoding),
                engine=engine,
            )  # fmt: skip
            start = time.perf_counter()
            runs = asyncio.run(play_episodes(env, tasks, policy, limits, cfg.concurrency))
            seconds = time.perf_counter() - start
            reference = reference or runs
            same = [a.messages == b.messages for a, b in zip(runs, reference, strict=True)]
            figures.append(EngineFigure(
                setting=setting.name, episodes=len(runs), turns=sum(t.turns for t in runs),
                seconds=round(seconds, 2), episodes_per_s=round(len(runs) / seconds, 4),
                new_tokens=engine.stats.new_tokens,
                tokens_per_s=round(engine.stats.new_tokens / seconds, 2),
                solved=sum(1 for t in runs if t.outcome.success),
                same_as_reference=all(same), same_episodes=sum(same),
                first_difference=first_difference(runs, reference),
                engine_s=round(engine.stats.seconds, 2),
                prefill_s=round(engine.stats.prefill_seconds, 2),
                mask_s=round(engine.stats.mask_seconds, 2),
                prefill_tokens=engine.stats.prefill_tokens,
            ))  # fmt: skip
    finally:
        torch.set_num_threads(before)
    return EnginesBenchResult(
        model=str(cfg.model), reference=cfg.settings[0].name, figures=figures
    )
