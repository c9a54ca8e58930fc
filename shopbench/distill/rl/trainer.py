"""GRPO from a checkpoint in the arena's environment: TRL's GRPOTrainer, one subclass deep.

:func:`train_rl` checks everything it can before a model loads (the task file, every row,
the config), then trains with ``environment_factory`` set to the two environments of
:mod:`shopbench.distill.rl.environment` (TRL routes each row by its ``environment`` field)
and the reward parts of :mod:`shopbench.distill.rl.rewards`.

:class:`ShopbenchGRPOTrainer` changes three things and nothing else:

* the prompts show the toolkit's own schemas (``ShopbenchEnvironment.schemas``) instead of
  the ones transformers would derive from the methods' docstrings, so the model trains on
  the exact text a miner's prompt holds in the arena;
* before each generation it tells the rollouts' environments that a new assistant turn
  begins, so the episode counts turns and calls per turn as the arena does;
* after each generation batch it counts the tool-result tokens masked out of the loss and
  writes a few rollouts (model text and masked text apart) to ``rollouts.jsonl``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.distill.errors import RLError
from shopbench.distill.rl.config import RLConfig
from shopbench.distill.rl.environment import ENVIRONMENTS, shared_env
from shopbench.distill.rl.rewards import judge_reward, outcome_reward, viewed_slots_reward
from shopbench.distill.rl.rows import build_rows, read_rows

REPORT = "rl_report.json"
ROLLOUTS = "rollouts.jsonl"


class StepLog(BaseModel):
    """One logged training step: the summed reward, each part's mean, the loss."""

    model_config = ConfigDict(frozen=True)

    step: int
    reward: float | None = None
    reward_std: float | None = None
    parts: dict[str, float] = Field(default_factory=dict, description="rewards/<name>/mean")
    loss: float | None = None
    tool_calls: float | None = Field(default=None, description="TRL's tools/call_frequency")
    completion_length: float | None = Field(
        default=None, description="mean model-written tokens per rollout (tool results excluded)"
    )


class RLReport(BaseModel):
    """What a GRPO run did, written to ``rl_report.json``."""

    model_config = ConfigDict(frozen=True)

    model: str
    model_dir: str
    tasks: int
    steps: int
    rollouts: int = Field(description="rollouts generated")
    masked_tool_tokens: int = Field(description="tool-result tokens kept out of the loss")
    model_tokens: int = Field(description="model-written completion tokens in the loss")
    device: str
    use_vllm: bool
    reward_parts: dict[str, float] = Field(description="reward function → weight")
    log: list[StepLog]
    wall_s: float
    config: dict[str, Any]


def _reward_funcs(config: RLConfig) -> tuple[list[Any], list[float]]:
    funcs: list[Any] = [outcome_reward(config.success_bonus)]
    weights = [1.0]
    if config.dense_weight > 0:
        funcs.append(viewed_slots_reward())
        weights.append(config.dense_weight)
    if config.judge_weight > 0 and config.judge:
        from shopbench.judging.registry import make_judge

        funcs.append(judge_reward(make_judge(config.judge)))
        weights.append(config.judge_weight)
    return funcs, weights


def _grpo_trainer_class() -> type:
    """The trainer subclass (built on first use, so importing this module needs no TRL)."""
    from trl import GRPOTrainer

    class ShopbenchGRPOTrainer(GRPOTrainer):  # type: ignore[misc,valid-type]
        """GRPOTrainer with the arena's schemas, turns and masked-token accounting."""

        def __init__(self, *args: Any, rollouts_path: Path, rollouts_logged: int,
                     **kwargs: Any) -> None:  # fmt: skip
            super().__init__(*args, **kwargs)
            for name in list(self._env_tools):
                self._env_tools[name] = ENVIRONMENTS[name].schemas()
            self.rollouts_path = rollouts_path
            self.rollouts_logged = rollouts_logged
            self.masked_tool_tokens = 0
            self.model_tokens = 0
            self.rollouts = 0

        def _generate_single_turn(self, *args: Any, **kwargs: Any) -> Any:
            for environment in self.environments or []:
                environment._begin_turn()
            return super()._generate_single_turn(*args, **kwargs)

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> Any:
            out = super()._generate_and_score_completions(inputs)
            self._account(out)
            return out

        def _account(self, out: dict[str, Any]) -> None:
            ids, mask = out["completion_ids"], out["completion_mask"].bool()
            tool = out.get("tool_mask")
            model = mask if tool is None else mask & tool.bool()
            masked = mask & ~model
            self.masked_tool_tokens += int(masked.sum())
            self.model_tokens += int(model.sum())
            self.rollouts += int(ids.shape[0])
            if not self.accelerator.is_main_process or self.rollouts_logged == 0:
                return
            tok = self.processing_class
            with self.rollouts_path.open("a", encoding="utf-8") as f:
                for i in range(min(self.rollouts_logged, ids.shape[0])):
                    env = self.environments[i] if self.environments else None
                    row: dict[str, Any] = {
                        "step": self.state.global_step,
                        "model_text": tok.decode(ids[i][model[i]].tolist()),
                        "masked_text": tok.decode(ids[i][masked[i]].tolist()),
                        "masked_tokens": int(masked[i].sum()),
                    }
                    if env is not None:
                        outcome = env.outcome
                        row.update(
                            task_id=env.task.id, turns=env.episode.turn,
                            calls=[{"turn": r.turn, "name": r.name, "error": r.error}
                                   for r in env.episode.log],
                            graded_ids=[s.product_id for s in outcome.slots],
                            mean_rule=outcome.mean_rule, success=outcome.success,
                            viewed_slots=env.viewed_slots,
                        )  # fmt: skip
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")

    return ShopbenchGRPOTrainer


def _resolve(config: RLConfig) -> dict[str, Any]:
    """The config's ``auto`` values decided for this machine."""
    import torch

    cuda = torch.cuda.is_available()

    def pick(value: Any, auto: bool) -> bool:
        return auto if value == "auto" else bool(value)

    return {
        "use_cpu": pick(config.use_cpu, not cuda),
        "bf16": pick(config.bf16, cuda and torch.cuda.is_bf16_supported()),
        "gradient_checkpointing": pick(config.gradient_checkpointing, cuda),
        "use_vllm": pick(config.use_vllm, cuda and importlib.util.find_spec("vllm") is not None),
    }


def _check_model(model: str) -> Any:
    """The model's tokenizer, checked for tool calling before any weights load."""
    from transformers import AutoTokenizer

    from shopbench.distill.templates import check_tokens

    path = Path(model)
    if not path.is_dir():
        raise RLError(f"{model}: no such model directory (a checkpoint, e.g. distill train's)")
    try:
        tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise RLError(f"{model}: cannot load its tokenizer ({str(e).splitlines()[0]})") from None
    if not tok.chat_template:
        raise RLError(f"{model}: the tokenizer has no chat template")
    check_tokens(tok)
    tok.padding_side = "left"
    return tok


def train_rl(model: str, tasks: Path, catalog: Path, out: Path, config: RLConfig) -> RLReport:
    """GRPO on the tasks of `tasks` in the catalog at `catalog`, from the checkpoint
    `model`; the trained model goes to ``out/model``, the report to ``out/rl_report.json``.

    Every refusal (a row without a task, a held-out task, a model that cannot call tools, a
    batch that does not hold whole groups) is an RLError before training starts.
    """
    chosen = read_rows(tasks)
    env = shared_env(catalog)
    rows = build_rows(chosen, env, config.seed)
    decided = _resolve(config)
    world = _world_size()
    batch = config.per_device_train_batch_size * config.gradient_accumulation_steps * world
    if batch % config.num_generations:
        raise RLError(
            f"per_device_train_batch_size × gradient_accumulation_steps × processes = {batch} "
            f"is not a multiple of num_generations ({config.num_generations}): a batch must hold "
            "whole groups"
        )
    tokenizer = _check_model(model)

    import datasets
    from trl import GRPOConfig

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rollouts = out / ROLLOUTS
    rollouts.unlink(missing_ok=True)
    funcs, weights = _reward_funcs(config)
    args = GRPOConfig(
        output_dir=str(out / "checkpoints"),
        num_generations=config.num_generations,
        per_device_train_batch_size=config.per_device_train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        max_steps=config.max_steps, learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type, warmup_steps=config.warmup_ratio,
        loss_type=config.loss_type, beta=config.beta, epsilon=config.epsilon,
        scale_rewards=config.scale_rewards if config.scale_rewards != "none" else False,
        max_completion_length=config.max_completion_length,
        max_tool_calling_iterations=config.max_tool_calling_iterations,
        mask_truncated_completions=config.mask_truncated_completions,
        temperature=config.temperature, top_p=config.top_p,
        chat_template_kwargs=dict(config.chat_template_kwargs) or None,
        reward_weights=weights,
        use_vllm=decided["use_vllm"], vllm_mode=config.vllm_mode,
        vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
        bf16=decided["bf16"], gradient_checkpointing=decided["gradient_checkpointing"],
        use_cpu=decided["use_cpu"], logging_steps=config.logging_steps,
        save_strategy="steps" if config.save_steps else "no", save_steps=config.save_steps or 500,
        seed=config.seed, data_seed=config.seed, report_to=config.report_to,
        deepspeed=config.deepspeed, dataloader_num_workers=0, disable_tqdm=True,
    )  # fmt: skip
    peft_config = None
    if config.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear",
            task_type="CAUSAL_LM",
        )  # fmt: skip
    factories = {name: functools.partial(cls, str(catalog)) for name, cls in ENVIRONMENTS.items()}
    trainer = _grpo_trainer_class()(
        model=model, reward_funcs=funcs, args=args,
        train_dataset=datasets.Dataset.from_list(rows), processing_class=tokenizer,
        environment_factory=factories, peft_config=peft_config,
        rollouts_path=rollouts, rollouts_logged=config.rollouts_logged,
    )  # fmt: skip
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    model_dir = out / "model"
    _save(trainer, tokenizer, model_dir, merge=config.lora)
    names = [getattr(f, "__name__", "reward") for f in funcs]
    report = RLReport(
        model=model, model_dir=str(model_dir), tasks=len(rows), steps=trainer.state.global_step,
        rollouts=trainer.rollouts, masked_tool_tokens=trainer.masked_tool_tokens,
        model_tokens=trainer.model_tokens, device=str(trainer.accelerator.device),
        use_vllm=decided["use_vllm"], reward_parts=dict(zip(names, weights, strict=True)),
        log=_step_logs(trainer.state.log_history, names), wall_s=wall,
        config=config.model_dump(mode="json"),
    )  # fmt: skip
    (out / REPORT).write_text(report.model_dump_json(indent=2), encoding="utf-8")
    return report


def _save(trainer: Any, tokenizer: Any, model_dir: Path, *, merge: bool) -> None:
    """The trained model in `model_dir`: a LoRA run's adapter merged into the base weights
    (in the main process), so ``hf:OUT/model`` and ``distill eval`` play it as it is."""
    if merge:
        trainer.accelerator.wait_for_everyone()
        if trainer.accelerator.is_main_process:
            merged = trainer.accelerator.unwrap_model(trainer.model).merge_and_unload()
            merged.save_pretrained(str(model_dir))
    else:
        trainer.save_model(str(model_dir))
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(str(model_dir))


def _world_size() -> int:
    import os

    return int(os.environ.get("WORLD_SIZE", "1"))


def _step_logs(history: list[dict[str, Any]], names: list[str]) -> list[StepLog]:
    logs = []
    for entry in history:
        if "reward" not in entry:
            continue
        logs.append(
            StepLog(
                step=int(entry.get("step", 0)), reward=entry.get("reward"),
                reward_std=entry.get("reward_std"),
                parts={n: entry[k] for n in names if (k := f"rewards/{n}/mean") in entry},
                loss=entry.get("loss"), tool_calls=entry.get("tools/call_frequency"),
                completion_length=entry.get("completions/mean_length"),
            )
        )  # fmt: skip
    return logs
