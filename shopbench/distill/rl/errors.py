"""The RL boundary's exceptions: each is raised before any training step runs."""

from __future__ import annotations

from shopbench.distill.errors import DistillError


class RLError(DistillError):
    """GRPO cannot go on: a bad task file, row, config or environment use."""


class RLDataError(RLError):
    """A task or dataset row cannot be trained on: it has no task, or a held-out one."""
