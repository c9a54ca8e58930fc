"""Knowledge tasks (placeholder until the knowledge corpus lands)."""

from __future__ import annotations

import random

from shopbench.tasks.draft import DraftResult, Rejection, Sampler


def knowledge_support(s: Sampler) -> str | None:
    """Why the catalog cannot give knowledge tasks; None if it may."""
    if not s.knowledge():
        return "the catalog has no knowledge corpus (no facts to ask about)"
    return None


def draft_knowledge(s: Sampler, rng: random.Random) -> DraftResult:
    """One knowledge task draft, or why the attempt failed."""
    return Rejection(reason="not implemented")
