"""The served in-memory chain: only signed, fresh writes run; its address is checked.

The scenarios of tests/subnet/test_chain.py also run against the served chain; these are
the guarantees of serving it: whoever reaches the port can read, and can write only as a
key it holds, once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from bittensor import ChainError

from shopbench.errors import ShopbenchError
from template.base.config import SubtensorConfig
from template.chain import LocalChain, MemorySubstrate, SubnetParams
from template.chain.memory.client import RemoteMemorySubstrate
from template.chain.memory.server import MemoryChainService, memory_chain_app
from template.chain.memory.wire import (
    CHAIN_DOMAIN,
    MAX_BODY_BYTES,
    encode,
    parse_url,
    write_payload,
)
from template.serve import BackgroundServer
from template.signing import HotkeySigner, LocalWallet

NETUID = 3


@pytest.fixture
def served() -> Iterator[tuple[MemorySubstrate, str]]:
    chain = MemorySubstrate()
    chain.add_subnet(NETUID, params=SubnetParams(tempo=10, weights_rate_limit=0))
    with BackgroundServer(memory_chain_app(MemoryChainService(chain))) as server:
        yield chain, server.url


def signed(op: str, body: dict[str, Any], keypair: Any, nonce: int) -> dict[str, Any]:
    tagged = encode(body)
    signer = HotkeySigner(keypair, domain=CHAIN_DOMAIN)
    payload = write_payload(op, tagged, signer.hotkey, nonce)
    return {
        "op": op, "body": tagged, "signer": signer.hotkey, "nonce": nonce,
        "signature": signer.sign(payload),
    }  # fmt: skip


def test_registration_is_signed_by_the_coldkey_and_lands_on_chain(served: Any) -> None:
    chain, url = served
    wallet = LocalWallet.derive("miner-a")
    remote = RemoteMemorySubstrate(url)
    uid = asyncio.run(
        remote.register(NETUID, wallet.hotkey_ss58, wallet.coldkey, stake=2.5)
    )
    assert uid == 0 and chain.uid_of(NETUID, wallet.hotkey_ss58) == 0
    graph = chain._state.subnets[NETUID].neurons[0]
    assert (graph.coldkey, graph.stake_rao, graph.validator_permit) == (
        wallet.coldkey_ss58, 2_500_000_000, False,
    )  # fmt: skip
    with pytest.raises(ChainError, match="already on netuid 3"):
        asyncio.run(remote.register(NETUID, wallet.hotkey_ss58, wallet.coldkey))


def test_a_write_signed_by_another_key_is_refused_and_runs_nothing(served: Any) -> None:
    chain, url = served
    owner, thief = LocalWallet.derive("owner-a"), LocalWallet.derive("thief")
    doc = signed("register", {"netuid": NETUID, "hotkey": owner.hotkey_ss58}, thief.coldkey, 1)
    doc["signer"] = owner.coldkey_ss58  # claims to be the owner's coldkey
    reply = httpx.post(url + "/write", json=doc)
    assert reply.status_code == 401 and reply.json()["error"]["kind"] == "auth"
    assert chain.uid_of(NETUID, owner.hotkey_ss58) is None


def test_a_replayed_write_is_refused(served: Any) -> None:
    chain, url = served
    a, b = LocalWallet.derive("a"), LocalWallet.derive("b")
    first = signed("register", {"netuid": NETUID, "hotkey": a.hotkey_ss58}, a.coldkey, 10)
    assert httpx.post(url + "/write", json=first).json() == {"result": 0}
    chain.register(NETUID, b.hotkey_ss58, b.coldkey_ss58)  # the chain moves on
    replay = httpx.post(url + "/write", json=first).json()
    assert "not above 10" in replay["error"]["message"]
    older = signed("register", {"netuid": NETUID, "hotkey": b.hotkey_ss58}, a.coldkey, 9)
    assert "not above 10" in httpx.post(url + "/write", json=older).json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        ("/read", b"{not json", "not a read"),
        ("/read", json.dumps({"method": "advance", "args": [100]}).encode(), "is not a read"),
        ("/read", json.dumps({"method": "_enter"}).encode(), "is not a read"),
        ("/read", json.dumps({"method": "query", "args": ["X"]}).encode(), "query"),
        ("/write", json.dumps({"op": "mint", "body": {}}).encode(), "not a signed write"),
        ("/write", b"x" * (MAX_BODY_BYTES + 1), "over 1048576 bytes"),
    ],
)
def test_malformed_requests_get_a_clear_error(
    served: Any, path: str, body: bytes, says: str
) -> None:
    chain, url = served
    block = chain._state.block
    reply = httpx.post(url + path, content=body)
    assert reply.status_code == 400 and says in reply.json()["error"]["message"]
    assert chain._state.block == block


def test_a_hotkey_that_is_no_address_is_not_registered(served: Any) -> None:
    chain, url = served
    wallet = LocalWallet.derive("c")
    doc = signed("register", {"netuid": NETUID, "hotkey": "<script>"}, wallet.coldkey, 1)
    reply = httpx.post(url + "/write", json=doc)
    assert reply.status_code == 400 and "not an ss58 address" in reply.json()["error"]["message"]
    assert chain.netuids() == [NETUID] and chain._state.subnets[NETUID].neurons == []


def test_reveal_deposits_are_only_for_the_clients_own_hotkey(served: Any) -> None:
    _chain, url = served
    mine, other = LocalWallet.derive("mine"), LocalWallet.derive("other")
    remote = RemoteMemorySubstrate(url, signer=mine.hotkey)
    with pytest.raises(ChainError, match="holds no key"):
        asyncio.run(remote.deposit_reveal(NETUID, other.hotkey_ss58, [0], [1]))


def test_an_unreachable_served_chain_is_retried_then_typed() -> None:
    from template.errors import ChainUnavailable

    wallet = LocalWallet.derive("lonely")
    chain = LocalChain(RemoteMemorySubstrate("http://127.0.0.1:9"), wallet, NETUID, retries=1)
    with pytest.raises(ChainUnavailable, match="tried 2 times"):
        asyncio.run(chain.current_block())


@pytest.mark.parametrize(
    ("network", "url"),
    [
        ("memory", "http://127.0.0.1:9945"),
        ("memory://127.0.0.1:4000", "http://127.0.0.1:4000"),
        ("memory://chain.internal", "http://chain.internal:9945"),
    ],
)
def test_memory_networks_name_a_served_chain(network: str, url: str) -> None:
    assert SubtensorConfig(network=network).network == network
    assert parse_url(network) == url


@pytest.mark.parametrize("network", ["memory://", "memory://host:port", "memory://h:99999"])
def test_a_malformed_memory_network_is_refused_at_start(network: str) -> None:
    with pytest.raises((ValueError, ShopbenchError), match="memory://HOST:PORT"):
        SubtensorConfig(network=network)


def test_the_chain_commands_register_and_show_and_fail_in_one_line(
    served: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from shopbench.cli import main

    chain, url = served
    network = url.replace("http://", "memory://")
    wallet = ["--wallet.path", str(tmp_path / "w"), "--wallet.name", "dev"]
    main(["chain", "register", "--subtensor.network", network, "--netuid", str(NETUID),
          *wallet, "--create", "--stake", "1000", "--validator-permit"])  # fmt: skip
    registered = json.loads(capsys.readouterr().out)
    assert registered["uid"] == 0 and chain.uid_of(NETUID, registered["hotkey"]) == 0
    main(["chain", "show", "--subtensor.network", network, "--netuid", str(NETUID)])
    shown = json.loads(capsys.readouterr().out)
    assert shown["neurons"][0]["validator_permit"] and shown["neurons"][0]["stake"] == 1000.0
    with pytest.raises(SystemExit) as again:  # the chain's refusal, in one line
        main(["chain", "register", "--subtensor.network", network, "--netuid", str(NETUID),
              *wallet])  # fmt: skip
    assert again.value.code == 2 and "already on netuid 3" in capsys.readouterr().err
    with pytest.raises(SystemExit) as down:
        main(["chain", "show", "--subtensor.network", "memory://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert down.value.code == 2 and err.startswith("error: read memory://127.0.0.1:9")
    with pytest.raises(SystemExit) as bad:
        main(["chain", "show", "--subtensor.network", "ws://127.0.0.1:9944"])
    assert bad.value.code == 2 and "expected memory://HOST:PORT" in capsys.readouterr().err
