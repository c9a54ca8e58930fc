"""What an archived episode says of its task: the intent, the split, and the task's wire half.

The grader's reward spec (:mod:`shopbench.outcome.spec`) and the validator-side task
(:mod:`shopbench.tasks.model`) build on these; a record carries only these.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

Intent = Literal["product", "shop", "voucher", "knowledge", "clarify"]
"""The intents a signed record may carry: the wire vocabulary. Each is declared once, by its
module in :mod:`shopbench.tasks.intents` (a test holds the registry's names equal to these)."""
INTENTS: tuple[Intent, ...] = get_args(Intent)
Split = Literal["live", "heldout", "external"]


class TaskCard(BaseModel):
    """The wire half of a task: what may leave the validator. No answers in it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    intent: Intent
    query: str
    split: Split
    cluster: str | None = None
