"""``ChainClient`` on the bittensor 11 SDK: metagraph reads, SetWeights, ServeAxon, commitments.

Failures become the :class:`~template.errors.ChainClientError` family: a call that could
not reach the chain (endpoint down, dropped connection) is retried with exponential
backoff and then raises :class:`ChainUnavailable`; the chain's refusals are mapped by
their error code (not registered, rate-limited) and are never retried, since they would
fail identically. Writes are idempotent (the same weights, endpoint or commitment), so
retrying one that may already have landed is safe.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import bittensor as bt
from bittensor.error_map import ErrorCode
from bittensor.settings import (
    default_archive_endpoints,
    default_fallback_endpoints,
    resolve_endpoint,
)

from template.chain.client import ChainConfig
from template.chain.model import Commitment, WeightsReceipt
from template.errors import (
    ChainClientError,
    ChainRejected,
    ChainUnavailable,
    InvalidChainRequest,
    NotRegistered,
    RateLimited,
    SubnetNotFound,
)
from template.metagraph import MetagraphView, NeuronView

log = logging.getLogger("template.chain")
T = TypeVar("T")
MAX_COMMITMENT_BYTES = 128
_NOT_REGISTERED = {
    "HotKeyNotRegisteredInSubNet",
    "HotKeyNotRegisteredInNetwork",
    "AccountNotAllowedCommit",  # the commitments pallet's word for "no uid here"
}
_RATE_LIMITED = {"SpaceLimitExceeded"}  # commitment space refills each epoch
_UNREACHABLE = (bt.RpcConnectionError, bt.ConnectionNotReady, OSError, TimeoutError)


def typed_chain_error(what: str, error: bt.ChainError) -> ChainClientError:
    """The ChainClientError for the SDK's `error` raised while doing `what`."""
    message = f"{what}: {error.message}"
    if error.name in _NOT_REGISTERED or error.code is ErrorCode.NOT_REGISTERED:
        return NotRegistered(message)
    if error.name in _RATE_LIMITED or error.code is ErrorCode.RATE_LIMITED:
        return RateLimited(message)
    return ChainRejected(message, error.name)


class BittensorChain:
    """A neuron's :class:`~template.chain.client.ChainClient` through the bittensor SDK.

    `wallet` is a ``bittensor.Wallet`` or any wallet-shaped object (coldkey, coldkeypub,
    hotkey); its hotkey signs every write. `substrate` replaces the RPC backend built for
    ``config.network`` (the in-memory chain in the arena and tests).
    """

    def __init__(
        self,
        wallet: Any,
        config: ChainConfig,
        *,
        substrate: Any | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self.netuid = config.netuid
        self.wallet = wallet
        self.hotkey: str = wallet.hotkey.ss58_address
        if substrate is None:
            # Built here (not by Client) so that connecting opens only the socket: the
            # Client's own connect also writes a display-symbol cache under ~/.bittensor.
            network, endpoint = resolve_endpoint(config.network)
            substrate = bt.RpcSubstrate(
                endpoint,
                fallback_endpoints=[
                    u for u in default_fallback_endpoints(network) if u != endpoint
                ],
                archive_endpoints=default_archive_endpoints(network),
            )
        self._substrate = substrate
        self._client = bt.Client(config.network, substrate=substrate)
        self._connected = False
        self._sleep = sleep

    @property
    def client(self) -> bt.Client:
        """The SDK client (for reads this protocol does not cover)."""
        return self._client

    async def close(self) -> None:
        """Close the connection (a later call reconnects)."""
        if self._connected:
            self._connected = False
            await self._substrate.close()

    async def _run(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """`op`, retried while the chain is unreachable; typed errors otherwise."""
        attempt = 0
        while True:
            try:
                if not self._connected:
                    await self._substrate.connect()
                    self._connected = True
                return await op()
            except _UNREACHABLE as e:
                self._connected = False
                if attempt >= self.config.retries:
                    raise ChainUnavailable(
                        f"{what} on netuid {self.netuid}: {e} (tried {attempt + 1} times)"
                    ) from None
                delay = self.config.retry_backoff_s * 2**attempt
                attempt += 1
                log.warning("%s: %s; retry %d in %.1f s", what, e, attempt, delay)
                await self._sleep(delay)
            except bt.ChainError as e:
                raise typed_chain_error(what, e) from None
            except bt.BittensorError as e:  # the SDK refused the arguments before signing
                raise InvalidChainRequest(f"{what}: {e}") from None

    async def _write(self, what: str, submit: Callable[[], Awaitable[Any]]) -> Any:
        """The successful ExtrinsicResult of `submit`, else the typed refusal."""
        result = await self._run(what, submit)
        if not result.success:
            raise typed_chain_error(what, result.error or bt.ChainError(result.message))
        return result

    def _finality(self) -> dict[str, bool]:
        return {
            "wait_for_inclusion": True,
            "wait_for_finalization": self.config.wait_for_finalization,
        }

    async def current_block(self) -> int:
        """The chain head's block number."""
        return await self._run("read the block number", self._client.block)

    async def metagraph(self) -> MetagraphView:
        """The subnet now: uids, hotkeys, stakes (alpha), validator permits, axons."""
        graph = await self._run(
            "read the metagraph",
            lambda: self._client.subnets.metagraph(self.netuid, commitments=False),
        )
        if graph is None:
            raise SubnetNotFound(self.netuid)
        neurons = [
            NeuronView(
                uid=n.uid,
                hotkey=n.hotkey,
                coldkey=n.coldkey,
                stake=float(n.total_stake.amount),
                validator_permit=n.validator_permit,
                axon=n.axon,
                registered_at=getattr(n, "block_at_registration", None),
            )
            for n in graph.neurons
        ]
        return MetagraphView(netuid=self.netuid, block=graph.block, neurons=neurons)

    async def set_weights(
        self, weights: Mapping[int, float], *, version_key: int = 0
    ) -> WeightsReceipt:
        """Set or commit `weights` through the SDK's SetWeights intent; what it did."""
        if not weights or not any(w > 0 for w in weights.values()):
            raise InvalidChainRequest(f"set weights on netuid {self.netuid}: all weights are 0")
        intent = bt.SetWeights(
            netuid=self.netuid,
            weights={int(u): float(w) for u, w in weights.items()},
            version_key=version_key,
        )
        result = await self._write(
            f"set weights on netuid {self.netuid}",
            lambda: self._client.execute(intent, self.wallet, **self._finality()),
        )
        reveal_round = result.data.get("reveal_round")
        block = int(result.extrinsic_id.split("-")[0]) if result.extrinsic_id else None
        return WeightsReceipt(
            mode="direct" if reveal_round is None else "commit_reveal",
            block=block,
            reveal_round=reveal_round,
        )

    async def serve(self, ip: str, port: int) -> None:
        """Publish ``ip:port`` through the SDK's ServeAxon intent."""
        what = f"serve {ip}:{port} on netuid {self.netuid}"
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise InvalidChainRequest(f"{what}: {ip!r} is not an IP address") from None
        if not 1 <= port <= 65535:
            raise InvalidChainRequest(f"{what}: the port must be 1..65535")
        intent = bt.ServeAxon(netuid=self.netuid, ip=ip, port=port)
        await self._write(
            what, lambda: self._client.execute(intent, self.wallet, **self._finality())
        )

    async def commit(self, data: str) -> None:
        """Publish `data` as this hotkey's plaintext commitment (one Raw field)."""
        what = f"commit to netuid {self.netuid}"
        raw = data.encode("utf-8")
        if not 0 < len(raw) <= MAX_COMMITMENT_BYTES:
            raise InvalidChainRequest(
                f"{what}: the data is {len(raw)} bytes; 1..{MAX_COMMITMENT_BYTES} are allowed"
            )
        call = bt.calls.Commitments.set_commitment(
            netuid=self.netuid, info={"fields": [[{f"Raw{len(raw)}": raw}]]}
        )
        await self._write(
            what,
            lambda: self._client.submit_call(
                call, self.wallet, signer="hotkey", **self._finality()
            ),
        )

    async def read_commitments(self) -> dict[str, Commitment]:
        """Every hotkey's visible commitment on the subnet, by hotkey."""
        found = await self._run(
            "read commitments", lambda: self._client.subnets.commitments(self.netuid)
        )
        return {
            hotkey: Commitment(hotkey=hotkey, uid=c.uid, block=c.block, data=c.value or "")
            for hotkey, c in found.items()
        }
