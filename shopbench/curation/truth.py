"""What each miner truly played: read from an arena's ``arena.json``.

The arena records every miner's hotkey, uid and reference policy; the registry says whether
that policy shops honestly (True), imitates shopping (False), or is neither (None: careless
or random). Curation's precision and recall are measured against these labels.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from shopbench.agents.registry import honesty
from shopbench.curation.errors import CurationError


class MinerTruth(BaseModel):
    """One miner as the arena recorded it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    uid: int
    hotkey: str
    policy: str


class Truth(BaseModel):
    """Every miner's true policy, by hotkey."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    miners: list[MinerTruth]

    def policy_of(self, hotkey: str | None) -> str | None:
        """The policy `hotkey` played, or None for a miner the file does not name."""
        for m in self.miners:
            if m.hotkey == hotkey:
                return m.policy
        return None

    def lookup(self) -> dict[str, tuple[str, bool | None]]:
        """hotkey → (policy, honest)."""
        return {m.hotkey: (m.policy, honesty(m.policy)) for m in self.miners}


def load_truth(path: str | Path) -> Truth:
    """The miners of the ``arena.json`` at `path`; CurationError when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Truth.model_validate(data)
    except OSError as e:
        raise CurationError(f"--truth {path}: cannot read ({e.strerror})") from None
    except (ValueError, ValidationError) as e:
        raise CurationError(f"--truth {path}: not an arena.json ({e})".splitlines()[0]) from None
