"""How far an LLM judge agrees with the rubric, for calibration reports.

Agreement is Spearman's rank correlation between the two judges' process scores on the
same episodes (ties get their average rank), over the episodes the LLM actually judged:
a fallback verdict is the rubric's own score and would inflate the agreement, so fallbacks
are counted and left out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from shopbench.judging.llm.fallback import is_fallback
from shopbench.records.verdict import Verdict


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the average of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho of paired samples; None when fewer than two pairs or when either side
    is constant (the correlation is undefined). ValueError when the lengths differ."""
    if len(xs) != len(ys):
        raise ValueError(f"spearman needs pairs: {len(xs)} values against {len(ys)}")
    if len(xs) < 2:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return cov / math.sqrt(vx * vy)


class Agreement(BaseModel):
    """The LLM judge against the rubric on the same episodes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episodes: int = Field(description="episodes both judged (fallbacks excluded)")
    fallbacks: int = Field(description="episodes where the LLM judge fell back to the rubric")
    spearman: float | None = Field(description="rank correlation; None when undefined")
    mean_abs_diff: float = Field(description="mean |llm - rubric| score")
    llm_mean: float
    rubric_mean: float


def agreement(llm: Sequence[Verdict], rubric: Sequence[Verdict]) -> Agreement:
    """Agreement of paired verdicts (same episodes, same order; see the module docstring)."""
    if len(llm) != len(rubric):
        raise ValueError(f"agreement needs pairs: {len(llm)} LLM verdicts, {len(rubric)} rubric")
    pairs = [(a.score, b.score) for a, b in zip(llm, rubric, strict=True) if not is_fallback(a)]
    xs = [a for a, _ in pairs]
    ys = [b for _, b in pairs]
    rho = spearman(xs, ys)
    return Agreement(
        episodes=len(pairs),
        fallbacks=len(llm) - len(pairs),
        spearman=None if rho is None else round(rho, 6),
        mean_abs_diff=round(statistics.fmean(abs(a - b) for a, b in pairs), 6) if pairs else 0.0,
        llm_mean=round(statistics.fmean(xs), 6) if xs else 0.0,
        rubric_mean=round(statistics.fmean(ys), 6) if ys else 0.0,
    )
