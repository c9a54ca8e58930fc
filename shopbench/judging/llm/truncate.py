"""Fitting a trajectory into the judge's token budget, cutting the least informative first.

The order is fixed, so every validator cuts the same text:

1. the **tool log** is never cut (it is the validator's record of what happened);
2. long **observations** are cut first, the longest first, down to a floor
   (a search result's first rows and a product's head say the most);
3. then the **reasoning of early turns**, earliest first, down to a floor, keeping the
   turns where the agent compares, decides and recommends;
4. then observations and early turns down to nothing but their markers;
5. then the last turn, as a last resort.

Every cut keeps the head of the text and says how much was removed. A trajectory that does
not fit even then raises ``JudgeUnavailable("too_long")``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from shopbench.judging.errors import JudgeUnavailable
from shopbench.judging.llm.view import Part, View

OBSERVATION_FLOOR = 400  # characters an observation keeps in stage 2
REASONING_FLOOR = 300  # characters each early turn's reasoning or answer keeps in stage 3
_PASSES = 8  # re-measurements per water-filling stage (markers add a little each pass)

Measure = Callable[[View], int]
"""The estimated prompt tokens of a view, as rendered."""


def _level(lengths: list[int], remove: int, floor: int) -> int | None:
    """The largest cap c >= floor with sum(max(0, L - c)) >= remove, or None when even
    cutting everything to `floor` removes less."""
    def removed(c: int) -> int:
        return sum(max(0, n - c) for n in lengths)

    if removed(floor) < remove:
        return None
    lo, hi = floor, max(lengths, default=floor)
    while lo < hi:  # removed() falls as c rises: find the last c that still removes enough
        mid = (lo + hi + 1) // 2
        if removed(mid) >= remove:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _water_fill(
    view: View, parts: list[Part], floor: int, budget: int, measure: Measure, bpt: float
) -> bool:
    """Cut `parts` to one common cap (never below `floor`) until the view fits; True if it
    does. Parts already cut further are left as they are."""
    for _ in range(_PASSES):
        excess = measure(view) - budget
        if excess <= 0:
            return True
        lengths = [
            len(p.original) if p.keep is None else min(p.keep, len(p.original)) for p in parts
        ]
        # A character is at least one byte, so removing this many characters removes at
        # least the excess bytes; the markers' own length is caught by the next pass.
        cap = _level(lengths, math.ceil(excess * bpt), floor)
        if cap is None:
            cap = floor
        for p, n in zip(parts, lengths, strict=True):
            if n > cap:
                p.keep = cap
        if cap == floor:
            return measure(view) <= budget
    return measure(view) <= budget


def _summary(view: View) -> list[str]:
    notes: list[str] = []
    obs = [p for b in view.blocks if b.kind in ("observation", "unlogged") for p in b.parts]
    cut = [p for p in obs if p.cut]
    if cut:
        notes.append(
            f"{len(cut)} of {len(obs)} tool messages cut for length "
            f"({sum(p.cut for p in cut)} characters removed)"
        )
    agents = [b for b in view.blocks if b.kind == "agent"]
    turns = sorted({b.turn for b in agents if any(p.cut for p in b.parts)})
    if turns:
        removed = sum(p.cut for b in agents for p in b.parts)
        listed = ", ".join(str(t) for t in turns)
        notes.append(
            f"agent text of turn(s) {listed} cut for length ({removed} characters removed)"
        )
    return notes


def fit(view: View, budget: int, measure: Measure, bytes_per_token: float) -> list[str]:
    """Cut `view` in place until ``measure(view) <= budget``; return notes on what was cut
    (empty when nothing was). Raises ``JudgeUnavailable("too_long")`` when it cannot fit."""
    if measure(view) <= budget:
        return []
    observations = [
        p for b in view.blocks if b.kind in ("observation", "unlogged") for p in b.parts
    ]
    agents = [b for b in view.blocks if b.kind == "agent"]
    early, last = agents[:-1], agents[-1:]

    def fits() -> bool:
        return measure(view) <= budget

    done = _water_fill(view, observations, OBSERVATION_FLOOR, budget, measure, bytes_per_token)
    if not done:
        for block in early:  # earliest first
            for p in block.parts:
                if p.keep is None or p.keep > REASONING_FLOOR:
                    p.keep = min(REASONING_FLOOR, len(p.original))
            if fits():
                done = True
                break
    if not done:
        done = _water_fill(view, observations, 0, budget, measure, bytes_per_token)
    if not done:
        for block in early:
            for p in block.parts:
                p.keep = 0
            if fits():
                done = True
                break
    if not done:
        parts = [p for b in last for p in b.parts]
        done = _water_fill(view, parts, 0, budget, measure, bytes_per_token)
    if not done:
        raise JudgeUnavailable(
            "too_long",
            f"the trajectory does not fit the judge's {budget}-token prompt budget even with "
            f"every text cut (tool log of {len(view.log)} calls; ~{measure(view)} tokens)",
        )
    return _summary(view)
