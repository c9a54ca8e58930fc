"""`shopbench distill train`: TRL's SFTTrainer on a tokenized SFT dataset.

Full fine-tune or LoRA (peft, all linear layers). The device decides the defaults left on
``auto``: on a GPU bf16 where supported, gradient checkpointing, FlashAttention 2 and Liger
kernels where installed; on CPU none of them. Checkpoints go to ``OUT/checkpoints`` (resume
from the last with ``resume=True``), the final model (or adapter) to ``OUT/model``, a LoRA
adapter merged into its base to ``OUT/merged``, and the report to ``OUT/train_report.json``.
The same code runs under ``accelerate launch`` on one GPU or many (DeepSpeed ZeRO-3 through
the ``deepspeed`` key).
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.format.views import FULL, ObservationView, record_view
from shopbench.distill.config import TrainConfig
from shopbench.distill.dataset import read_report
from shopbench.distill.errors import DistillError
from shopbench.distill.samples import LengthReport, Samples, prepare_samples

REPORT = "train_report.json"


class LossPoint(BaseModel):
    """One logged loss."""

    step: int
    loss: float


class TrainReport(BaseModel):
    """What a training run did."""

    model: str
    data: str
    out: str
    lora: bool
    device: str
    config: TrainConfig
    lengths: LengthReport
    samples: dict[str, int] = Field(description="split → samples trained on / evaluated")
    tokens: int = Field(description="tokens of the train split (one epoch)")
    trained_tokens: int = Field(description="of those, tokens that take loss")
    steps: int = Field(description="optimizer steps run")
    seen_tokens: int = Field(description="input tokens the trainer processed, padding left "
                             "out, across every resumed start")
    train_s: float
    tokens_per_s: float
    train_loss: list[LossPoint]
    eval_loss: list[LossPoint]
    model_dir: str
    merged_dir: str | None = None
    view: str = Field(
        default="full", description="the observation view the rows were written in, recorded "
        "in every model directory written so inference reads the same",
    )  # fmt: skip


class Trained(BaseModel):
    """The report and the model as it is in memory after training (merged for LoRA when
    ``merge_lora``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    report: TrainReport
    model: Any


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _settle(config: TrainConfig) -> dict[str, Any]:
    """The device-dependent settings with ``auto`` decided."""
    import torch

    cuda = torch.cuda.is_available() and config.use_cpu is not True
    bf16 = config.bf16 if config.bf16 != "auto" else cuda and torch.cuda.is_bf16_supported()
    gc = config.gradient_checkpointing
    attn = config.attn_implementation
    if attn == "auto":
        attn = "flash_attention_2" if cuda and _has("flash_attn") else "sdpa"
    liger = config.use_liger_kernel
    return {
        "device": "cuda" if cuda else "cpu",
        "use_cpu": not cuda,
        "bf16": bool(bf16),
        "gradient_checkpointing": bool(cuda if gc == "auto" else gc),
        "attn_implementation": attn,
        "use_liger_kernel": bool(cuda and _has("liger_kernel") if liger == "auto" else liger),
    }


def _checkpointing(on: bool) -> dict[str, bool]:
    """Activation checkpointing under the name this transformers takes (renamed in 5.x)."""
    from trl import SFTConfig

    fields = SFTConfig.__dataclass_fields__
    return {"activation_checkpointing" if "activation_checkpointing" in fields else
            "gradient_checkpointing": on}  # fmt: skip


def _dataset(samples: list[Any]) -> Any:
    from datasets import Dataset

    return Dataset.from_dict(
        {"input_ids": [e.input_ids for e in samples], "labels": [e.labels for e in samples]}
    )


def _losses(history: list[dict[str, Any]], key: str) -> list[LossPoint]:
    return [LossPoint(step=int(h["step"]), loss=float(h[key])) for h in history if key in h]


def _checkpoint_tokens(checkpoints: Path) -> int:
    """The input tokens the checkpoint a resumed training starts from had seen (the one
    ``resume_from_checkpoint=True`` picks)."""
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(str(checkpoints))
    if last is None:
        return 0
    try:
        state = json.loads((Path(last) / "trainer_state.json").read_text(encoding="utf-8"))
        return int(state.get("num_input_tokens_seen", 0))
    except (OSError, ValueError, TypeError):
        return 0


def _data_view(data: Path) -> ObservationView:
    """The observation view the SFT dataset at `data` was built in (``full`` for a build
    that records none); DistillError for one that names no view."""
    recorded = read_report(data).get("view", FULL.id)
    try:
        return ObservationView.from_id(str(recorded))
    except ValueError as e:
        raise DistillError(f"{data}: build.json: {e}") from None


def _load(model: str) -> tuple[Any, int | None]:
    """The tokenizer and the context length of `model` (a folder or a cached hub id)."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
        model_config = AutoConfig.from_pretrained(model)
    except (OSError, ValueError) as e:
        raise DistillError(f"cannot load the model {model!r}: {str(e).splitlines()[0]}") from None
    return tokenizer, getattr(model_config, "max_position_embeddings", None)


def train(
    model: str, data: Path, out: Path, config: TrainConfig | None = None, *,
    resume: bool = False,
) -> Trained:  # fmt: skip
    """Fine-tune `model` on the SFT dataset at `data`, writing to `out`. Every check of the
    data, the template, the tokenizer and the config runs before the model loads."""
    config = config or TrainConfig()
    out = Path(out)
    checkpoints = out / "checkpoints"
    if resume and not any(checkpoints.glob("checkpoint-*")):
        raise DistillError(f"{checkpoints}: no checkpoint to resume from")
    view = _data_view(data)
    tokenizer, context = _load(model)
    samples: Samples = prepare_samples(tokenizer, data, config, context)
    settled = _settle(config)

    import torch
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(config.seed)
    net = AutoModelForCausalLM.from_pretrained(
        model, dtype=torch.bfloat16 if settled["bf16"] else torch.float32,
        attn_implementation=settled["attn_implementation"],
    )  # fmt: skip
    peft_config = None
    if config.lora:
        from peft import LoraConfig

        tied = bool(getattr(net.config, "tie_word_embeddings", False))
        peft_config = LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
            target_modules=config.lora_target_modules, task_type="CAUSAL_LM",
            modules_to_save=config.lora_modules_to_save or None,
            ensure_weight_tying=bool(config.lora_modules_to_save) and tied,
        )  # fmt: skip
    has_eval = bool(samples.validation)
    strategy = {
        "eval_strategy": ("steps" if config.eval_steps else "epoch") if has_eval else "no",
        "eval_steps": config.eval_steps,
        "save_strategy": "steps" if config.save_steps else "epoch",
        "save_steps": config.save_steps,
    }
    args = SFTConfig(
        output_dir=str(checkpoints), learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type, warmup_steps=config.warmup_ratio,
        weight_decay=config.weight_decay, num_train_epochs=config.num_train_epochs,
        max_steps=config.max_steps, per_device_train_batch_size=config.per_device_train_batch_size,
        per_device_eval_batch_size=config.per_device_train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        logging_steps=config.logging_steps, save_total_limit=config.save_total_limit,
        seed=config.seed, data_seed=config.seed, use_cpu=settled["use_cpu"],
        bf16=settled["bf16"],
        use_liger_kernel=settled["use_liger_kernel"], report_to=config.report_to,
        deepspeed=config.deepspeed, dataloader_num_workers=config.dataloader_num_workers,
        packing=config.packing, max_length=samples.lengths.max_length,
        assistant_only_loss=False, disable_tqdm=not config.progress, **strategy,
        # Kept in the trainer's state, so a resumed training counts from its checkpoint on
        # (TRL's own num_tokens restarts from 0 at every start).
        include_num_input_tokens_seen="non_padding",
        **_checkpointing(settled["gradient_checkpointing"]),
    )  # fmt: skip
    trainer = SFTTrainer(
        model=net, args=args, train_dataset=_dataset(samples.train),
        eval_dataset=_dataset(samples.validation) if has_eval else None,
        processing_class=tokenizer, peft_config=peft_config,
    )  # fmt: skip
    if not config.progress:
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    before = _checkpoint_tokens(checkpoints) if resume else 0
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=True if resume else None)
    train_s = time.perf_counter() - started
    model_dir = out / "model"
    trainer.save_model(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    final = trainer.model
    merged_dir = None
    # A sharded (ZeRO-3) adapter cannot be merged in place; merge OUT/model afterwards.
    if config.lora and config.merge_lora and trainer.accelerator.num_processes == 1:
        final = final.merge_and_unload()
        merged_dir = out / "merged"
        final.save_pretrained(str(merged_dir))
        tokenizer.save_pretrained(str(merged_dir))
    if trainer.is_world_process_zero():
        for written in (model_dir, merged_dir):
            if written is not None:
                record_view(written, view)
    history = trainer.state.log_history
    seen = int(trainer.state.num_input_tokens_seen)
    report = TrainReport(
        model=model, data=str(data), out=str(out), lora=config.lora,
        device=settled["device"], config=config, lengths=samples.lengths,
        samples={"train": len(samples.train), "validation": len(samples.validation)},
        tokens=samples.tokens(), trained_tokens=samples.trained_tokens(),
        steps=trainer.state.global_step, seen_tokens=seen, train_s=round(train_s, 3),
        tokens_per_s=round((seen - before) / train_s, 1) if train_s > 0 else 0.0,
        train_loss=_losses(history, "loss"), eval_loss=_losses(history, "eval_loss"),
        model_dir=str(model_dir), merged_dir=str(merged_dir) if merged_dir else None,
        view=view.id,
    )  # fmt: skip
    if trainer.is_world_process_zero():
        (out / REPORT).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    final.eval()
    return Trained(report=report, model=final)
