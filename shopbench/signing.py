"""Signing records: what shopbench needs from a key, without knowing whose key it is.

Trajectories and archive manifests carry a signature by the validator that produced them.
shopbench declares the two roles here; the subnet plumbing (``template.signing``)
implements them with the validator's hotkey, and tests may use any implementation.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Signer(Protocol):
    """Signs payloads as the key whose address is ``hotkey``."""

    hotkey: str

    def sign(self, payload: bytes) -> str:
        """The signature of `payload`, as lowercase hex (no ``0x`` prefix)."""
        ...


@runtime_checkable
class Verifier(Protocol):
    """Checks a signature made by a :class:`Signer`."""

    def verify(self, payload: bytes, signature: str, hotkey: str) -> bool:
        """True when `signature` (hex) is `hotkey`'s signature of `payload`; False otherwise,
        including for a malformed signature or address (never raises for bad input)."""
        ...
