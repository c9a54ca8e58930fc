"""A stand-in for a hotkey in tests: signatures are HMAC-SHA256 under the hotkey's name."""

from __future__ import annotations

import hashlib
import hmac


class KeyedHash:
    """A Signer and Verifier whose key is its hotkey's name; another hotkey never verifies."""

    def __init__(self, hotkey: str = "5Validator") -> None:
        self.hotkey = hotkey

    def sign(self, payload: bytes) -> str:
        return hmac.new(self.hotkey.encode(), payload, hashlib.sha256).hexdigest()

    def verify(self, payload: bytes, signature: str, hotkey: str) -> bool:
        expected = hmac.new(hotkey.encode(), payload, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, signature)
