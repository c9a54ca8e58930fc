"""The GRPO run's config: one typed model, read from YAML or TOML, every key checked.

The shipped ``grpo.yaml`` (``shopbench/distill/rl/configs/``) is a file of this model. The
defaults follow TRL's advice for multi-turn tool use: a group of 8 rollouts per task, a cap
on tool-calling iterations below the arena's turn budget, the DAPO token-level loss (no
length bias across multi-turn completions of very different lengths), truncated rollouts
left out of the loss, and vLLM colocated with the trainer where a GPU has it.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.chat import MAX_TURNS
from shopbench.distill.config import load_config
from shopbench.distill.errors import RLError

Auto = Literal["auto"]
LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo"]


class RLConfig(BaseModel):
    """How `shopbench distill rl` trains (TRL's GRPOTrainer with the arena's environment)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_generations: int = Field(default=8, ge=2, description="rollouts per task (a GRPO group)")
    per_device_train_batch_size: int = Field(
        default=8, ge=1, description="rollouts per device step (a multiple of num_generations "
        "together with gradient_accumulation_steps and the number of processes)",
    )  # fmt: skip
    gradient_accumulation_steps: int = Field(default=1, ge=1, description="steps per update")
    max_steps: int = Field(default=200, ge=1, description="optimizer steps")
    learning_rate: float = Field(default=1e-6, gt=0.0, description="peak learning rate")
    lr_scheduler_type: str = Field(default="constant", description="transformers' scheduler")
    warmup_ratio: float = Field(default=0.0, ge=0.0, lt=1.0, description="warm-up share")
    loss_type: LossType = Field(default="dapo", description="TRL's loss aggregation")
    beta: float = Field(default=0.0, ge=0.0, description="KL coefficient to the reference model")
    epsilon: float = Field(default=0.2, gt=0.0, description="clipping range of the ratio")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        default="group", description="how advantages are normalised"
    )
    max_completion_length: int = Field(
        default=8192, ge=16,
        description="tokens of a whole rollout after the prompt: every turn, tool results included",
    )  # fmt: skip
    max_tool_calling_iterations: int = Field(
        default=15, ge=1, lt=MAX_TURNS,
        description=f"tool-calling turns per rollout (below the arena's {MAX_TURNS}-turn budget)",
    )  # fmt: skip
    mask_truncated_completions: bool = Field(
        default=True, description="leave rollouts cut at max_completion_length out of the loss"
    )
    temperature: float = Field(default=1.0, gt=0.0, description="sampling temperature")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="nucleus sampling")
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="chat-template arguments, e.g. enable_thinking: false"
    )
    success_bonus: float = Field(
        default=1.0, ge=0.0, description="outcome reward: added to the mean rule score on success"
    )
    dense_weight: float = Field(
        default=0.0, ge=0.0, description="weight of the viewed_slots term (0: off)"
    )
    judge: str | None = Field(
        default=None, description="process judge for the judge term: rubric or openai:MODEL@URL"
    )
    judge_weight: float = Field(default=0.0, ge=0.0, description="weight of the judge term")
    use_vllm: bool | Auto = Field(
        default="auto", description="generate with vLLM (auto: where a GPU and vllm are)"
    )
    vllm_mode: Literal["colocate", "server"] = Field(
        default="colocate", description="vLLM in the training processes, or a trl vllm-serve"
    )
    vllm_gpu_memory_utilization: float = Field(
        default=0.3, gt=0.0, le=1.0, description="colocated vLLM's share of GPU memory"
    )
    lora: bool = Field(default=False, description="train a LoRA adapter instead of every weight")
    lora_r: int = Field(default=16, ge=1, le=512, description="LoRA rank")
    lora_alpha: int = Field(default=32, ge=1, description="LoRA alpha")
    bf16: bool | Auto = Field(default="auto", description="bf16 (auto: where a GPU supports it)")
    gradient_checkpointing: bool | Auto = Field(
        default="auto", description="recompute activations (auto: on a GPU)"
    )
    use_cpu: bool | Auto = Field(default="auto", description="train on CPU (auto: without a GPU)")
    logging_steps: int = Field(default=1, ge=1, description="log every N steps")
    save_steps: int | None = Field(default=None, ge=1, description="checkpoint every N steps")
    rollouts_logged: int = Field(
        default=4, ge=0, description="rollouts per step written to rollouts.jsonl"
    )
    seed: int = Field(default=0, description="seed of sampling, shuffling and episode keys")
    report_to: str = Field(default="none", description="transformers' report_to")
    deepspeed: str | None = Field(default=None, description="a DeepSpeed JSON config")

    @model_validator(mode="after")
    def _judge_named(self) -> RLConfig:
        if self.judge_weight > 0 and not self.judge:
            raise ValueError("judge_weight > 0 needs a judge (rubric or openai:MODEL@URL)")
        return self


SHIPPED = ("grpo",)
"""The shipped configs, by name."""


def shipped_rl_config(name: str) -> Path:
    """The path of a shipped config (:data:`SHIPPED`)."""
    if name not in SHIPPED:
        raise RLError(f"no shipped RL config {name!r} (shipped: {', '.join(SHIPPED)})")
    return Path(
        str(importlib.resources.files("shopbench.distill.rl").joinpath(f"configs/{name}.yaml"))
    )


def load_rl_config(path: Path | str | None = None, **overrides: Any) -> RLConfig:
    """The config in `path` (YAML, or TOML by its suffix; a shipped name; None: defaults)
    with `overrides` on top (None values ignored). RLError names an unknown key with the
    keys that exist, or a refused value and why, before any model is loaded."""
    return load_config(
        RLConfig, path, overrides, shipped=shipped_rl_config, shipped_names=SHIPPED,
        error=RLError,
    )  # fmt: skip
