"""An in-memory subtensor behind the SDK's ``Substrate`` protocol.

``bittensor.Client(substrate=MemorySubstrate(...))`` runs the SDK's own code — the
``SetWeights`` intent (preflight, max-weight clipping, u16 quantisation, the timelocked
commit when commit-reveal is on), ``ServeAxon``, raw ``Commitments.set_commitment`` calls,
``subnets.metagraph`` and ``subnets.commitments`` — against a chain held in a few dicts.
It models what those paths read and write, with the pallets' checks and error names:

- storage: ``SubtensorModule`` Uids, LastUpdate, Weights, Axons, ValidatorPermit, the
  weight hyperparameters and the epoch schedule; ``Commitments`` CommitmentOf;
- the runtime API ``SubnetInfoRuntimeApi.get_metagraph``;
- extrinsics ``set_mechanism_weights``, ``commit_timelocked_mechanism_weights``,
  ``serve_axon`` and ``Commitments.set_commitment``; each is included in a new block, or,
  with ``timed_blocks`` (a served chain), in the head block: only the timer then produces
  blocks, so no writer can fast-forward the chain by sending extrinsics.

Reads return the head's state whatever block they are pinned to. A timelocked commit
cannot be opened here (that takes drand's signature for a future round), so it is revealed
at its epoch only from a plaintext deposited with :meth:`escrow_reveal`; without one it
expires at that epoch. Anything else raises ``bittensor.ChainError`` naming what is not
modelled. :meth:`fail_next` injects dropped connections, for retry tests.
"""

from __future__ import annotations

import threading
from typing import Any

from bittensor import Balance, ChainError, ExtrinsicResult, RpcConnectionError

from template.chain.memory import pallets, storage
from template.chain.memory.facts import FixedChainFacts, hash_of
from template.chain.memory.state import (
    RAO_PER_UNIT,
    ChainState,
    DispatchError,
    Neuron,
    Subnet,
    SubnetParams,
    TimelockedCommit,
    registered,
)


class MemorySubstrate(FixedChainFacts):
    """A one-node in-memory chain implementing ``bittensor.Substrate``; thread-safe."""

    def __init__(
        self, block_time: float = 12.0, start_block: int = 1, *, timed_blocks: bool = False
    ) -> None:
        self.token_symbols: dict[int, str] = {}
        self.block_time_s = block_time
        self.timed_blocks = timed_blocks
        self._in_block: dict[int, int] = {}  # block → extrinsics included in it
        self._state = ChainState(block=start_block)
        self._nonces: dict[str, int] = {}
        self._failures_left = 0
        self._lock = threading.RLock()

    # Arena and test controls -------------------------------------------------------

    def add_subnet(
        self,
        netuid: int,
        owner_hotkey: str = "",
        owner_coldkey: str = "",
        params: SubnetParams | None = None,
    ) -> None:
        """Create subnet `netuid`; its epoch schedule starts at the current block."""
        with self._lock:
            block = self._state.block
            self._state.subnets[netuid] = Subnet(
                netuid=netuid,
                params=params or SubnetParams(),
                owner_hotkey=owner_hotkey,
                owner_coldkey=owner_coldkey,
                registered_at=block,
                last_epoch_block=block,
            )

    def set_params(self, netuid: int, **changes: Any) -> SubnetParams:
        """Change hyperparameters of `netuid` (validated as SubnetParams); returns them."""
        with self._lock:
            net = self._subnet(netuid)
            net.params = SubnetParams.model_validate({**net.params.model_dump(), **changes})
            return net.params

    def register(
        self,
        netuid: int,
        hotkey: str,
        coldkey: str,
        stake: float = 0.0,
        validator_permit: bool = False,
    ) -> int:
        """Register `hotkey` on `netuid` holding `stake` alpha; returns its uid."""
        with self._lock:
            net = self._subnet(netuid)
            if net.neuron(hotkey) is not None:
                raise ChainError(
                    f"{hotkey} is already on netuid {netuid}", "HotKeyAlreadyRegisteredInSubNet"
                )
            if len(net.neurons) >= net.params.max_uids:
                raise ChainError(
                    f"netuid {netuid} has no free uid", "TooManyRegistrationsThisBlock"
                )
            uid = len(net.neurons)
            stake_rao = round(stake * RAO_PER_UNIT)
            net.neurons.append(
                Neuron(uid, hotkey, coldkey, stake_rao, validator_permit, self._state.block)
            )
            return uid

    def set_stake(self, netuid: int, hotkey: str, stake: float) -> None:
        """Set `hotkey`'s total stake on `netuid` (alpha)."""
        with self._lock:
            self._neuron(netuid, hotkey).stake_rao = round(stake * RAO_PER_UNIT)

    def set_validator_permit(self, netuid: int, hotkey: str, permit: bool) -> None:
        """Grant or withdraw `hotkey`'s validator permit on `netuid`."""
        with self._lock:
            self._neuron(netuid, hotkey).validator_permit = permit

    def advance(self, blocks: int = 1) -> int:
        """Produce `blocks` empty blocks (running due epochs and reveals); returns the head."""
        with self._lock:
            for _ in range(blocks):
                pallets.next_block(self._state)
            return self._state.block

    def escrow_reveal(self, netuid: int, hotkey: str, uids: list[int], values: list[int]) -> None:
        """Deposit the u16 plaintext of `hotkey`'s next timelocked commit, to reveal it."""
        with self._lock:
            queue = self._subnet(netuid).escrow.setdefault(hotkey, [])
            queue.append((list(uids), list(values)))

    def withdraw_escrow(self, netuid: int, hotkey: str) -> None:
        """Take back the most recent plaintext deposited for `hotkey` (its commit failed)."""
        with self._lock:
            queue = self._subnet(netuid).escrow.get(hotkey)
            if queue:
                queue.pop()

    def params(self, netuid: int) -> SubnetParams:
        """The hyperparameters of `netuid`."""
        with self._lock:
            return self._subnet(netuid).params.model_copy()

    def netuids(self) -> list[int]:
        """The subnets on the chain."""
        with self._lock:
            return sorted(self._state.subnets)

    def registrations_of(self, netuid: int, coldkey: str) -> int:
        """How many hotkeys `coldkey` holds on `netuid`."""
        with self._lock:
            return sum(n.coldkey == coldkey for n in self._subnet(netuid).neurons)

    def pending_reveals(self, netuid: int, hotkey: str) -> int:
        """How many plaintexts `hotkey` has deposited and no commit has taken yet."""
        with self._lock:
            return len(self._subnet(netuid).escrow.get(hotkey) or [])

    def uid_of(self, netuid: int, hotkey: str) -> int | None:
        """`hotkey`'s uid on `netuid`, or None."""
        with self._lock:
            neuron = self._subnet(netuid).neuron(hotkey)
            return neuron.uid if neuron else None

    def fail_next(self, calls: int) -> None:
        """Make the next `calls` substrate calls fail as a dropped connection does."""
        with self._lock:
            self._failures_left = calls

    def stored_weights(self, netuid: int) -> dict[int, dict[int, int]]:
        """The weights on chain: setter uid → {target uid: u16}."""
        with self._lock:
            return {uid: dict(row) for uid, row in self._subnet(netuid).weights.items()}

    def pending_commits(self, netuid: int) -> list[TimelockedCommit]:
        """The timelocked commits not revealed yet."""
        with self._lock:
            return list(self._subnet(netuid).commits)

    # The dev chain's async surface (the same on a served chain: memory/client.py) ------

    async def subnet_params(self, netuid: int) -> SubnetParams:
        """:meth:`params`, as the served chain answers it."""
        return self.params(netuid)

    async def subnet_uid(self, netuid: int, hotkey: str) -> int | None:
        """:meth:`uid_of`, as the served chain answers it."""
        return self.uid_of(netuid, hotkey)

    async def deposit_reveal(
        self, netuid: int, hotkey: str, uids: list[int], values: list[int]
    ) -> None:
        """:meth:`escrow_reveal`, as the served chain takes it (signed by `hotkey`)."""
        self.escrow_reveal(netuid, hotkey, uids, values)

    async def withdraw_reveal(self, netuid: int, hotkey: str) -> None:
        """:meth:`withdraw_escrow`, as the served chain takes it (signed by `hotkey`)."""
        self.withdraw_escrow(netuid, hotkey)

    def _subnet(self, netuid: int) -> Subnet:
        try:
            return self._state.subnet(netuid)
        except DispatchError as e:
            raise ChainError(str(e), e.name) from None

    def _neuron(self, netuid: int, hotkey: str) -> Neuron:
        try:
            return registered(self._subnet(netuid), hotkey)
        except DispatchError as e:
            raise ChainError(str(e), e.name) from None

    def _enter(self) -> None:
        """Fail here when a dropped connection was injected."""
        with self._lock:
            if self._failures_left > 0:
                self._failures_left -= 1
                raise RpcConnectionError("connection reset by peer (injected)")

    # Substrate: display and lifecycle -------------------------------------------------

    async def connect(self) -> None:
        self._enter()

    async def close(self) -> None:
        return None

    # Substrate: reads ---------------------------------------------------------------

    async def block_hash(self, block: int | None = None) -> str:
        self._enter()
        with self._lock:
            head = self._state.block
        if block is not None and not 0 <= block <= head:
            raise ChainError(f"block {block} is past the head {head}")
        return hash_of(head if block is None else block)

    async def block_number(self) -> int:
        self._enter()
        with self._lock:
            return self._state.block

    async def query(
        self,
        module: str,
        storage_function: str,
        params: list | None = None,
        block_hash: str | None = None,
    ) -> Any:
        self._enter()
        read = storage.QUERIES.get((module, storage_function))
        if read is None:
            raise self._unmodelled("storage", module, storage_function)
        with self._lock:
            return read(self._state, list(params or []))

    async def map_has_entries(
        self, module: str, storage_function: str, params: list, block_hash: str | None = None
    ) -> bool:
        return bool(await self.query_map(module, storage_function, params, block_hash))

    async def query_map(
        self,
        module: str,
        storage_function: str,
        params: list | None = None,
        block_hash: str | None = None,
    ) -> list[tuple[Any, Any]]:
        self._enter()
        read = storage.QUERY_MAPS.get((module, storage_function))
        if read is None:
            raise self._unmodelled("storage map", module, storage_function)
        with self._lock:
            return read(self._state, list(params or []))

    async def query_batch(
        self,
        module: str,
        storage_function: str,
        param_sets: list[list],
        block_hash: str | None = None,
    ) -> list[Any]:
        return [await self.query(module, storage_function, p, block_hash) for p in param_sets]

    async def runtime_call(
        self, api: str, method: str, params: list, block_hash: str | None = None
    ) -> Any:
        self._enter()
        call = storage.RUNTIME_CALLS.get((api, method))
        if call is None:
            raise self._unmodelled("runtime API", api, method)
        with self._lock:
            return call(self._state, list(params))

    async def constant(self, module: str, name: str) -> Any:
        raise self._unmodelled("constant", module, name)

    async def decode_scale(self, type_string: str, data: Any) -> Any:
        raise self._unmodelled("decoding of", "SCALE", type_string)

    async def events(self, block_hash: str | None = None) -> list[dict]:
        with self._lock:
            found = [n for n in self._state.events if hash_of(n) == block_hash]
            number = found[0] if found else self._state.block
            return list(self._state.events.get(number, []))

    # Substrate: calls, fees and writes -------------------------------------------------

    async def compose(self, call: Any) -> Any:
        module, function, params = call
        try:
            pallets.validate_call(module, function, params)
        except (ValueError, KeyError, TypeError) as e:
            raise ChainError(f"cannot encode {module}.{function}: {e}") from None
        return call

    async def account_next_index(self, address: str) -> int:
        with self._lock:
            return self._nonces.get(address, 0)

    async def submit(
        self,
        call: Any,
        keypair: Any,
        *,
        nonce: int | None = None,
        period: int | None = None,
        wait_for_inclusion: bool = True,
        wait_for_finalization: bool = True,
    ) -> ExtrinsicResult:
        """Include `call`, signed by `keypair`, in a new block; the typed outcome."""
        self._enter()
        module, function, params = call
        handler = pallets.HANDLERS.get((module, function))
        if handler is None:
            raise self._unmodelled("call", module, function)
        origin = keypair.ss58_address
        with self._lock:
            if not self.timed_blocks:
                pallets.next_block(self._state)
            block = self._state.block
            index = self._in_block[block] = self._in_block.get(block, 0) + 1
            if len(self._in_block) > 64:
                self._in_block = {block: index}
            self._nonces[origin] = self._nonces.get(origin, 0) + 1
            before = len(self._state.events.get(block, []))
            try:
                handler(self._state, origin, dict(params))
            except DispatchError as e:
                return ExtrinsicResult(
                    success=False,
                    message=str(e),
                    block_hash=hash_of(block),
                    extrinsic_id=f"{block}-{index:04d}",
                    error=ChainError(str(e), e.name),
                )
            events = list(self._state.events.get(block, [])[before:])
        return ExtrinsicResult(
            success=True,
            message="Success",
            block_hash=hash_of(block),
            extrinsic_id=f"{block}-{index:04d}",
            fee=Balance.from_rao(0),
            events=events,
        )

    async def sign_extrinsic(self, call: Any, keypair: Any, *, nonce: int, period: int) -> Any:
        raise self._unmodelled("signing of", "raw", "extrinsics")

    async def prepare(self, call: Any, **_kwargs: Any) -> Any:
        raise self._unmodelled("out-of-process signing", "prepare", "call")

    async def submit_signature(self, unsigned: Any, signature: Any, **_kwargs: Any) -> Any:
        raise self._unmodelled("out-of-process signing", "submit", "signature")

    async def submit_signed(self, extrinsic: Any, keypair: Any, **_kwargs: Any) -> Any:
        raise self._unmodelled("pre-signed", "extrinsic", "submission")

    def multisig_account(self, signatories: list[str], threshold: int) -> Any:
        raise self._unmodelled("multisig", "account", "derivation")

    async def submit_multisig(
        self, call: Any, keypair: Any, multisig_account: Any, **_kw: Any
    ) -> Any:
        raise self._unmodelled("multisig", "call", "submission")

    @staticmethod
    def _unmodelled(kind: str, module: str, name: str) -> ChainError:
        return ChainError(f"the in-memory chain does not model {kind} {module}.{name}")
