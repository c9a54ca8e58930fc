"""The turn budget a tuned model needs: how many tokens its trained assistant turns take.

A model imitates turns of the length it was trained on; a generation budget below them cuts
the call it was about to write. :func:`turn_lengths` measures each trained assistant turn of
an SFT dataset in the model's own tokenizer, through the training template, exactly as the
loss sees it (one run of trained tokens a turn, its end-of-turn token included);
:func:`turn_budget` turns them into the budget the evaluation uses: at least the chosen
quantile, never one that cuts more than the allowed share.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.distill.dataset import load_sft
from shopbench.distill.errors import DistillError
from shopbench.distill.masks import IGNORE, encode_row, runs


class TurnBudget(BaseModel):
    """The trained turns' lengths, the budget chosen and what it cuts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turns: int = Field(description="trained assistant turns measured")
    median: float
    p95: float
    max: int
    budget: int = Field(description="tokens a turn may generate")
    cut_share: float = Field(description="share of the trained turns longer than the budget")
    arms: dict[str, TurnBudget] = Field(
        default_factory=dict, description="each arm's own budget, where several were measured"
    )


def turn_lengths(data: Path, tokenizer: Any, template: str) -> list[int]:
    """The token count of every trained assistant turn of the SFT dataset at `data` (train
    and validation rows), in `tokenizer` through `template`."""
    lengths: list[int] = []
    for rows in load_sft(data).values():
        for row in rows:
            labels = encode_row(tokenizer, template, row).labels
            lengths += [end - start for start, end in runs([x != IGNORE for x in labels])]
    return lengths


def turn_budget(
    lengths: list[int], *, quantile: float = 0.95, given: int | None = None,
    max_cut_share: float = 0.05, multiple: int = 8,
) -> TurnBudget:
    """The budget for turns of `lengths`: `given`, or the `quantile` of the lengths rounded
    up to a `multiple`. DistillError when there are no lengths, or when the budget would cut
    more than `max_cut_share` of the turns (naming the budget that would not)."""
    if not lengths:
        raise DistillError("no trained assistant turn to measure a turn budget on")
    ordered = sorted(lengths)
    q = _quantile(ordered, quantile)

    def cut_at(budget: int) -> float:
        return sum(1 for n in ordered if n > budget) / len(ordered)

    def enough() -> int:  # the smallest multiple at or above the quantile that cuts few enough
        budget = multiple * math.ceil(q / multiple)
        while cut_at(budget) > max_cut_share:
            budget += multiple
        return budget

    budget = given if given is not None else enough()
    cut = cut_at(budget)
    if cut > max_cut_share:
        raise DistillError(
            f"a budget of {budget} tokens a turn cuts {cut:.1%} of the {len(ordered)} trained "
            f"turns (at most {max_cut_share:.0%} allowed; median {_quantile(ordered, 0.5):.0f},"
            f" p95 {q:.0f}, longest {ordered[-1]}): give at least {enough()}"
        )
    return TurnBudget(
        turns=len(ordered), median=_quantile(ordered, 0.5), p95=round(q, 1), max=ordered[-1],
        budget=budget, cut_share=round(cut, 4),
    )  # fmt: skip


def _quantile(ordered: list[int], q: float) -> float:
    """The `q` quantile of sorted `ordered`, linearly interpolated."""
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)
