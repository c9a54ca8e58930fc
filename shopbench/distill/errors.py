"""The distillation layer's exception family, GRPO's included: every one is raised before any
training starts or step runs."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class DistillError(ShopbenchError):
    """Distillation cannot go on: bad data, a model or tokenizer it cannot train, a bad config."""


class NoSamplesError(DistillError):
    """A curated set or SFT dataset holds no usable sample."""


class TemplateError(DistillError):
    """A model's chat template is missing, unknown and unmarked, or renders a sample wrongly."""


class TokenizerError(DistillError):
    """A tokenizer lacks tokens the training format needs, or cannot be built."""


class TrainConfigError(DistillError):
    """A training config file is unreadable, or names a key or value that does not exist."""


class RLError(DistillError):
    """GRPO cannot go on: a bad task file, row, config or environment use."""


class RLDataError(RLError):
    """A task or dataset row cannot be trained on: it has no task, or a held-out one."""
