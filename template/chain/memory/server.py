"""The in-memory chain as a process: one :class:`MemorySubstrate` behind a loopback HTTP API.

``shopbench chain serve`` runs it, so that ``neurons/validator.py`` and
``neurons/miner.py`` can run as separate processes on one subnet with no subtensor node:
each reaches it with ``--subtensor.network memory://HOST:PORT`` and drives it through the
SDK's own intents, exactly as the arena's in-process chain is driven.

Reads are open. Every write is a :class:`~template.chain.memory.wire.SignedWrite`,
checked here before anything runs: the signature of the signer's key over the write, and
a nonce above the signer's last, so a process can write only as a key it holds and no
write can be replayed. ``register`` is signed by the coldkey that owns the hotkey it names;
on this development chain it grants the stake and validator permit it asks for.
A block is produced every ``block_time_s`` seconds, and only then: extrinsics go into the
head block, so a writer cannot fast-forward the chain.

Anyone who reaches the port can write as keys of their own making, so no one writer may
capture the chain (:class:`WriteLimits`): a coldkey registers at most
``registrations_per_coldkey`` hotkeys per subnet and pays ``registration_cost`` of a fixed
``coldkey_allowance`` for each, besides the stake it asks for (a finite, non-negative
number); a reveal plaintext is deposited only by a registered hotkey, at most
``reveals_per_hotkey`` waiting at once, of at most ``max_uids`` weights; and a body is
refused by its ``Content-Length`` before it is read (and cut off past the limit when the
header lies or is missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

from bittensor import ChainError
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from template.chain.memory.state import SubnetParams
from template.chain.memory.substrate import MemorySubstrate
from template.chain.memory.wire import (
    CHAIN_DOMAIN,
    MAX_BODY_BYTES,
    READS,
    ReadCall,
    SignedWrite,
    WireError,
    decode,
    encode,
    write_payload,
)
from template.signing import HotkeyVerifier, is_ss58, keypair_from_name

log = logging.getLogger("template.chain.memory.server")


class WriteLimits(BaseModel):
    """What one writer may do to a served development chain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    registrations_per_coldkey: int = Field(
        default=8, ge=1, description="hotkeys one coldkey may register on a subnet"
    )
    registration_cost: float = Field(
        default=1.0, ge=0, description="alpha a registration takes from the coldkey's allowance"
    )
    coldkey_allowance: float = Field(
        default=100_000.0, gt=0,
        description="alpha each coldkey starts with: registration costs and the stake asked "
        "for come out of it",
    )  # fmt: skip
    reveals_per_hotkey: int = Field(
        default=4, ge=1, description="reveal plaintexts one hotkey may have waiting at once"
    )


class MemoryChainConfig(BaseModel):
    """One development chain: where it listens, its subnet and the subnet's hyperparameters."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(default="127.0.0.1", description="address to bind (keep it loopback)")
    port: int = Field(default=9945, ge=0, lt=65536, description="port (0: a free one)")
    netuid: int = Field(default=2, ge=1, lt=65536, description="the subnet created at start")
    block_time_s: float = Field(default=2.0, gt=0, le=60, description="seconds per block")
    params: SubnetParams = Field(
        default_factory=lambda: SubnetParams(tempo=30, weights_rate_limit=5, serving_rate_limit=0),
        description="the subnet's hyperparameters",
    )
    limits: WriteLimits = Field(default_factory=WriteLimits, description="what one writer may do")


class _Origin:
    """What :meth:`MemorySubstrate.submit` reads of a keypair: the checked signer."""

    def __init__(self, ss58_address: str) -> None:
        self.ss58_address = ss58_address


def _refuse(status: int, message: str, kind: str, name: str | None = None) -> JSONResponse:
    body = WireError(message=message, name=name, kind=kind)  # type: ignore[arg-type]
    return JSONResponse({"error": body.model_dump()}, status_code=status)


def _result(value: Any) -> JSONResponse:
    return JSONResponse({"result": encode(value)})


class MemoryChainService:
    """The state of a served chain: the substrate, and each signer's last nonce."""

    def __init__(self, substrate: MemorySubstrate, limits: WriteLimits | None = None) -> None:
        self.substrate = substrate
        self.limits = limits or WriteLimits()
        self.verifier = HotkeyVerifier(domain=CHAIN_DOMAIN)
        self._last_nonce: dict[str, int] = {}
        self._spent: dict[str, float] = {}  # coldkey → alpha its registrations took
        self._lock = asyncio.Lock()

    async def read(self, call: ReadCall) -> Any:
        """Run one open read; KeyError for a method that is not one."""
        if call.method not in READS:
            raise KeyError(call.method)
        args, kwargs = decode(call.args), decode(call.kwargs)
        s = self.substrate
        dev: dict[str, Callable[..., Any]] = {
            "subnet_params": lambda n: s.params(int(n)).model_dump(),
            "subnet_uid": lambda n, hk: s.uid_of(int(n), str(hk)),
            "stored_weights": lambda n: {
                str(k): {str(t): v for t, v in row.items()}
                for k, row in s.stored_weights(int(n)).items()
            },
            # the plaintext deposited for a reveal stays sealed until the chain reveals it
            "pending_commits": lambda n: [
                {k: v for k, v in dataclasses.asdict(c).items() if k != "plaintext"}
                for c in s.pending_commits(int(n))
            ],
            "subnet_netuids": lambda: s.netuids(),
        }
        if call.method in dev:
            return dev[call.method](*args, **kwargs)
        return await getattr(s, call.method)(*args, **kwargs)

    def authentic(self, write: SignedWrite) -> bool:
        """The signature covers this write and the signer's key made it."""
        payload = write_payload(write.op, write.body, write.signer, write.nonce)
        return self.verifier.verify(payload, write.signature, write.signer)

    async def write(self, write: SignedWrite) -> Any:
        """Run one authentic write whose nonce is fresh; ValueError for a stale nonce."""
        async with self._lock:
            last = self._last_nonce.get(write.signer, -1)
            if write.nonce <= last:
                raise ValueError(f"nonce {write.nonce} is not above {last}: a replayed write")
            self._last_nonce[write.signer] = write.nonce
        body = decode(write.body)
        s = self.substrate
        if write.op == "submit":
            module, function, params = body["call"]
            call = (str(module), str(function), dict(params))
            result = await s.submit(call, _Origin(write.signer))
            error = result.error
            return {
                "success": result.success,
                "message": result.message,
                "block_hash": result.block_hash,
                "extrinsic_id": result.extrinsic_id,
                "events": result.events,
                "error": {"message": error.message, "name": error.name} if error else None,
            }
        if write.op == "deposit_reveal":
            netuid = int(body["netuid"])
            uids = [int(u) for u in body["uids"]]
            values = [int(v) for v in body["values"]]
            self._check_deposit(netuid, write.signer, uids, values)
            s.escrow_reveal(netuid, write.signer, uids, values)
            return None
        if write.op == "withdraw_reveal":
            s.withdraw_escrow(int(body["netuid"]), write.signer)
            return None
        # register: the signer is the coldkey that owns the hotkey named
        netuid, hotkey = int(body["netuid"]), str(body["hotkey"])
        if not is_ss58(hotkey):
            raise ValueError(f"{hotkey[:64]!r} is not an ss58 address")
        stake = float(body.get("stake", 0.0))
        if not math.isfinite(stake) or stake < 0:
            raise ValueError(f"stake {stake!r} is not a finite, non-negative amount")
        async with self._lock:
            cost = self._registration_cost(netuid, write.signer, stake)
            uid = s.register(
                netuid, hotkey, write.signer, stake=stake,
                validator_permit=bool(body.get("validator_permit", False)),
            )  # fmt: skip
            self._spent[write.signer] = self._spent.get(write.signer, 0.0) + cost
        return uid

    def _registration_cost(self, netuid: int, coldkey: str, stake: float) -> float:
        """What registering one more hotkey of `coldkey` with `stake` costs it; ChainError
        when it may not (its limit of hotkeys, or its allowance, is spent)."""
        limits = self.limits
        held = self.substrate.registrations_of(netuid, coldkey)
        if held >= limits.registrations_per_coldkey:
            raise ChainError(
                f"coldkey {coldkey} holds {held} hotkeys on netuid {netuid}, the most one "
                "coldkey may register on this development chain",
                "TooManyRegistrationsThisInterval",
            )
        cost = limits.registration_cost + stake
        left = limits.coldkey_allowance - self._spent.get(coldkey, 0.0)
        if cost > left:
            raise ChainError(
                f"registering with stake {stake:g} costs {cost:g} alpha; coldkey {coldkey} has "
                f"{left:g} left of its {limits.coldkey_allowance:g}",
                "NotEnoughBalanceToStake",
            )
        return cost

    def _check_deposit(self, netuid: int, hotkey: str, uids: list[int], values: list[int]) -> None:
        """ChainError unless `hotkey` is registered on `netuid`, has room for one more
        plaintext waiting, and the weights are no more than the subnet's uids."""
        s = self.substrate
        if s.uid_of(netuid, hotkey) is None:
            raise ChainError(
                f"{hotkey} is not registered on netuid {netuid}: only a registered hotkey "
                "deposits reveals", "HotKeyNotRegisteredInSubNet",
            )  # fmt: skip
        waiting = s.pending_reveals(netuid, hotkey)
        if waiting >= self.limits.reveals_per_hotkey:
            raise ChainError(
                f"{hotkey} has {waiting} reveals waiting, the most at once",
                "TooManyUnrevealedCommits",
            )
        most = s.params(netuid).max_uids
        if len(uids) != len(values) or len(uids) > most:
            raise ValueError(f"{len(uids)} uids and {len(values)} weights (at most {most})")


async def _json_body(request: Request) -> bytes:
    """The body, refused by its declared length before any of it is read, and cut off
    past the limit whatever the header said."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise ValueError(f"the body is over {MAX_BODY_BYTES} bytes (it says {declared[:32]})")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ValueError(f"the body is over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def memory_chain_app(service: MemoryChainService) -> FastAPI:
    """The HTTP API of a served chain: ``POST /read``, ``POST /write``, ``GET /health``."""
    app = FastAPI(title="shopbench memory chain", docs_url=None, redoc_url=None)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"block": await service.substrate.block_number()}

    @app.post("/read")
    async def read(request: Request) -> JSONResponse:
        try:
            call = ReadCall.model_validate_json(await _json_body(request))
        except (ValidationError, ValueError) as e:
            return _refuse(400, f"not a read: {e}", "request")
        try:
            return _result(await service.read(call))
        except KeyError:
            return _refuse(400, f"{call.method!r} is not a read", "request")
        except ChainError as e:
            return _refuse(200, e.message, "chain", e.name)
        except (TypeError, ValueError, IndexError) as e:
            return _refuse(400, f"{call.method}: {e}", "request")

    @app.post("/write")
    async def write(request: Request) -> JSONResponse:
        try:
            signed = SignedWrite.model_validate_json(await _json_body(request))
        except (ValidationError, ValueError) as e:
            return _refuse(400, f"not a signed write: {e}", "request")
        if not service.authentic(signed):
            return _refuse(401, f"the signature is not {signed.signer}'s", "auth")
        try:
            return _result(await service.write(signed))
        except ChainError as e:
            return _refuse(200, e.message, "chain", e.name)
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as e:
            return _refuse(400, f"{signed.op}: {e}", "request")

    return app


async def produce_blocks(substrate: MemorySubstrate, block_time_s: float) -> None:
    """Produce a block every `block_time_s` seconds, until cancelled."""
    while True:
        await asyncio.sleep(block_time_s)
        substrate.advance(1)


def new_chain(config: MemoryChainConfig) -> MemorySubstrate:
    """A fresh chain holding subnet ``config.netuid``."""
    owner = keypair_from_name("memory-chain", "owner").ss58_address
    substrate = MemorySubstrate(block_time=config.block_time_s, timed_blocks=True)
    substrate.add_subnet(config.netuid, owner, owner, config.params)
    return substrate


@contextlib.asynccontextmanager
async def ticking(substrate: MemorySubstrate, block_time_s: float) -> AsyncIterator[None]:
    """Blocks are produced while inside."""
    task = asyncio.create_task(produce_blocks(substrate, block_time_s))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def serve_memory_chain(config: MemoryChainConfig, announce: Any = print) -> None:
    """Serve a new chain until cancelled (SIGINT/SIGTERM stop uvicorn)."""
    import uvicorn

    from template.serve import bind

    substrate = new_chain(config)
    sock = bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    app = memory_chain_app(MemoryChainService(substrate, config.limits))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    announce(
        f"memory chain: --subtensor.network memory://{host}:{port} (netuid {config.netuid}, "
        f"a block every {config.block_time_s:g} s, tempo {config.params.tempo}, commit-reveal "
        f"{'on' if config.params.commit_reveal else 'off'})"
    )
    async with ticking(substrate, config.block_time_s):
        await server.serve(sockets=[sock])
