"""A miner's EMA rebuilt from archived episodes, the way a validator keeps it.

A round is one block of one miner's episodes (every miner plays the same tasks in a round);
its score is the mean episode score over the episodes archived, folded into the miner's EMA
by :meth:`~shopbench.scoring.weights.ScoreBook.update` with the release's ``ema_alpha``
(a uid whose hotkey changes starts again from zero). The leaderboard
(:mod:`shopbench.traces.api.summary`, from SQL sums) and a miner's offline report
(:mod:`shopbench.traces.report`, from the records) both fold through :func:`ema_rounds`.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from shopbench.scoring.weights import ScoreBook

RoundSum = tuple[int | None, str | None, int | None, int, float]
"""(miner uid, miner hotkey, block, episodes, sum of their scores): one round or a part."""


class RoundEma(BaseModel):
    """One round of one miner, and the miner's EMA after it."""

    model_config = ConfigDict(frozen=True)

    uid: int | None
    hotkey: str | None
    block: int | None
    episodes: int
    round_score: float
    ema: float


def _order(key: tuple[int | None, int | None, str | None]) -> tuple[bool, int, bool, int, str]:
    uid, block, hotkey = key
    return (uid is not None, uid or 0, block is not None, block or 0, hotkey or "")


def ema_rounds(sums: Iterable[RoundSum], alpha: float) -> list[RoundEma]:
    """Every miner's rounds in order (uid, then block, an unknown one first, then hotkey),
    each with the EMA after it; parts of one (uid, hotkey, block) are added up first."""
    rounds: dict[tuple[int | None, int | None, str | None], tuple[int, float]] = {}
    for uid, hotkey, block, n, total in sums:
        had_n, had_total = rounds.get((uid, block, hotkey), (0, 0.0))
        rounds[(uid, block, hotkey)] = (had_n + n, had_total + total)
    book = ScoreBook()
    out = []
    for uid, block, hotkey in sorted(rounds, key=_order):
        n, total = rounds[(uid, block, hotkey)]
        entry = book.update(-1 if uid is None else uid, hotkey or "", total / n, alpha, n)
        out.append(RoundEma(uid=uid, hotkey=hotkey, block=block, episodes=n,
                            round_score=round(total / n, 6), ema=entry.ema))  # fmt: skip
    return out
