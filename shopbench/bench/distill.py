"""Benchmark of distillation on this machine: the SFT build and tiny-model training.

The episodes are real (reference policies on product tasks over the 2,000-product catalog
of seed 7), curated as they are and repeated to `build_episodes`; the model is the tiny
random Qwen3 of :func:`~shopbench.distill.tiny_model.tiny_qwen3` over the shipped small
tokenizer, trained on CPU (one thread when ``OMP_NUM_THREADS=1``) on rows cut to 2,048
tokens, one row per step. Figures:

- build: curated episodes/s through ``distill build`` (read, rows, split, Parquet), over the
  played episodes repeated to `build_episodes`;
- tokenize: samples/s through the training template and the masks;
- train: tokens/s of full fine-tuning and of LoRA, `steps` steps each, and the loss before
  and after, so a regression in speed or in learning shows.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class DistillBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episodes: int = Field(default=32, ge=2, description="real episodes played")
    build_episodes: int = Field(default=1024, ge=2, description="curated episodes built")
    steps: int = Field(default=20, ge=2, description="training steps per figure")
    seed: int = Field(default=0, description="seed of the episodes and the model")
    catalog: str | None = Field(
        default=None, description="catalog folder to play on (default: build seed 7's 2,000)"
    )
    work: str | None = Field(default=None, description="scratch folder (default: temp)")


class TrainFigure(BaseModel):
    """One training run's figures."""

    steps: int
    tokens_per_s: float
    first_loss: float
    last_loss: float


class DistillBenchResult(BaseModel):
    """The measurement."""

    episodes_played: int
    build_episodes: int
    build_rows: int
    build_episodes_per_s: float
    tokenize_samples_per_s: float
    mean_sample_tokens: float
    full: TrainFigure
    lora: TrainFigure
    threads: int


def _curated(work: Path, cfg: DistillBenchConfig) -> tuple[Path, Path]:
    """The played episodes as a curated set, and the same repeated to `build_episodes`."""
    from shopbench.bench.archive import play_episodes
    from shopbench.catalog.store import build_catalog
    from shopbench.curation.curated import CuratedEpisode, write_curated
    from shopbench.env.env import ShoppingEnv

    catalog = Path(cfg.catalog) if cfg.catalog else work / "catalog"
    if not catalog.exists():
        build_catalog(catalog, 2000, seed=7, chunk_size=500, workers=1)
    played = play_episodes(ShoppingEnv.open(catalog), cfg.episodes, cfg.seed)
    write_curated((CuratedEpisode(trajectory=t) for t in played), work / "played")
    repeated = (
        CuratedEpisode(trajectory=played[i % len(played)]) for i in range(cfg.build_episodes)
    )
    write_curated(repeated, work / "repeated")
    return work / "played", work / "repeated"


def _train(model: Path, data: Path, out: Path, cfg: DistillBenchConfig, lora: bool) -> TrainFigure:
    from shopbench.distill.config import TrainConfig
    from shopbench.distill.trainer import train

    config = TrainConfig(
        lora=lora, learning_rate=1e-3 if not lora else 5e-3, max_steps=cfg.steps,
        gradient_accumulation_steps=1, logging_steps=1, save_steps=cfg.steps, warmup_ratio=0.0,
        max_length=2048, overlong="cut", seed=cfg.seed, merge_lora=False, progress=False,
    )  # fmt: skip
    report = train(str(model), data, out, config).report
    return TrainFigure(
        steps=report.steps, tokens_per_s=report.tokens_per_s,
        first_loss=report.train_loss[0].loss, last_loss=report.train_loss[-1].loss,
    )  # fmt: skip


def run_distill_bench(cfg: DistillBenchConfig) -> DistillBenchResult:
    """Measure the build and training figures of :class:`DistillBenchResult`."""
    import torch
    from transformers import AutoTokenizer

    from shopbench.distill.dataset import BuildConfig, build_sft, load_sft
    from shopbench.distill.masks import encode_row
    from shopbench.distill.templates import training_template
    from shopbench.distill.tiny_model import TinyModelConfig, tiny_qwen3

    with tempfile.TemporaryDirectory(dir=cfg.work) as tmp:
        work = Path(tmp)
        played, repeated = _curated(work, cfg)
        started = time.perf_counter()
        report = build_sft(repeated, work / "sft-repeated", BuildConfig(seed=cfg.seed))
        build_s = time.perf_counter() - started
        build_sft(played, work / "sft", BuildConfig(seed=cfg.seed, validation_fraction=0.0))
        model = tiny_qwen3(work / "tiny", TinyModelConfig.trainable(cfg.seed))
        tok = AutoTokenizer.from_pretrained(str(model))
        template = training_template(tok)
        rows = load_sft(work / "sft")["train"]
        started = time.perf_counter()
        lengths = [len(encode_row(tok, template, r).input_ids) for r in rows]
        tokenize_s = time.perf_counter() - started
        full = _train(model, work / "sft", work / "full", cfg, lora=False)
        lora = _train(model, work / "sft", work / "lora", cfg, lora=True)
    return DistillBenchResult(
        episodes_played=cfg.episodes, build_episodes=report.episodes,
        build_rows=sum(report.rows.values()),
        build_episodes_per_s=round(report.episodes / build_s, 1),
        tokenize_samples_per_s=round(len(rows) / tokenize_s, 1),
        mean_sample_tokens=round(sum(lengths) / len(lengths), 1),
        full=full, lora=lora, threads=torch.get_num_threads(),
    )  # fmt: skip
