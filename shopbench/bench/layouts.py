"""Benchmark of SFT row layouts: what one curated episode costs to train on, per layout.

A curated set is built into rows in each (layout, view) asked for, and every row is
tokenized as the trainer sees it (the model's tokenizer, the training template, the loss
masks): tokens per episode (the sum over its rows), of those the tokens that take loss, the
share the system prompt and tool schemas take, and the longest row. The step layout pays
for its context again at every step; the episode layout in an append-only view reads each
token once, and its row is exactly what the model reads when it plays.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.records.task import Intent


class LayoutsBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    curated: Path = Field(description="a curated set (shopbench curate's --out)")
    model: Path = Field(description="the model directory whose tokenizer counts")
    settings: list[str] = Field(
        default_factory=lambda: ["step:compact/h1/brief", "episode:compact/tools"],
        description="LAYOUT:VIEW pairs to build (repeat), layout step or episode",
        json_schema_extra={"flag": "setting"},
    )
    intents: list[Intent] | None = Field(
        default=None, description="intents built (repeat; None: all)",
        json_schema_extra={"flag": "intent"},
    )  # fmt: skip


class LayoutFigure(BaseModel):
    """One layout's figures, per curated episode."""

    layout: str
    view: str
    episodes: int
    rows: int
    tokens_per_episode: float
    trained_per_episode: float
    trained_share: float
    prompt_share: float = Field(description="share of the tokens that are the system prompt "
                                "and tool schemas (the tokens before the first user turn)")
    longest_row: int


class LayoutsBenchResult(BaseModel):
    """The measurement."""

    curated: str
    model: str
    figures: list[LayoutFigure]


def run(cfg: LayoutsBenchConfig) -> LayoutsBenchResult:
    """Build and tokenize the curated set in every setting; the figures."""
    from transformers import AutoTokenizer

    from shopbench.agents.format.views import ObservationView
    from shopbench.distill.dataset import BuildConfig, build_sft, load_sft
    from shopbench.distill.masks import IGNORE, encode_row
    from shopbench.distill.rows import RowFormat
    from shopbench.distill.templates import training_template

    tokenizer = AutoTokenizer.from_pretrained(str(cfg.model))
    template = training_template(tokenizer)
    figures: list[LayoutFigure] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, setting in enumerate(cfg.settings):
            layout, _, view_id = setting.partition(":")
            view = ObservationView.from_id(view_id)
            out = Path(tmp) / f"s{i}"
            build_sft(cfg.curated, out, BuildConfig(
                format=RowFormat(layout), view=view.name, history=view.history,
                prompt=view.prompt, intents=cfg.intents, validation_fraction=0.0,
            ))  # fmt: skip
            rows = [r for split in load_sft(out).values() for r in split]
            per_episode: dict[str, list[int]] = {}
            trained: dict[str, int] = {}
            opening = 0
            longest = 0
            for row in rows:
                encoded = encode_row(tokenizer, template, row)
                n = len(encoded.input_ids)
                longest = max(longest, n)
                per_episode.setdefault(row["episode_id"], []).append(n)
                trained[row["episode_id"]] = trained.get(row["episode_id"], 0) + sum(
                    1 for x in encoded.labels if x != IGNORE
                )
                system = [m for m in row["messages"] if m["role"] == "system"]
                if system:
                    encoded_system: Any = tokenizer.apply_chat_template(
                        system, tools=_tools(row), tokenize=True, chat_template=template,
                        return_dict=True,
                    )  # fmt: skip
                    opening += len(encoded_system["input_ids"])
            totals = [sum(v) for v in per_episode.values()]
            all_tokens = sum(totals)
            figures.append(LayoutFigure(
                layout=layout, view=view.id, episodes=len(totals), rows=len(rows),
                tokens_per_episode=round(statistics.fmean(totals), 1),
                trained_per_episode=round(statistics.fmean(trained.values()), 1),
                trained_share=round(sum(trained.values()) / all_tokens, 4),
                prompt_share=round(opening / all_tokens, 4), longest_row=longest,
            ))  # fmt: skip
    return LayoutsBenchResult(curated=str(cfg.curated), model=str(cfg.model), figures=figures)


def _tools(row: dict[str, Any]) -> Any:
    import json

    tools = row.get("tools")
    parsed = json.loads(tools) if isinstance(tools, str) else tools
    return list(parsed) if isinstance(parsed, list) and parsed else None
