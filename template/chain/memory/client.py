"""A served in-memory chain as the SDK's ``Substrate``: what ``memory://HOST:PORT`` means.

:class:`RemoteMemorySubstrate` forwards every read to ``shopbench chain serve`` and signs
every write with the key that makes it (the SDK hands :meth:`submit` the keypair; the
reveal deposits and withdrawals of commit-reveal are signed by the neuron's hotkey), so a
neuron process drives the served chain through the same SDK code, and the same
:class:`~template.chain.local.LocalChain`, as the arena drives its in-process chain.
A chain that cannot be reached raises ``bittensor.RpcConnectionError``, which the chain
client retries as it does a dropped node connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
from bittensor import Balance, ChainError, ExtrinsicResult, RpcConnectionError

from template.chain.memory.facts import FixedChainFacts
from template.chain.memory.state import SubnetParams
from template.chain.memory.wire import CHAIN_DOMAIN, WireError, decode, encode, write_payload
from template.signing import HotkeySigner

_TIMEOUT = httpx.Timeout(10.0, connect=3.0)


class RemoteMemorySubstrate(FixedChainFacts):
    """``bittensor.Substrate`` over HTTP to a served in-memory chain at `url`.

    `signer` is the keypair of the neuron's hotkey, which signs its reveal deposits.
    """

    poll_s = 0.5

    def __init__(self, url: str, signer: Any | None = None, block_time: float = 12.0) -> None:
        self.url = url.rstrip("/")
        self.token_symbols: dict[int, str] = {}
        self.block_time_s = block_time
        self._signer = signer
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_nonce = 0
        self._write_lock: asyncio.Lock | None = None

    # transport ------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = httpx.AsyncClient(timeout=_TIMEOUT)
            self._loop = loop
            self._write_lock = asyncio.Lock()
        return self._client

    async def _post(self, path: str, doc: dict[str, Any]) -> Any:
        try:
            response = await self._http().post(self.url + path, json=doc)
        except (httpx.TransportError, OSError) as e:
            raise RpcConnectionError(f"memory chain {self.url}: {e}") from None
        try:
            payload = response.json()
        except ValueError:
            raise RpcConnectionError(
                f"memory chain {self.url}{path}: HTTP {response.status_code}, not JSON"
            ) from None
        if "error" in payload:
            error = WireError.model_validate(payload["error"])
            raise ChainError(error.message, error.name)
        return decode(payload.get("result"))

    async def _read(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self._post(
            "/read", {"method": method, "args": encode(list(args)), "kwargs": encode(kwargs)}
        )

    async def signed(self, op: str, body: dict[str, Any], keypair: Any) -> Any:
        """Send write `op` with `body`, signed by `keypair`, with a fresh nonce."""
        self._http()
        assert self._write_lock is not None
        async with self._write_lock:
            self._last_nonce = nonce = max(time.time_ns() // 1000, self._last_nonce + 1)
            tagged = encode(body)
            signer = HotkeySigner(keypair, domain=CHAIN_DOMAIN)
            payload = write_payload(op, tagged, signer.hotkey, nonce)
            doc = {
                "op": op, "body": tagged, "signer": signer.hotkey, "nonce": nonce,
                "signature": signer.sign(payload),
            }  # fmt: skip
            return await self._post("/write", doc)

    def _own_signer(self, hotkey: str) -> Any:
        if self._signer is None or self._signer.ss58_address != hotkey:
            raise ChainError(f"this client holds no key for {hotkey}", "BadOrigin")
        return self._signer

    # the dev chain's surface (LocalChain and `shopbench chain`) ----------------------

    async def subnet_params(self, netuid: int) -> SubnetParams:
        return SubnetParams.model_validate(await self._read("subnet_params", netuid))

    async def subnet_uid(self, netuid: int, hotkey: str) -> int | None:
        uid = await self._read("subnet_uid", netuid, hotkey)
        return None if uid is None else int(uid)

    async def deposit_reveal(
        self, netuid: int, hotkey: str, uids: list[int], values: list[int]
    ) -> None:
        body = {"netuid": netuid, "uids": list(uids), "values": list(values)}
        await self.signed("deposit_reveal", body, self._own_signer(hotkey))

    async def withdraw_reveal(self, netuid: int, hotkey: str) -> None:
        await self.signed("withdraw_reveal", {"netuid": netuid}, self._own_signer(hotkey))

    async def stored_weights(self, netuid: int) -> dict[int, dict[int, int]]:
        rows = await self._read("stored_weights", netuid)
        return {int(k): {int(t): int(v) for t, v in row.items()} for k, row in rows.items()}

    async def pending_commits(self, netuid: int) -> list[dict[str, Any]]:
        return list(await self._read("pending_commits", netuid))

    async def register(
        self, netuid: int, hotkey: str, coldkey: Any, *, stake: float = 0.0,
        validator_permit: bool = False,
    ) -> int:
        """Register `hotkey` on `netuid`, signed by its owner `coldkey`; returns the uid."""
        body = {
            "netuid": netuid, "hotkey": hotkey, "stake": stake,
            "validator_permit": validator_permit,
        }  # fmt: skip
        return int(await self.signed("register", body, coldkey))

    # Substrate: display and lifecycle ------------------------------------------------

    async def connect(self) -> None:
        self.block_time_s = float(await self._read("block_time"))

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(RuntimeError):  # its loop is gone, and nothing with it
                await client.aclose()

    # Substrate: reads ---------------------------------------------------------------

    async def block_hash(self, block: int | None = None) -> str:
        return str(await self._read("block_hash", block))

    async def block_number(self) -> int:
        return int(await self._read("block_number"))

    async def query(
        self, module: str, storage_function: str, params: list[Any] | None = None,
        block_hash: str | None = None,
    ) -> Any:  # fmt: skip
        return await self._read("query", module, storage_function, list(params or []))

    async def map_has_entries(
        self, module: str, storage_function: str, params: list[Any], block_hash: str | None = None
    ) -> bool:
        return bool(await self.query_map(module, storage_function, params))

    async def query_map(
        self, module: str, storage_function: str, params: list[Any] | None = None,
        block_hash: str | None = None,
    ) -> list[tuple[Any, Any]]:  # fmt: skip
        rows = await self._read("query_map", module, storage_function, list(params or []))
        return [(row[0], row[1]) for row in rows]

    async def query_batch(
        self, module: str, storage_function: str, param_sets: list[list[Any]],
        block_hash: str | None = None,
    ) -> list[Any]:  # fmt: skip
        return [await self.query(module, storage_function, p) for p in param_sets]

    async def runtime_call(
        self, api: str, method: str, params: list[Any], block_hash: str | None = None
    ) -> Any:
        return await self._read("runtime_call", api, method, list(params))

    async def constant(self, module: str, name: str) -> Any:
        raise self._unmodelled(f"constant {module}.{name}")

    async def decode_scale(self, type_string: str, data: Any) -> Any:
        raise self._unmodelled(f"decoding of SCALE {type_string}")

    async def events(self, block_hash: str | None = None) -> list[dict[str, Any]]:
        return list(await self._read("events", block_hash))

    # Substrate: calls, fees and writes -------------------------------------------------

    async def compose(self, call: Any) -> Any:
        await self._read("compose", list(call))
        return call

    async def account_next_index(self, address: str) -> int:
        return int(await self._read("account_next_index", address))

    async def submit(
        self, call: Any, keypair: Any, *, nonce: int | None = None, period: int | None = None,
        wait_for_inclusion: bool = True, wait_for_finalization: bool = True,
    ) -> ExtrinsicResult:  # fmt: skip
        """Send `call`, signed by `keypair`, for inclusion in a new block."""
        module, function, params = call
        out = await self.signed("submit", {"call": [module, function, dict(params)]}, keypair)
        error = out.get("error")
        return ExtrinsicResult(
            success=bool(out["success"]),
            message=str(out["message"]),
            block_hash=out.get("block_hash"),
            extrinsic_id=out.get("extrinsic_id"),
            fee=Balance.from_rao(0) if out["success"] else None,
            events=list(out.get("events") or []),
            error=ChainError(error["message"], error.get("name")) if error else None,
        )

    async def sign_extrinsic(self, call: Any, keypair: Any, *, nonce: int, period: int) -> Any:
        raise self._unmodelled("signing of raw extrinsics")

    async def prepare(self, call: Any, **_kwargs: Any) -> Any:
        raise self._unmodelled("out-of-process signing")

    async def submit_signature(self, unsigned: Any, signature: Any, **_kwargs: Any) -> Any:
        raise self._unmodelled("out-of-process signing")

    async def submit_signed(self, extrinsic: Any, keypair: Any, **_kwargs: Any) -> Any:
        raise self._unmodelled("pre-signed extrinsic submission")

    def multisig_account(self, signatories: list[str], threshold: int) -> Any:
        raise self._unmodelled("multisig accounts")

    async def submit_multisig(
        self, call: Any, keypair: Any, multisig_account: Any, **_kw: Any
    ) -> Any:
        raise self._unmodelled("multisig calls")

    @staticmethod
    def _unmodelled(what: str) -> ChainError:
        return ChainError(f"the in-memory chain does not model {what}")
