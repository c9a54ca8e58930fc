"""The arms of the experiment: what each one trains on.

Every arm but ``base`` is a curation of the same archive, built into rows in the same view
and trained with the same steps and row length, so the arms differ in their data alone:

- ``base``: no training (the model as prepared);
- ``curated``: the release's curation (``shopbench/curation/data/curate.toml``);
- ``unfiltered``: every archived episode, cheats and failures included (every rule off);
- ``successes``: the outcome successes alone, nothing else checked (rejection sampling:
  every rule off but the outcome's, whose bar is a perfect rule score);
- ``recovery``: the release's curation with its recovery episodes (trial and error that ends
  in success) weighted up further (:attr:`ArmSettings.recovery_weight`);
- ``curated-2``: ``curated``'s rows trained again under the next seed: how far training
  noise alone moves the figures;
- ``prompted``: no training; the base model with one curated episode before each task in its
  context (the cheapest competitor fine-tuning must beat).
"""

from __future__ import annotations

from typing import Any, Literal

from shopbench.curation.config import CurateConfig, load_config
from shopbench.curation.rules import RULES

Arm = Literal["base", "curated", "unfiltered", "successes", "recovery", "curated-2", "prompted"]
ARMS: tuple[Arm, ...] = ("base", "curated", "unfiltered", "successes", "recovery")
"""The arms an experiment runs when its config names none."""
BASE: Arm = "base"
UNTRAINED: frozenset[Arm] = frozenset({"base", "prompted"})
"""Arms that train nothing: evaluated with the base model's weights."""
RESEEDED: dict[Arm, tuple[Arm, int]] = {"curated-2": ("curated", 1)}
"""An arm trained on another arm's rows under the seed plus an offset."""


def rows_of(arm: Arm) -> Arm:
    """The arm whose curation and rows `arm` trains on (itself, but for a reseeded arm)."""
    return RESEEDED[arm][0] if arm in RESEEDED else arm


def seed_offset(arm: Arm) -> int:
    """What `arm` adds to the experiment's seed when it trains."""
    return RESEEDED[arm][1] if arm in RESEEDED else 0


def _off(*keep: str) -> dict[str, Any]:
    return {rule: {"enabled": False} for rule in RULES.names() if rule not in keep}


def curation_of(
    arm: Arm, *, recovery_weight: float, mask_refused: bool = False
) -> CurateConfig | None:
    """The curation config of `arm` (None for ``base``, which trains on nothing); with
    `mask_refused`, every turn with a refused call is masked out of its training."""
    config = _curation_of(arm, recovery_weight=recovery_weight)
    if config is None or not mask_refused:
        return config
    masked = config.recovery.model_copy(update={"mask_refused": True})
    return config.model_copy(update={"recovery": masked})


def _curation_of(arm: Arm, *, recovery_weight: float) -> CurateConfig | None:
    release = load_config(None)
    if arm in UNTRAINED:
        return None
    arm = rows_of(arm)
    if arm == "curated":
        return release
    if arm == "recovery":
        weighted = release.recovery.model_copy(update={"weight": recovery_weight})
        return release.model_copy(update={"recovery": weighted})
    if arm == "unfiltered":
        return CurateConfig.model_validate(
            {**_off(), "recovery": {"weight": 1.0}, "validity": {
                "enabled": False, "verify_signatures": True,
            }}  # fmt: skip
        )
    return CurateConfig.model_validate(  # successes
        {**_off("outcome"), "outcome": {"rule_score_min": 1.0}, "recovery": {"weight": 1.0}}
    )
