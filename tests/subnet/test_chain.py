"""Chain clients driven through the SDK's own intents and reads, on the in-memory chain."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from bittensor.intents.weights import clip_to_max_weight, normalize

from template.chain import (
    BittensorChain,
    ChainClient,
    ChainConfig,
    LocalChain,
    MemorySubstrate,
    SubnetParams,
)
from template.chain.memory.client import RemoteMemorySubstrate
from template.chain.memory.server import MemoryChainService, memory_chain_app
from template.errors import (
    ChainRejected,
    ChainUnavailable,
    InvalidChainRequest,
    NotRegistered,
    RateLimited,
)
from template.serve import BackgroundServer
from template.signing import LocalWallet

T = TypeVar("T")
NETUID = 7
U16 = 65535


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Subnet:
    """A subnet with a validator (uid 0), three miners (1-3) and an outsider.

    With `url` set, the neurons reach ``chain`` served over HTTP, as separate processes do.
    """

    def __init__(self, url: str | None = None, **params: Any) -> None:
        self.url = url
        self.chain = MemorySubstrate()
        owner = LocalWallet.derive("owner")
        self.chain.add_subnet(
            NETUID, owner.hotkey_ss58, owner.coldkey_ss58, SubnetParams(tempo=10, **params)
        )
        self.validator = LocalWallet.derive("validator")
        self.miners = [LocalWallet.derive(f"miner-{i}") for i in range(1, 4)]
        self.outsider = LocalWallet.derive("outsider")
        v = self.validator
        self.chain.register(NETUID, v.hotkey_ss58, v.coldkey_ss58, 5000, validator_permit=True)
        for m in self.miners:
            self.chain.register(NETUID, m.hotkey_ss58, m.coldkey_ss58, stake=12.5)

    def substrate(self, wallet: LocalWallet) -> MemorySubstrate | RemoteMemorySubstrate:
        """The chain as `wallet`'s process reaches it."""
        if self.url is None:
            return self.chain
        return RemoteMemorySubstrate(self.url, signer=wallet.hotkey)

    def local(self, wallet: LocalWallet) -> LocalChain:
        return LocalChain(self.substrate(wallet), wallet, NETUID)


MakeSubnet = Callable[..., Subnet]


@pytest.fixture(params=["in-process", "served"])
def subnet(request: pytest.FixtureRequest) -> Iterator[MakeSubnet]:
    """Make a :class:`Subnet`, in-process or served by the chain's HTTP server."""
    servers: list[BackgroundServer] = []

    def make(**params: Any) -> Subnet:
        if request.param == "in-process":
            return Subnet(**params)
        net = Subnet(url="", **params)
        server = BackgroundServer(memory_chain_app(MemoryChainService(net.chain))).start()
        servers.append(server)
        net.url = server.url
        return net

    yield make
    for server in servers:
        server.stop()


def sdk_quantised(weights: dict[int, float], limit: int = U16) -> dict[int, int]:
    """The SDK's own clipping and u16 quantisation of `weights`."""
    uids = sorted(weights)
    values = [weights[u] for u in uids]
    if limit < U16:
        values = clip_to_max_weight(values, limit / U16)
    return dict(zip(*normalize(uids, values), strict=True))


def test_both_clients_satisfy_the_protocol() -> None:
    net = Subnet()
    assert isinstance(net.local(net.validator), ChainClient)
    assert isinstance(
        BittensorChain(net.validator, ChainConfig(netuid=NETUID), substrate=net.chain), ChainClient
    )


def test_set_weights_stores_the_sdks_quantisation_of_the_input(subnet: MakeSubnet) -> None:
    net = subnet()
    chain = net.local(net.validator)
    weights = {1: 1.0, 2: 0.5, 3: 0.1234}
    receipt = run(chain.set_weights(weights))
    assert receipt.mode == "direct" and receipt.reveal_round is None
    assert receipt.block == run(chain.current_block())
    stored = net.chain.stored_weights(NETUID)[0]
    assert stored == sdk_quantised(weights)
    assert stored == {1: 65535, 2: 32768, 3: 8087}  # max-upscaled, rounded half to even


def test_weights_over_the_max_weight_limit_are_clipped_as_the_sdk_clips_them(
    subnet: MakeSubnet,
) -> None:
    limit = 26214  # 40 % of the total at most
    net = subnet(max_weights_limit=limit)
    weights = {1: 10.0, 2: 1.0, 3: 1.0}
    run(net.local(net.validator).set_weights(weights))
    stored = net.chain.stored_weights(NETUID)[0]
    assert stored == sdk_quantised(weights, limit)
    assert max(stored.values()) * U16 // sum(stored.values()) <= limit
    assert stored[2] == stored[3] < stored[1]


def test_commit_reveal_commits_sealed_weights_and_reveals_them_at_the_epoch(
    subnet: MakeSubnet,
) -> None:
    net = subnet(commit_reveal=True, reveal_period_epochs=1)
    chain = net.local(net.validator)
    weights = {2: 1.0, 3: 3.0}
    receipt = run(chain.set_weights(weights))
    assert receipt.mode == "commit_reveal" and receipt.reveal_round and receipt.reveal_round > 0
    (commit,) = net.chain.pending_commits(NETUID)
    assert commit.uid == 0 and len(commit.commit) > 100  # the SDK's timelock ciphertext
    assert net.chain.stored_weights(NETUID) == {}  # nothing visible before the reveal
    net.chain.advance(10)  # one tempo: the commit's reveal epoch
    assert net.chain.pending_commits(NETUID) == []
    assert net.chain.stored_weights(NETUID)[0] == sdk_quantised(weights) == {2: 21845, 3: 65535}


def test_a_refused_commit_does_not_leave_its_plaintext_behind(subnet: MakeSubnet) -> None:
    net = subnet(commit_reveal=True)
    chain = net.local(net.validator)
    run(chain.set_weights({1: 1.0}))
    with pytest.raises(RateLimited):
        run(chain.set_weights({2: 1.0}))
    net.chain.set_params(NETUID, weights_rate_limit=0)
    run(chain.set_weights({3: 1.0}))
    net.chain.advance(10)
    assert net.chain.stored_weights(NETUID)[0] == {3: 65535}


def test_weight_refusals_are_typed(subnet: MakeSubnet) -> None:
    net = subnet(weights_version_key=3)
    chain = net.local(net.validator)
    with pytest.raises(InvalidChainRequest, match="all weights are 0"):
        run(chain.set_weights({1: 0.0}))
    with pytest.raises(ChainRejected) as old:
        run(chain.set_weights({1: 1.0}, version_key=2))
    assert old.value.name == "IncorrectWeightVersionKey"
    with pytest.raises(ChainRejected) as unknown_uid:
        run(chain.set_weights({1: 1.0, 99: 1.0}, version_key=3))
    assert unknown_uid.value.name == "UidVecContainInvalidOne"
    run(chain.set_weights({1: 1.0}, version_key=3))
    with pytest.raises(RateLimited, match="rate limit is 100 blocks"):
        run(chain.set_weights({2: 1.0}, version_key=3))
    with pytest.raises(NotRegistered, match="not registered on netuid 7"):
        run(net.local(net.outsider).set_weights({1: 1.0}))
    with pytest.raises(ChainRejected) as no_permit:
        run(net.local(net.miners[0]).set_weights({2: 1.0}, version_key=3))
    assert no_permit.value.name == "NeuronNoValidatorPermit"


def test_metagraph_view_reads_the_chain_through_the_sdk(subnet: MakeSubnet) -> None:
    net = subnet()
    config = ChainConfig(netuid=NETUID)
    chain = BittensorChain(net.validator, config, substrate=net.substrate(net.validator))
    miner = BittensorChain(net.miners[1], config, substrate=net.substrate(net.miners[1]))
    run(miner.serve("203.0.113.9", 8091))
    graph = run(chain.metagraph())
    assert graph.netuid == NETUID and graph.block == run(chain.current_block())
    assert graph.uids == [0, 1, 2, 3]
    assert graph.hotkeys == [net.validator.hotkey_ss58] + [m.hotkey_ss58 for m in net.miners]
    assert graph.stakes == [5000.0, 12.5, 12.5, 12.5]
    assert graph.validator_permits == [True, False, False, False]
    assert graph.axons == [None, None, "203.0.113.9:8091", None]
    assert graph.by_hotkey(net.miners[1].hotkey_ss58).uid == 2  # type: ignore[union-attr]


def test_serving_is_validated_and_rate_limited(subnet: MakeSubnet) -> None:
    net = subnet(serving_rate_limit=5)
    miner = net.local(net.miners[0])
    with pytest.raises(InvalidChainRequest, match="not an IP address"):
        run(miner.serve("localhost", 8091))
    with pytest.raises(InvalidChainRequest, match="1..65535"):
        run(miner.serve("127.0.0.1", 0))
    run(miner.serve("2001:db8::1", 9000))
    assert run(miner.metagraph()).axons[1] == "[2001:db8::1]:9000"
    with pytest.raises(RateLimited):
        run(miner.serve("127.0.0.1", 9001))
    net.chain.advance(5)
    run(miner.serve("127.0.0.1", 9001))
    assert run(miner.metagraph()).axons[1] == "127.0.0.1:9001"
    with pytest.raises(NotRegistered):
        run(net.local(net.outsider).serve("127.0.0.1", 9002))


def test_commitments_round_trip_through_the_commitments_pallet(subnet: MakeSubnet) -> None:
    net = subnet()
    validator = net.local(net.validator)
    seed_hash = "sha256:" + "3f" * 32
    run(validator.commit(seed_hash))
    block = run(validator.current_block())
    found = run(net.local(net.miners[0]).read_commitments())
    assert list(found) == [net.validator.hotkey_ss58]
    got = found[net.validator.hotkey_ss58]
    assert (got.data, got.uid, got.block) == (seed_hash, 0, block)
    with pytest.raises(InvalidChainRequest, match="129 bytes"):
        run(validator.commit("x" * 129))
    with pytest.raises(NotRegistered):
        run(net.local(net.outsider).commit("hello"))


def test_commitment_space_refills_each_epoch(subnet: MakeSubnet) -> None:
    net = subnet(commitment_space=200)
    validator = net.local(net.validator)
    run(validator.commit("first"))
    run(validator.commit("second"))
    with pytest.raises(RateLimited, match="SpaceLimitExceeded|bytes this epoch"):
        run(validator.commit("third"))
    net.chain.advance(10)
    run(validator.commit("third"))
    assert run(validator.read_commitments())[net.validator.hotkey_ss58].data == "third"


def test_an_unreachable_chain_is_retried_with_backoff_then_typed() -> None:
    net = Subnet()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    config = ChainConfig(netuid=NETUID, retries=2, retry_backoff_s=0.5)
    chain = BittensorChain(net.validator, config, substrate=net.chain, sleep=sleep)
    net.chain.fail_next(2)
    assert run(chain.current_block()) == run(chain.current_block())
    assert waits == [0.5, 1.0]
    net.chain.fail_next(100)
    with pytest.raises(ChainUnavailable, match="tried 3 times"):
        run(chain.metagraph())
    net.chain.fail_next(2)
    run(chain.set_weights({1: 1.0}))  # a write that first meets a dropped connection
    assert net.chain.stored_weights(NETUID)[0] == {1: 65535}


def test_a_missing_subnet_is_a_typed_refusal() -> None:
    net = Subnet()
    chain = BittensorChain(net.validator, ChainConfig(netuid=99), substrate=net.chain)
    with pytest.raises(ChainRejected, match="netuid 99 does not exist"):
        run(chain.metagraph())
