"""The extrinsics the in-memory chain executes, with the pallets' checks and error names.

Each handler takes the chain state, the signing address and the call's parameters, and
either changes the state (emitting its event) or raises :class:`DispatchError`. Blocks and
epochs advance through :func:`next_block`, which also reveals due timelocked commits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from template.chain.memory.state import (
    RAO_PER_UNIT,
    U16_MAX,
    ChainState,
    DispatchError,
    Neuron,
    Subnet,
    TimelockedCommit,
    max_upscale,
    registered,
)

MAX_RAW_BYTES = 128
Handler = Callable[[ChainState, str, dict[str, Any]], None]


def next_block(state: ChainState) -> None:
    """Produce one block: run each subnet's epoch when due, revealing due commits."""
    state.block += 1
    for net in state.subnets.values():
        if state.block - net.last_epoch_block >= net.params.tempo:
            net.last_epoch_block = state.block
            net.epoch_index += 1
            net.space_used.clear()
            _reveal_due(state, net)


def _reveal_due(state: ChainState, net: Subnet) -> None:
    due = [c for c in net.commits if c.reveal_epoch <= net.epoch_index]
    net.commits = [c for c in net.commits if c.reveal_epoch > net.epoch_index]
    for commit in due:
        attrs = {"netuid": net.netuid, "uid": commit.uid}
        if commit.plaintext is None or net.neuron(commit.hotkey) is None:
            # Opening the ciphertext needs drand's signature for the round; without a
            # deposited plaintext the commit expires, as an unrevealable one does on chain.
            state.emit("SubtensorModule", "TimelockedWeightsRevealFailed", attrs)
            continue
        net.weights[commit.uid] = max_upscale(*commit.plaintext)
        state.emit("SubtensorModule", "TimelockedWeightsRevealed", attrs)


def _check_mechanism(params: dict[str, Any]) -> None:
    if int(params.get("mecid", 0)) != 0:
        raise DispatchError("MechanismDoesNotExist", "only mechanism 0 is modelled")


def _check_rate(state: ChainState, net: Subnet, neuron: Neuron, error: str) -> None:
    limit = net.params.weights_rate_limit
    since = state.block - neuron.last_update
    if limit and neuron.last_update > 0 and since < limit:
        raise DispatchError(
            error, f"uid {neuron.uid} set weights {since} blocks ago; limit {limit}"
        )


def _check_setter(
    state: ChainState, net: Subnet, neuron: Neuron, dests: list[int], version_key: int
) -> None:
    """The checks on who sets weights: version, stake, permit, rate limit."""
    if version_key < net.params.weights_version_key:
        raise DispatchError(
            "IncorrectWeightVersionKey",
            f"version_key {version_key} < required {net.params.weights_version_key}",
        )
    if neuron.stake_rao < round(net.params.min_stake_to_set_weights * RAO_PER_UNIT):
        raise DispatchError("NotEnoughStakeToSetWeights", f"uid {neuron.uid} stakes too little")
    if dests != [neuron.uid] and not neuron.validator_permit:
        raise DispatchError("NeuronNoValidatorPermit", f"uid {neuron.uid} holds no permit")
    _check_rate(state, net, neuron, "SettingWeightsTooFast")


def _check_weights(net: Subnet, neuron: Neuron, dests: list[int], values: list[int]) -> None:
    """The checks on the weights themselves, in the pallet's order."""
    if len(dests) != len(values):
        raise DispatchError("WeightVecNotEqualSize", f"{len(dests)} uids, {len(values)} weights")
    if len(set(dests)) != len(dests):
        raise DispatchError("DuplicateUids", "a uid appears twice")
    if any(d < 0 or d >= len(net.neurons) for d in dests):
        raise DispatchError("UidVecContainInvalidOne", "a uid is not on the subnet")
    if any(v < 0 or v > U16_MAX for v in values):
        raise DispatchError("InvalidWeightValue", "weights are u16")
    self_weight = dests == [neuron.uid]
    if not self_weight and len(dests) < min(net.params.min_allowed_weights, len(net.neurons)):
        raise DispatchError("WeightVecLengthIsLow", f"only {len(dests)} weights")
    limit, total = net.params.max_weights_limit, sum(values)
    # The pallet normalises to a u16 sum with integer division before comparing.
    if not self_weight and limit < U16_MAX and total and max(values) * U16_MAX // total > limit:
        raise DispatchError("MaxWeightExceeded", f"a weight is over {limit}/{U16_MAX}")


def set_mechanism_weights(state: ChainState, origin: str, p: dict[str, Any]) -> None:
    """``SubtensorModule.set_mechanism_weights``: store the caller's row of weights."""
    net = state.subnet(p["netuid"])
    _check_mechanism(p)
    if net.params.commit_reveal:
        raise DispatchError("CommitRevealEnabled", "this subnet takes timelocked commits")
    neuron = registered(net, origin)
    dests = [int(d) for d in p["dests"]]
    values = [int(v) for v in p["weights"]]
    _check_setter(state, net, neuron, dests, int(p.get("version_key", 0)))
    _check_weights(net, neuron, dests, values)
    net.weights[neuron.uid] = max_upscale(dests, values)
    neuron.last_update = state.block
    state.emit("SubtensorModule", "WeightsSet", {"netuid": net.netuid, "uid": neuron.uid})


def commit_timelocked_mechanism_weights(state: ChainState, origin: str, p: dict[str, Any]) -> None:
    """``SubtensorModule.commit_timelocked_mechanism_weights``: queue a sealed commit."""
    net = state.subnet(p["netuid"])
    _check_mechanism(p)
    if not net.params.commit_reveal:
        raise DispatchError("CommitRevealDisabled", "this subnet takes plain weights")
    neuron = registered(net, origin)
    version = int(p["commit_reveal_version"])
    if version != net.params.commit_reveal_version:
        raise DispatchError("IncorrectCommitRevealVersion", f"version {version} is not accepted")
    _check_rate(state, net, neuron, "CommittingWeightsTooFast")
    raw = p["commit"]
    commit = bytes.fromhex(raw.removeprefix("0x")) if isinstance(raw, str) else bytes(raw)
    queued = net.escrow.get(origin) or []
    net.commits.append(
        TimelockedCommit(
            hotkey=origin,
            uid=neuron.uid,
            commit=commit,
            reveal_round=int(p["reveal_round"]),
            block=state.block,
            reveal_epoch=net.epoch_index + net.params.reveal_period_epochs,
            plaintext=queued.pop(0) if queued else None,
        )
    )
    neuron.last_update = state.block
    attrs = {"netuid": net.netuid, "uid": neuron.uid, "reveal_round": int(p["reveal_round"])}
    state.emit("SubtensorModule", "TimelockedWeightsCommitted", attrs)


def serve_axon(state: ChainState, origin: str, p: dict[str, Any]) -> None:
    """``SubtensorModule.serve_axon``: publish the caller's ip:port."""
    net = state.subnet(p["netuid"])
    neuron = registered(net, origin, "HotKeyNotRegisteredInNetwork")
    ip, ip_type = int(p["ip"]), int(p["ip_type"])
    if ip_type not in (4, 6):
        raise DispatchError("InvalidIpType", f"ip_type {ip_type} is neither 4 nor 6")
    # ip 0 is the placeholder that ResetAxon publishes to stop advertising an endpoint.
    if not 0 <= ip < (2**32 if ip_type == 4 else 2**128):
        raise DispatchError("InvalidIpAddress", f"{ip} is not an IPv{ip_type} address")
    served = neuron.axon["block"] if neuron.axon else None
    limit = net.params.serving_rate_limit
    if served is not None and limit and state.block - served < limit:
        raise DispatchError("ServingRateLimitExceeded", f"served {state.block - served} blocks ago")
    neuron.axon = {
        "block": state.block,
        "version": int(p["version"]),
        "ip": ip,
        "port": int(p["port"]),
        "ip_type": ip_type,
        "protocol": int(p["protocol"]),
        "placeholder1": 0,
        "placeholder2": 0,
    }
    state.emit("SubtensorModule", "AxonServed", {"netuid": net.netuid, "hotkey": origin})


def commitment_fields(info: Any) -> list[dict[str, str]]:
    """The fields of a ``CommitmentInfo`` as stored (``{"RawN": "0x…"}`` each).

    Accepts fields listed flat or each wrapped in a one-item list; ValueError on a
    malformed field (which the real chain refuses when encoding the call).
    """
    if not isinstance(info, dict) or not isinstance(info.get("fields"), list | tuple):
        raise ValueError("CommitmentInfo must be {'fields': [...]}")
    out: list[dict[str, str]] = []
    for entry in info["fields"]:
        items = entry if isinstance(entry, list | tuple) else [entry]
        for item in items:
            if not isinstance(item, dict) or len(item) != 1:
                raise ValueError(f"a commitment field must be one {{variant: data}}: {item!r}")
            ((variant, data),) = item.items()
            raw = data.encode() if isinstance(data, str) and not data.startswith("0x") else data
            payload = bytes.fromhex(raw[2:]) if isinstance(raw, str) else bytes(raw)
            if variant != f"Raw{len(payload)}" or len(payload) > MAX_RAW_BYTES:
                raise ValueError(f"field {variant} holds {len(payload)} bytes")
            out.append({variant: "0x" + payload.hex()})
    return out


def set_commitment(state: ChainState, origin: str, p: dict[str, Any]) -> None:
    """``Commitments.set_commitment``: store the caller's commitment for the subnet."""
    net = state.subnet(p["netuid"])
    registered(net, origin, "AccountNotAllowedCommit")
    fields = commitment_fields(p["info"])
    if len(fields) > net.params.commitment_max_fields:
        raise DispatchError("TooManyFieldsInCommitmentInfo", f"{len(fields)} fields")
    size = sum((len(next(iter(f.values()))) - 2) // 2 for f in fields)
    used = net.space_used.get(origin, 0) + max(100, size)
    if used > net.params.commitment_space:
        raise DispatchError("SpaceLimitExceeded", f"{used} bytes this epoch")
    net.space_used[origin] = used
    net.commitments[origin] = {"deposit": 0, "block": state.block, "info": {"fields": fields}}
    state.emit("Commitments", "Commitment", {"netuid": net.netuid, "who": origin})


HANDLERS: dict[tuple[str, str], Handler] = {
    ("SubtensorModule", "set_mechanism_weights"): set_mechanism_weights,
    ("SubtensorModule", "commit_timelocked_mechanism_weights"): commit_timelocked_mechanism_weights,
    ("SubtensorModule", "serve_axon"): serve_axon,
    ("Commitments", "set_commitment"): set_commitment,
}


def validate_call(module: str, function: str, params: dict[str, Any]) -> None:
    """ValueError when a call could not be encoded for the chain (unknown or malformed)."""
    if (module, function) not in HANDLERS:
        raise ValueError(f"the in-memory chain does not model {module}.{function}")
    if (module, function) == ("Commitments", "set_commitment"):
        commitment_fields(params.get("info"))
