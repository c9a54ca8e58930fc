"""A served development chain that no one writer can capture: blocks come from the timer
only, a coldkey's registrations are limited and cost it, reveal plaintexts come only from
registered hotkeys and only a few at a time, a body is refused by its length before it is
read, and a stake that is no finite amount is a 400, never a 500.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from bittensor import ChainError
from test_memory_chain import signed

from template.chain.memory.client import RemoteMemorySubstrate
from template.chain.memory.server import (
    MemoryChainConfig,
    MemoryChainService,
    WriteLimits,
    memory_chain_app,
    new_chain,
)
from template.chain.memory.state import SubnetParams
from template.serve import BackgroundServer
from template.signing import LocalWallet

NETUID = 3
LIMITS = WriteLimits(registrations_per_coldkey=3, registration_cost=1.0, coldkey_allowance=20.0)


@pytest.fixture
def served() -> Iterator[tuple[Any, str]]:
    config = MemoryChainConfig(
        netuid=NETUID, block_time_s=60, limits=LIMITS,
        params=SubnetParams(tempo=10, weights_rate_limit=0, serving_rate_limit=0),
    )  # fmt: skip
    chain = new_chain(config)
    with BackgroundServer(memory_chain_app(MemoryChainService(chain, config.limits))) as server:
        yield chain, server.url


def test_extrinsics_never_produce_blocks_only_the_timer_does(served: Any) -> None:
    chain, url = served
    miner = LocalWallet.derive("timer-miner")
    asyncio.run(RemoteMemorySubstrate(url).register(NETUID, miner.hotkey_ss58, miner.coldkey))
    remote = RemoteMemorySubstrate(url, signer=miner.hotkey)
    head = chain._state.block
    bad = ("SubtensorModule", "serve_axon",
           {"netuid": NETUID, "version": 1, "ip": 1, "port": 1, "ip_type": 9, "protocol": 4})  # fmt: skip
    for _ in range(40):
        assert not asyncio.run(remote.submit(bad, miner.hotkey)).success
    good = ("SubtensorModule", "serve_axon", {**bad[2], "ip_type": 4})
    done = asyncio.run(remote.submit(good, miner.hotkey))
    assert done.success and done.extrinsic_id == f"{head}-0041"  # the 41st of the head block
    assert chain._state.block == head
    chain.advance(1)  # what the timer does
    assert chain._state.block == head + 1


def test_a_coldkey_registers_a_few_hotkeys_and_pays_for_each(served: Any) -> None:
    chain, url = served
    remote = RemoteMemorySubstrate(url)
    owner = LocalWallet.derive("many-hotkeys")
    hotkeys = [LocalWallet.derive(f"many-hotkeys-{i}").hotkey_ss58 for i in range(4)]
    for hk in hotkeys[:3]:
        asyncio.run(remote.register(NETUID, hk, owner.coldkey, stake=1.0))
    with pytest.raises(ChainError, match="holds 3 hotkeys"):
        asyncio.run(remote.register(NETUID, hotkeys[3], owner.coldkey))
    assert chain.uid_of(NETUID, hotkeys[3]) is None
    rich = LocalWallet.derive("asks-for-much")
    with pytest.raises(ChainError, match="has 20 left"):
        asyncio.run(remote.register(NETUID, rich.hotkey_ss58, rich.coldkey, stake=1e308))
    asyncio.run(remote.register(NETUID, rich.hotkey_ss58, rich.coldkey, stake=18.0))  # 19 of 20
    second = LocalWallet.derive("asks-for-much-2").hotkey_ss58
    with pytest.raises(ChainError, match="NotEnoughBalance|has 1 left"):
        asyncio.run(remote.register(NETUID, second, rich.coldkey, stake=1.0))


@pytest.mark.parametrize("stake", [float("inf"), float("nan"), -1.0, "1e999"])
def test_a_stake_that_is_no_finite_amount_is_a_400(served: Any, stake: Any) -> None:
    chain, url = served
    who = LocalWallet.derive("odd-stake")
    body = {"netuid": NETUID, "hotkey": who.hotkey_ss58, "stake": stake}
    doc = json.dumps(signed("register", body, who.coldkey, 1))  # Infinity, NaN as Python writes
    reply = httpx.post(url + "/write", content=doc, headers={"content-type": "application/json"})
    assert reply.status_code == 400, reply.text
    assert chain.uid_of(NETUID, who.hotkey_ss58) is None


def test_reveals_come_from_registered_hotkeys_a_few_at_a_time(served: Any) -> None:
    chain, url = served
    stranger = LocalWallet.derive("unregistered")
    with pytest.raises(ChainError, match="not registered"):
        asyncio.run(RemoteMemorySubstrate(url, signer=stranger.hotkey).deposit_reveal(
            NETUID, stranger.hotkey_ss58, [0], [1]))  # fmt: skip
    member = LocalWallet.derive("revealer")
    asyncio.run(RemoteMemorySubstrate(url).register(NETUID, member.hotkey_ss58, member.coldkey))
    remote = RemoteMemorySubstrate(url, signer=member.hotkey)
    for _ in range(LIMITS.reveals_per_hotkey):
        asyncio.run(remote.deposit_reveal(NETUID, member.hotkey_ss58, [0], [1]))
    with pytest.raises(ChainError, match="reveals waiting"):
        asyncio.run(remote.deposit_reveal(NETUID, member.hotkey_ss58, [0], [1]))
    asyncio.run(remote.withdraw_reveal(NETUID, member.hotkey_ss58))
    with pytest.raises(ChainError, match="at most 256"):
        asyncio.run(remote.deposit_reveal(NETUID, member.hotkey_ss58, [0] * 257, [1] * 257))
    assert chain.pending_reveals(NETUID, member.hotkey_ss58) == LIMITS.reveals_per_hotkey - 1


def test_a_body_is_refused_by_its_length_before_it_is_read(served: Any) -> None:
    _chain, url = served
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as conn:
        conn.sendall(
            b"POST /write HTTP/1.1\r\nHost: chain\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100663296\r\n\r\n{"  # 96 MiB declared, one byte sent
        )
        reply = b""
        while b"}" not in reply:  # the answer comes while the declared body never does
            reply += conn.recv(4096)
    reply = reply.decode("latin-1")
    assert reply.startswith("HTTP/1.1 400") and "over 1048576 bytes" in reply
