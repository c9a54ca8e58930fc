"""Episode-scoped ids: the opaque tokens an agent sees instead of catalog ids.

A token is HMAC-SHA256(episode key, kind prefix + catalog id) reduced to a fixed number of
decimal digits with a non-zero first digit — 10 for products, 9 for shops, the shape of
ShoppingBench's ids. Without the key, a token says nothing about the catalog id, and a token
from another episode (another key) or an invented one is not in this episode's book. Only
tokens the episode has shown resolve; that is what makes an id the agent was never shown
worthless.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal

TokenKind = Literal["product", "shop"]

_DIGITS: dict[TokenKind, int] = {"product": 10, "shop": 9}
# Per kind: message prefix, smallest token, number of tokens (first digit never 0).
_SHAPE: dict[TokenKind, tuple[bytes, int, int]] = {
    "product": (b"p:", 10**9, 9 * 10**9),
    "shop": (b"s:", 10**8, 9 * 10**8),
}
_BLOCK = 64  # SHA-256's block size, the HMAC key length
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


def token_digits(kind: TokenKind) -> int:
    """How many digits a token of this kind has."""
    return _DIGITS[kind]


class TokenBook:
    """The tokens one episode has shown, both ways: token ↔ catalog id, per kind.

    Minting is deterministic for a key (same key, same catalog id → same token), so a replay
    with the episode's key reproduces the observations; collisions within the episode are
    resolved by re-hashing with a counter, so two catalog ids never share a token.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("an episode key needs at least 16 bytes")
        # HMAC (RFC 2104) with its two keyed hash states computed once: copying them costs
        # a third of what the hmac module's per-message object does, and minting is on the
        # path of every search result.
        block = (hashlib.sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(block.translate(_IPAD))
        self._outer = hashlib.sha256(block.translate(_OPAD))
        self._to_token: dict[TokenKind, dict[str, str]] = {"product": {}, "shop": {}}
        self._to_id: dict[TokenKind, dict[str, str]] = {"product": {}, "shop": {}}

    def _derive(self, kind: TokenKind, catalog_id: str, attempt: int) -> str:
        """The `attempt`-th candidate token: HMAC-SHA256(key, prefix [attempt:] id) in digits."""
        prefix, low, span = _SHAPE[kind]
        if attempt:
            prefix += f"{attempt}:".encode()
        inner = self._inner.copy()
        inner.update(prefix + catalog_id.encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        return str(low + int.from_bytes(outer.digest()[:8], "big") % span)

    def show(self, kind: TokenKind, catalog_id: str) -> str:
        """The token for a catalog id, recorded as shown in this episode."""
        return self.show_all(kind, (catalog_id,))[0]

    def show_all(self, kind: TokenKind, catalog_ids: Sequence[str]) -> list[str]:
        """The tokens for several catalog ids, in order, all recorded as shown."""
        prefix, low, span = _SHAPE[kind]
        to_token, to_id = self._to_token[kind], self._to_id[kind]
        inner0, outer0 = self._inner, self._outer
        out: list[str] = []
        for catalog_id in catalog_ids:
            token = to_token.get(catalog_id)
            if token is None:
                # _derive(kind, catalog_id, 0) inlined: this runs for every search result.
                inner = inner0.copy()
                inner.update(prefix + catalog_id.encode())
                outer = outer0.copy()
                outer.update(inner.digest())
                token = str(low + int.from_bytes(outer.digest()[:8], "big") % span)
                attempt = 0
                while token in to_id:  # another id holds it: re-hash, never share
                    attempt += 1
                    token = self._derive(kind, catalog_id, attempt)
                to_id[token] = catalog_id
                to_token[catalog_id] = token
            out.append(token)
        return out

    def resolve(self, token: str, kind: TokenKind | None = None) -> str | None:
        """The catalog id behind a shown token (of `kind`, or of either kind), else None."""
        kinds: tuple[TokenKind, ...] = (kind,) if kind else ("product", "shop")
        for k in kinds:
            found = self._to_id[k].get(token)
            if found is not None:
                return found
        return None

    def mapping(self, kind: TokenKind | None = None) -> dict[str, str]:
        """Token → catalog id for every token shown (of `kind`, or of both kinds)."""
        kinds: tuple[TokenKind, ...] = (kind,) if kind else ("product", "shop")
        out: dict[str, str] = {}
        for k in kinds:
            out.update(self._to_id[k])
        return out

    def __len__(self) -> int:
        return len(self._to_id["product"]) + len(self._to_id["shop"])


def token_kind(token: str) -> TokenKind | None:
    """The kind a token's shape says it is (10 digits: a product, 9: a shop), else None."""
    if not token.isdigit() or token[0] == "0":
        return None
    return next((k for k, n in _DIGITS.items() if len(token) == n), None)


class RecordedTokenBook(TokenBook):
    """A book that shows each catalog id by the token an archived episode recorded for it.

    An episode whose key was drawn at random (not derived from a revealed seed,
    :mod:`shopbench.env.keys`) cannot have its tokens minted again: its key is never
    recorded, only its one-way hash, the episode id. A replay of it takes the tokens from the
    record's token map instead. An id the record never showed gets a token
    minted under a fresh key, which no recorded observation contains: a replay that shows
    something the original did not is seen in its observations and in its token map.
    """

    def __init__(self, recorded: dict[str, str], key: bytes) -> None:
        super().__init__(key)
        self._recorded: dict[TokenKind, dict[str, str]] = {"product": {}, "shop": {}}
        for token, catalog_id in recorded.items():
            kind = token_kind(token)
            if kind is not None:
                self._recorded[kind].setdefault(catalog_id, token)

    def show_all(self, kind: TokenKind, catalog_ids: Sequence[str]) -> list[str]:
        """The recorded token of each id (minted afresh where the record has none)."""
        to_token, to_id = self._to_token[kind], self._to_id[kind]
        out: list[str] = []
        for catalog_id in catalog_ids:
            token = to_token.get(catalog_id) or self._recorded[kind].get(catalog_id)
            if token is not None and to_id.get(token, catalog_id) == catalog_id:
                to_id[token] = catalog_id
                to_token[catalog_id] = token
                out.append(token)
            else:
                out.extend(super().show_all(kind, (catalog_id,)))
        return out
