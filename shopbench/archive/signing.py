"""Signing records: what shopbench needs from a key, and the one way a trajectory is signed.

Trajectories and archive manifests carry a signature by the validator that produced them.
shopbench declares the two roles here; the subnet plumbing (``template.signing``)
implements them with the validator's hotkey, and tests may use any implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from shopbench.records.trajectory import Trajectory


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


def sign_trajectory(trajectory: Trajectory, signer: Signer) -> Trajectory:
    """A copy of `trajectory` carrying `signer`'s signature over its signing payload
    (:meth:`Trajectory.signing_payload`, which leaves any earlier signature out)."""
    from shopbench.records.trajectory import Signature

    signature = Signature(signer=signer.hotkey, signature=signer.sign(trajectory.signing_payload()))
    return trajectory.model_copy(update={"signature": signature})


def verify_trajectory(trajectory: Trajectory, verifier: Verifier) -> bool:
    """Whether `trajectory` carries a signature that `verifier` accepts, by the hotkey it
    names, over its signing payload; False for an unsigned record."""
    return _verify(trajectory, verifier, trajectory.quick_signing_payload)


def verify_record(record: dict[str, Any], trajectory: Trajectory, verifier: Verifier) -> bool:
    """:func:`verify_trajectory` for a `trajectory` validated from the plain `record`
    (:func:`shopbench.archive.layout.record_of`), whose canonical bytes are written from
    the dict, without dumping the model again, when they can be."""
    from shopbench.records.trajectory import quick_canonical

    data = {k: v for k, v in record.items() if k != "signature"}
    return _verify(trajectory, verifier, lambda: quick_canonical(data))


def _verify(
    trajectory: Trajectory, verifier: Verifier, quick_bytes: Callable[[], bytes | None]
) -> bool:
    """The check over the quick bytes first, then over the canonical payload when those
    differ from it (they can only in how a number is written)."""
    sig = trajectory.signature
    if sig is None:
        return False
    quick = quick_bytes()
    if quick is not None and verifier.verify(quick, sig.signature, sig.signer):
        return True  # the signer signed exactly these bytes, which encode this record
    canonical = trajectory.signing_payload()
    return canonical != quick and verifier.verify(canonical, sig.signature, sig.signer)
