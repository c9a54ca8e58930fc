"""The verifier's error family: inputs that make a verification impossible to run."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class VerifyError(ShopbenchError):
    """A verification cannot run as asked: no archive, a catalog of another seed, no source
    of tasks, a bad option."""
