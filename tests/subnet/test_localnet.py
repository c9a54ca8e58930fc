"""The chain client against a real subtensor node: a localnet, when one is reachable.

Set ``SHOPBENCH_SUBTENSOR=ws://127.0.0.1:9944`` (the localnet image of docs/validator.md,
*A local subtensor node*) and ``SHOPBENCH_NETUID`` (a subnet that exists there; default
1). Without them, or when nothing answers at that address, every test here is skipped,
saying which. ``SHOPBENCH_WALLET=NAME`` (under ``~/.bittensor/wallets``, hotkey
``default``) adds the writes: serving an address, and setting weights when it holds a
validator permit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlparse

import pytest

from template.chain import BittensorChain, ChainConfig
from template.errors import RateLimited
from template.metagraph import MetagraphView
from template.signing import LocalWallet

T = TypeVar("T")
ENDPOINT = os.environ.get("SHOPBENCH_SUBTENSOR", "")
NETUID = int(os.environ.get("SHOPBENCH_NETUID", "1"))


def _reachable(url: str) -> str | None:
    """Why `url` cannot be used, or None when a TCP connection opens."""
    if not url:
        return "SHOPBENCH_SUBTENSOR is not set (e.g. ws://127.0.0.1:9944, a localnet)"
    parsed = urlparse(url)
    if parsed.scheme not in {"ws", "wss"} or not parsed.hostname:
        return f"SHOPBENCH_SUBTENSOR={url!r} is not a ws(s):// URL"
    port = parsed.port or (443 if parsed.scheme == "wss" else 9944)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=2):
            return None
    except OSError as e:
        return f"nothing answers at {url} ({e})"


pytestmark = pytest.mark.skipif(
    (why := _reachable(ENDPOINT)) is not None, reason=str(why)
)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def chain_for(wallet: Any) -> BittensorChain:
    return BittensorChain(wallet, ChainConfig(network=ENDPOINT, netuid=NETUID, retries=1))


def test_the_head_moves() -> None:
    chain = chain_for(LocalWallet.derive("localnet-reader"))
    first = run(chain.current_block())
    run(asyncio.sleep(13))
    assert run(chain.current_block()) > first


def test_the_metagraph_reads_into_a_coherent_view() -> None:
    chain = chain_for(LocalWallet.derive("localnet-reader"))
    graph = run(chain.metagraph())
    assert isinstance(graph, MetagraphView) and graph.netuid == NETUID
    assert graph.uids == list(range(len(graph.neurons)))
    assert all(n.stake >= 0 for n in graph.neurons)
    assert graph.block <= run(chain.current_block())


def test_commitments_read() -> None:
    chain = chain_for(LocalWallet.derive("localnet-reader"))
    for hotkey, commitment in run(chain.read_commitments()).items():
        assert commitment.hotkey == hotkey


@pytest.mark.skipif(not os.environ.get("SHOPBENCH_WALLET"), reason="SHOPBENCH_WALLET is not set")
def test_a_registered_wallet_serves_and_sets_weights() -> None:
    import bittensor as bt

    wallet = bt.Wallet(name=os.environ["SHOPBENCH_WALLET"], hotkey="default")
    chain = chain_for(wallet)
    graph = run(chain.metagraph())
    me = graph.by_hotkey(chain.hotkey)
    if me is None:
        pytest.skip(f"{chain.hotkey} is not registered on netuid {NETUID}")
    with contextlib.suppress(RateLimited):  # served within the limit: the address stands
        run(chain.serve("127.0.0.1", 8091))
    served = run(chain.metagraph()).by_hotkey(chain.hotkey)
    assert served is not None and served.axon == "127.0.0.1:8091"
    if me.validator_permit:
        others = [n.uid for n in graph.neurons if n.uid != me.uid][:4] or [me.uid]
        receipt = run(chain.set_weights({uid: 1.0 for uid in others}))
        assert receipt.mode in {"direct", "commit_reveal"}
