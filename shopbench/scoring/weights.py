"""Per-miner score EMAs and the weight curve: from round scores to the weights set on chain.

:class:`ScoreBook` keeps one exponential moving average per uid, tied to the hotkey that
earned it: when a uid changes hands (a new hotkey registered in its place) its history is
dropped and the newcomer starts from zero, so nobody inherits a predecessor's standing.

:class:`WeightCurve` turns EMAs into weights, deterministically: each uid's share is its
EMA raised to ``exponent`` (winner-take-most: a small lead becomes a large share), then
normalised; an optional ``burn`` share goes to ``burn_uid``. The same scores give the same
weights in any order on any machine, so validators agree. Both are consensus parameters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

_DIGITS = 12  # weights are rounded so that float noise can never flip a u16 quantisation


class WeightCurve(BaseModel):
    """How EMA scores become normalised weights."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exponent: float = Field(
        default=4.0, ge=1.0, le=64.0,
        description="weight ∝ EMA^exponent; 1 is proportional, larger is winner-take-most",
    )  # fmt: skip
    burn: float = Field(
        default=0.0, ge=0.0, le=1.0, description="share of all weight sent to burn_uid"
    )
    burn_uid: int = Field(default=0, ge=0, description="the uid that receives the burn share")

    def weights(self, scores: Mapping[int, float]) -> dict[int, float]:
        """Normalised weights (summing to 1) for `scores` (uid → EMA), sorted by uid.

        Uids with a score ≤ 0 get nothing. Without any positive score the whole weight is
        the burn (``{}`` when there is no burn: nothing worth setting).
        """
        powered = {uid: max(0.0, float(s)) ** self.exponent for uid, s in sorted(scores.items())}
        total = sum(powered.values())
        out: dict[int, float] = {}
        if total > 0:
            share = 1.0 - self.burn
            out = {uid: p / total * share for uid, p in powered.items() if p > 0}
        if self.burn > 0:
            out[self.burn_uid] = out.get(self.burn_uid, 0.0) + (self.burn if total > 0 else 1.0)
        out = {uid: round(w, _DIGITS) for uid, w in sorted(out.items()) if w > 0}
        return out


class MinerScore(BaseModel):
    """What the validator remembers about one uid."""

    model_config = ConfigDict(extra="forbid")

    hotkey: str
    ema: float = Field(default=0.0, ge=0.0, le=1.0, description="moving average of round scores")
    rounds: int = Field(default=0, ge=0, description="rounds scored under this hotkey")
    episodes: int = Field(default=0, ge=0, description="episodes played under this hotkey")
    last: float | None = Field(default=None, description="the last round's score")


class ScoreBook(BaseModel):
    """Score EMAs by uid, each tied to the hotkey that earned it."""

    model_config = ConfigDict(extra="forbid")

    miners: dict[int, MinerScore] = Field(default_factory=dict)

    def observe(self, hotkeys: Mapping[int, str]) -> list[int]:
        """Align the book with the metagraph (uid → hotkey); returns the uids reset.

        A uid whose hotkey changed starts again from zero; a uid no longer registered is
        forgotten.
        """
        reset: list[int] = []
        for uid in list(self.miners):
            if uid not in hotkeys:
                del self.miners[uid]
            elif self.miners[uid].hotkey != hotkeys[uid]:
                self.miners[uid] = MinerScore(hotkey=hotkeys[uid])
                reset.append(uid)
        return sorted(reset)

    def update(
        self, uid: int, hotkey: str, score: float, alpha: float, episodes: int = 0
    ) -> MinerScore:
        """Fold one round's `score` (in [0, 1]) into `uid`'s EMA with weight `alpha`.

        A uid seen for the first time, or under a new hotkey, starts from an EMA of zero.
        """
        entry = self.miners.get(uid)
        if entry is None or entry.hotkey != hotkey:
            entry = MinerScore(hotkey=hotkey)
        score = min(1.0, max(0.0, float(score)))
        ema = alpha * score + (1.0 - alpha) * entry.ema
        entry = MinerScore(
            hotkey=hotkey,
            ema=round(min(1.0, max(0.0, ema)), _DIGITS),
            rounds=entry.rounds + 1,
            episodes=entry.episodes + episodes,
            last=score,
        )
        self.miners[uid] = entry
        return entry

    def emas(self, uids: Iterable[int] | None = None) -> dict[int, float]:
        """uid → EMA, for `uids` (default: every uid in the book), sorted by uid."""
        chosen = sorted(self.miners) if uids is None else sorted(set(uids))
        return {u: self.miners[u].ema if u in self.miners else 0.0 for u in chosen}
