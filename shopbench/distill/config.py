"""The trainer's config: one typed model, read from YAML or TOML, every key checked.

The shipped configs (``shopbench/distill/configs/``) are files of this model; a key that is
not a field is an error naming the key and the fields, before any model is loaded.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shopbench.datafiles import read_mapping
from shopbench.distill.errors import TrainConfigError
from shopbench.errors import ShopbenchError, first_problem

ConfigT = TypeVar("ConfigT", bound=BaseModel)

Auto = Literal["auto"]


class TrainConfig(BaseModel):
    """How `shopbench distill train` trains (TRL's SFTTrainer underneath)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lora: bool = Field(default=False, description="train a LoRA adapter instead of every weight")
    lora_r: int = Field(default=16, ge=1, le=512, description="LoRA rank")
    lora_alpha: int = Field(default=32, ge=1, description="LoRA alpha (scale = alpha / r)")
    lora_dropout: float = Field(default=0.05, ge=0.0, lt=1.0, description="LoRA dropout")
    lora_target_modules: str | list[str] = Field(
        default="all-linear", description="modules LoRA adapts (peft's names)"
    )
    lora_modules_to_save: list[str] = Field(
        default_factory=list,
        description="modules trained in full beside a LoRA adapter and saved with it (peft's "
        "names; embed_tokens and lm_head for a model whose format tokens were added untrained)",
    )
    learning_rate: float = Field(default=1e-5, gt=0.0, description="peak learning rate")
    lr_scheduler_type: str = Field(default="cosine", description="transformers' scheduler name")
    warmup_ratio: float = Field(default=0.03, ge=0.0, lt=1.0, description="warm-up share")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay")
    num_train_epochs: float = Field(default=2.0, gt=0.0, description="passes over the data")
    max_steps: int = Field(default=-1, ge=-1, description="stop after this many steps (-1: epochs)")
    per_device_train_batch_size: int = Field(default=1, ge=1, description="rows per device step")
    gradient_accumulation_steps: int = Field(default=8, ge=1, description="steps per update")
    max_length: int | None = Field(
        default=None, ge=16,
        description="tokens per sample (None: the longest sample, capped by the model's context)",
    )  # fmt: skip
    overlong: Literal["drop", "cut"] = Field(
        default="drop", description="what happens to a sample longer than max_length"
    )
    packing: bool = Field(default=False, description="pack samples into max_length sequences")
    bf16: bool | Auto = Field(default="auto", description="bf16 (auto: where a GPU supports it)")
    gradient_checkpointing: bool | Auto = Field(
        default="auto", description="recompute activations (auto: on a GPU)"
    )
    attn_implementation: str = Field(
        default="auto", description="auto: flash_attention_2 where installed on a GPU, else sdpa"
    )
    use_liger_kernel: bool | Auto = Field(
        default="auto", description="Liger kernels (auto: where installed on a GPU)"
    )
    logging_steps: int = Field(default=10, ge=1, description="log train loss every N steps")
    eval_steps: int | None = Field(
        default=None, ge=1, description="eval loss every N steps (None: every epoch)"
    )
    save_steps: int | None = Field(
        default=None, ge=1, description="checkpoint every N steps (None: every epoch)"
    )
    save_total_limit: int = Field(default=2, ge=1, description="checkpoints kept")
    seed: int = Field(default=0, description="seed of shuffling and initialisation")
    use_cpu: bool | Auto = Field(default="auto", description="train on CPU (auto: without a GPU)")
    dataloader_num_workers: int = Field(default=0, ge=0, description="data-loading processes")
    report_to: str = Field(default="none", description="transformers' report_to (none, wandb, ...)")
    deepspeed: str | None = Field(default=None, description="a DeepSpeed JSON config (ZeRO-3)")
    merge_lora: bool = Field(
        default=True, description="also write the LoRA adapter merged into the base weights"
    )
    progress: bool = Field(
        default=True, description="progress bar and logged losses on the terminal"
    )

    @model_validator(mode="after")
    def _saved_modules_need_lora(self) -> TrainConfig:
        if self.lora_modules_to_save and not self.lora:
            raise ValueError(
                "lora_modules_to_save is for a LoRA run (full fine-tuning trains every module)"
            )
        return self


CONFIGS = ("qwen3-4b-full", "qwen3-4b-lora", "smollm2-lora")
"""The shipped configs, by name."""


def shipped_config(name: str) -> Path:
    """The path of a shipped config (:data:`CONFIGS`); TrainConfigError for another name."""
    if name not in CONFIGS:
        raise TrainConfigError(f"no shipped config {name!r} (shipped: {', '.join(CONFIGS)})")
    return Path(
        str(importlib.resources.files("shopbench.distill").joinpath(f"configs/{name}.yaml"))
    )


def read_config_file(path: Path, error: type[ShopbenchError] = TrainConfigError) -> dict[str, Any]:
    """The mapping in the YAML (or, by its suffix, TOML or JSON) file at `path`; `error`
    says why not."""
    return read_mapping(path, what="the config", error=error, default="yaml")


def load_config(
    model: type[ConfigT],
    path: Path | str | None,
    overrides: dict[str, Any],
    *,
    shipped: Callable[[str], Path],
    shipped_names: Sequence[str],
    error: type[ShopbenchError],
) -> ConfigT:
    """`model` from the file at `path` (YAML, or TOML by its suffix; a shipped name; None:
    the defaults) with `overrides` on top (None values ignored). `error` names a key that
    does not exist, with the keys that do, or a value refused and why."""
    data: dict[str, Any] = {}
    where = "the command line"
    if path is not None:
        p = Path(path)
        if not p.is_file() and str(path) in shipped_names:
            p = shipped(str(path))
        if not p.is_file():
            names = ", ".join(shipped_names)
            raise error(f"{p}: no such config file (or shipped config: {names})")
        data = read_config_file(p, error)
        where = str(p)
        unknown = sorted(set(data) - set(model.model_fields))
        if unknown:
            raise error(
                f"{p}: unknown key {', '.join(map(repr, unknown))} "
                f"(keys: {', '.join(model.model_fields)})"
            )
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return model(**data)
    except ValidationError as e:
        raise error(f"{where}: {first_problem(e, default='config')}") from None


def load_train_config(path: Path | None = None, **overrides: Any) -> TrainConfig:
    """The config in `path` (YAML, or TOML by its suffix; a shipped name; None: the
    defaults) with `overrides` on top (None values are ignored). TrainConfigError names a key
    that does not exist, with the keys that do, or a value refused and why."""
    return load_config(
        TrainConfig, path, overrides, shipped=shipped_config, shipped_names=tuple(CONFIGS),
        error=TrainConfigError,
    )  # fmt: skip
