"""The state of the in-memory chain: subnets, neurons, weights, commits, commitments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

U16_MAX = 65535
RAO_PER_UNIT = 10**9
MECHANISM_STRIDE = 4096  # storage index of a mechanism = mechid * 4096 + netuid


class SubnetParams(BaseModel):
    """A subnet's hyperparameters as the in-memory chain enforces them."""

    model_config = ConfigDict(extra="forbid")

    tempo: int = Field(default=360, ge=1, description="blocks per epoch")
    commit_reveal: bool = Field(default=False, description="weights go through timelocked commits")
    reveal_period_epochs: int = Field(default=1, ge=1, description="epochs until a commit opens")
    commit_reveal_version: int = Field(default=4, description="accepted commit protocol version")
    weights_rate_limit: int = Field(default=100, ge=0, description="blocks between weight sets")
    weights_version_key: int = Field(default=0, ge=0, description="least accepted version_key")
    min_allowed_weights: int = Field(default=1, ge=0, description="least nonzero weights")
    max_weights_limit: int = Field(
        default=U16_MAX, ge=0, le=U16_MAX, description="largest weight share, as a u16 fraction"
    )
    min_stake_to_set_weights: float = Field(default=0.0, ge=0, description="stake (alpha)")
    serving_rate_limit: int = Field(default=50, ge=0, description="blocks between serve_axon")
    commitment_max_fields: int = Field(default=3, ge=1, description="fields per commitment")
    commitment_space: int = Field(
        default=3100, ge=100, description="commitment bytes per hotkey per epoch"
    )
    max_uids: int = Field(default=256, ge=1, description="uids the subnet holds")


@dataclass
class Neuron:
    """One registered uid."""

    uid: int
    hotkey: str
    coldkey: str
    stake_rao: int
    validator_permit: bool
    registered_at: int
    last_update: int = 0
    axon: dict[str, int] | None = None


@dataclass
class TimelockedCommit:
    """A timelocked weight commit waiting for its reveal epoch."""

    hotkey: str
    uid: int
    commit: bytes
    reveal_round: int
    block: int
    reveal_epoch: int
    plaintext: tuple[list[int], list[int]] | None = None


@dataclass
class Subnet:
    """One subnet: hyperparameters, epoch schedule, neurons and what they wrote."""

    netuid: int
    params: SubnetParams
    owner_hotkey: str
    owner_coldkey: str
    registered_at: int
    last_epoch_block: int
    epoch_index: int = 0
    neurons: list[Neuron] = field(default_factory=list)
    weights: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    commits: list[TimelockedCommit] = field(default_factory=list)
    commitments: dict[str, dict[str, Any]] = field(default_factory=dict)
    space_used: dict[str, int] = field(default_factory=dict)
    escrow: dict[str, list[tuple[list[int], list[int]]]] = field(default_factory=dict)

    def neuron(self, hotkey: str) -> Neuron | None:
        """The neuron registered under `hotkey`, or None."""
        return next((n for n in self.neurons if n.hotkey == hotkey), None)


class DispatchError(Exception):
    """An extrinsic failed on chain; `name` is the pallet's error name."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass
class ChainState:
    """The whole chain: head block, subnets and the events of each block."""

    block: int
    subnets: dict[int, Subnet] = field(default_factory=dict)
    events: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def subnet(self, netuid: Any) -> Subnet:
        """Subnet `netuid`; DispatchError SubnetNotExists when there is none."""
        net = self.subnets.get(int(netuid))
        if net is None:
            raise DispatchError("SubnetNotExists", f"netuid {netuid} does not exist")
        return net

    def emit(self, module: str, event: str, attributes: Any) -> dict[str, Any]:
        """Record an event in the head block; returns the record."""
        record = {"event": {"module_id": module, "event_id": event, "attributes": attributes}}
        self.events.setdefault(self.block, []).append(record)
        return record


def registered(net: Subnet, hotkey: str, error: str = "HotKeyNotRegisteredInSubNet") -> Neuron:
    """The neuron of `hotkey`, or DispatchError `error` when it holds no uid on `net`."""
    neuron = net.neuron(hotkey)
    if neuron is None:
        raise DispatchError(error, f"hotkey {hotkey} is not registered on netuid {net.netuid}")
    return neuron


def max_upscale(dests: list[int], values: list[int]) -> list[tuple[int, int]]:
    """(dest, value) pairs scaled so the largest is u16::MAX, as the pallet stores them."""
    top = max(values, default=0)
    if top == 0:
        return [(int(d), 0) for d in dests]
    return [(int(d), int(v) * U16_MAX // top) for d, v in zip(dests, values, strict=True)]
