"""Hotkey signatures over records, and in-memory wallets for the arena and tests.

:class:`HotkeySigner` and :class:`HotkeyVerifier` implement ``shopbench.archive.signing``'s
``Signer`` / ``Verifier`` with a bittensor hotkey. Every record signature covers
``RECORD_DOMAIN + payload``, so a signed record can never double as a signed HTTP request
(``btauth/1``) or an extrinsic, whatever bytes a record holds.

:class:`LocalWallet` holds a coldkey and a hotkey in memory (no keyfile, no password); its
keys derive from a name, which makes them public: for the arena and tests only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from bittensor.sp_core import CRYPTO_SR25519, Keypair
from bittensor.sp_core import verify as _verify

RECORD_DOMAIN = b"shopbench/record/v1\n"


class HotkeySigner:
    """Signs records (or what `domain` names) with a keypair; ``hotkey`` is its ss58 address."""

    def __init__(self, keypair: Any, domain: bytes = RECORD_DOMAIN) -> None:
        self._keypair = keypair
        self.domain = domain
        self.hotkey: str = keypair.ss58_address

    @classmethod
    def from_wallet(cls, wallet: Any) -> HotkeySigner:
        """The signer of a ``bittensor.Wallet``'s (or any wallet-shaped object's) hotkey."""
        return cls(wallet.hotkey)

    def sign(self, payload: bytes) -> str:
        """The hex signature of ``domain + payload``."""
        return bytes(self._keypair.sign(self.domain + payload)).hex()


class HotkeyVerifier:
    """Checks signatures made by :class:`HotkeySigner` over the same `domain` (sr25519
    unless told)."""

    def __init__(self, crypto_type: int = CRYPTO_SR25519, domain: bytes = RECORD_DOMAIN) -> None:
        self.crypto_type = crypto_type
        self.domain = domain

    def verify(self, payload: bytes, signature: str, hotkey: str) -> bool:
        """True when `signature` is `hotkey`'s signature of `payload`; False for anything
        else, including a malformed signature or address."""
        try:
            raw = bytes.fromhex(signature.removeprefix("0x"))
            return bool(_verify(self.domain + payload, raw, hotkey, self.crypto_type))
        except (ValueError, TypeError):
            return False


def is_ss58(address: str) -> bool:
    """True when `address` is a well-formed ss58 address (its checksum holds)."""
    if not isinstance(address, str) or not 40 <= len(address) <= 64:
        return False
    try:
        Keypair(ss58_address=address)
    except (ValueError, TypeError):
        return False
    return True


def keypair_from_name(name: str, role: str) -> Any:
    """A deterministic sr25519 keypair for (`name`, `role`); public, so never for value."""
    seed = hashlib.sha256(f"shopbench/local-wallet/{name}/{role}".encode()).digest()
    return Keypair.create_from_seed(seed, CRYPTO_SR25519)


@dataclass(frozen=True)
class LocalWallet:
    """A wallet-shaped pair of in-memory keypairs that the bittensor SDK accepts."""

    name: str
    coldkey: Any
    hotkey: Any

    @classmethod
    def derive(cls, name: str) -> LocalWallet:
        """The wallet whose keys derive from `name` (same name, same keys)."""
        return cls(name, keypair_from_name(name, "coldkey"), keypair_from_name(name, "hotkey"))

    @property
    def coldkeypub(self) -> Any:
        return self.coldkey

    @property
    def hotkey_ss58(self) -> str:
        return self.hotkey.ss58_address

    @property
    def coldkey_ss58(self) -> str:
        return self.coldkey.ss58_address
