"""Record signatures with a hotkey: shopbench's Signer / Verifier protocols, implemented."""

from __future__ import annotations

import pytest

from shopbench.archive.signing import Signer, Verifier
from template.signing import RECORD_DOMAIN, HotkeySigner, HotkeyVerifier, LocalWallet

PAYLOAD = b'{"episode_id":"ep-1","score":0.9}'


@pytest.fixture(scope="module")
def wallet() -> LocalWallet:
    return LocalWallet.derive("validator-a")


def test_the_implementations_satisfy_shopbenchs_protocols(wallet: LocalWallet) -> None:
    signer = HotkeySigner.from_wallet(wallet)
    assert isinstance(signer, Signer)
    assert isinstance(HotkeyVerifier(), Verifier)
    assert signer.hotkey == wallet.hotkey_ss58


def test_a_signature_verifies_for_its_payload_and_hotkey_only(wallet: LocalWallet) -> None:
    signer, verifier = HotkeySigner.from_wallet(wallet), HotkeyVerifier()
    signature = signer.sign(PAYLOAD)
    assert all(c in "0123456789abcdef" for c in signature) and len(signature) == 128
    assert verifier.verify(PAYLOAD, signature, wallet.hotkey_ss58)
    assert verifier.verify(PAYLOAD, "0x" + signature, wallet.hotkey_ss58)
    assert not verifier.verify(PAYLOAD + b" ", signature, wallet.hotkey_ss58)
    other = LocalWallet.derive("validator-b")
    assert not verifier.verify(PAYLOAD, signature, other.hotkey_ss58)


@pytest.mark.parametrize(
    ("signature", "hotkey"),
    [("zz", None), ("ab" * 10, None), ("", None), ("ab" * 64, "not-an-address")],
)
def test_malformed_input_is_false_never_an_exception(
    wallet: LocalWallet, signature: str, hotkey: str | None
) -> None:
    assert HotkeyVerifier().verify(PAYLOAD, signature, hotkey or wallet.hotkey_ss58) is False


def test_a_bare_signature_of_the_payload_is_not_a_record_signature(wallet: LocalWallet) -> None:
    # The domain prefix keeps record signatures apart from any other use of the hotkey.
    bare = bytes(wallet.hotkey.sign(PAYLOAD)).hex()
    assert not HotkeyVerifier().verify(PAYLOAD, bare, wallet.hotkey_ss58)
    prefixed = bytes(wallet.hotkey.sign(RECORD_DOMAIN + PAYLOAD)).hex()
    assert HotkeyVerifier().verify(PAYLOAD, prefixed, wallet.hotkey_ss58)


def test_local_wallets_derive_the_same_keys_from_the_same_name() -> None:
    a, again, b = (LocalWallet.derive(n) for n in ("miner-1", "miner-1", "miner-2"))
    assert a.hotkey_ss58 == again.hotkey_ss58 and a.coldkey_ss58 == again.coldkey_ss58
    assert len({a.hotkey_ss58, a.coldkey_ss58, b.hotkey_ss58, b.coldkey_ss58}) == 4
