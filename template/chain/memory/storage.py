"""What the in-memory chain answers to storage reads and runtime-API calls.

Values have the plain decoded shapes the SDK's RPC backend returns (ints, bools, lists,
ss58 strings, dicts), so the SDK's own reads and intents decode them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from template.chain.memory.state import MECHANISM_STRIDE, ChainState, Subnet

Read = Callable[[ChainState, list[Any]], Any]
MapRead = Callable[[ChainState, list[Any]], list[tuple[Any, Any]]]


def _net(state: ChainState, netuid: Any) -> Subnet | None:
    return state.subnets.get(int(netuid))


def _param(name: str) -> Read:
    """A per-subnet hyperparameter read ``[netuid] -> value`` (None for no subnet)."""

    def read(state: ChainState, params: list[Any]) -> Any:
        net = _net(state, params[0])
        return getattr(net.params, name) if net else None

    return read


def _schedule(name: str) -> Read:
    def read(state: ChainState, params: list[Any]) -> Any:
        net = _net(state, params[0])
        if net is None:
            return None
        values = {
            "LastEpochBlock": net.last_epoch_block,
            "SubnetEpochIndex": net.epoch_index,
            "BlocksSinceLastStep": state.block - net.last_epoch_block,
            "PendingEpochAt": 0,
        }
        return values[name]

    return read


def _mechanism_net(state: ChainState, index: Any) -> Subnet | None:
    """The subnet of mechanism storage index `index` (only mechanism 0 is modelled)."""
    mechid, netuid = divmod(int(index), MECHANISM_STRIDE)
    return _net(state, netuid) if mechid == 0 else None


def _uid(state: ChainState, p: list[Any]) -> int | None:
    net = _net(state, p[0])
    neuron = net.neuron(str(p[1])) if net else None
    return neuron.uid if neuron else None


def _last_update(state: ChainState, p: list[Any]) -> list[int]:
    net = _mechanism_net(state, p[0])
    return [n.last_update for n in net.neurons] if net else []


def _permits(state: ChainState, p: list[Any]) -> list[bool]:
    net = _net(state, p[0])
    return [n.validator_permit for n in net.neurons] if net else []


def _weights(state: ChainState, p: list[Any]) -> list[tuple[int, int]]:
    net = _mechanism_net(state, p[0])
    return list(net.weights.get(int(p[1]), [])) if net else []


def _axon(state: ChainState, p: list[Any]) -> dict[str, int] | None:
    net = _net(state, p[0])
    neuron = net.neuron(str(p[1])) if net else None
    return dict(neuron.axon) if neuron and neuron.axon else None


def _commitment(state: ChainState, p: list[Any]) -> dict[str, Any] | None:
    net = _net(state, p[0])
    return net.commitments.get(str(p[1])) if net else None


QUERIES: dict[tuple[str, str], Read] = {
    ("SubtensorModule", "NetworksAdded"): lambda s, p: _net(s, p[0]) is not None,
    ("SubtensorModule", "Uids"): _uid,
    ("SubtensorModule", "LastUpdate"): _last_update,
    ("SubtensorModule", "ValidatorPermit"): _permits,
    ("SubtensorModule", "Weights"): _weights,
    ("SubtensorModule", "Axons"): _axon,
    ("SubtensorModule", "SubnetworkN"): lambda s, p: len(n.neurons) if (n := _net(s, p[0])) else 0,
    ("SubtensorModule", "SubnetEpochConsensus"): lambda s, p: "Yuma" if _net(s, p[0]) else None,
    ("SubtensorModule", "CommitRevealWeightsEnabled"): _param("commit_reveal"),
    ("SubtensorModule", "RevealPeriodEpochs"): _param("reveal_period_epochs"),
    ("SubtensorModule", "WeightsSetRateLimit"): _param("weights_rate_limit"),
    ("SubtensorModule", "WeightsVersionKey"): _param("weights_version_key"),
    ("SubtensorModule", "MinAllowedWeights"): _param("min_allowed_weights"),
    ("SubtensorModule", "MaxWeightsLimit"): _param("max_weights_limit"),
    ("SubtensorModule", "ServingRateLimit"): _param("serving_rate_limit"),
    ("SubtensorModule", "Tempo"): _param("tempo"),
    ("SubtensorModule", "MaxAllowedUids"): _param("max_uids"),
    ("SubtensorModule", "LastEpochBlock"): _schedule("LastEpochBlock"),
    ("SubtensorModule", "SubnetEpochIndex"): _schedule("SubnetEpochIndex"),
    ("SubtensorModule", "BlocksSinceLastStep"): _schedule("BlocksSinceLastStep"),
    ("SubtensorModule", "PendingEpochAt"): _schedule("PendingEpochAt"),
    ("Commitments", "CommitmentOf"): _commitment,
}


def _map_commitments(state: ChainState, p: list[Any]) -> list[tuple[Any, Any]]:
    net = _net(state, p[0]) if p else None
    return sorted(net.commitments.items()) if net else []


def _map_uids(state: ChainState, p: list[Any]) -> list[tuple[Any, Any]]:
    net = _net(state, p[0]) if p else None
    return [(n.hotkey, n.uid) for n in net.neurons] if net else []


def _map_weights(state: ChainState, p: list[Any]) -> list[tuple[Any, Any]]:
    net = _mechanism_net(state, p[0]) if p else None
    return sorted((uid, list(row)) for uid, row in net.weights.items()) if net else []


QUERY_MAPS: dict[tuple[str, str], MapRead] = {
    ("Commitments", "CommitmentOf"): _map_commitments,
    ("Commitments", "RevealedCommitments"): lambda s, p: [],
    ("SubtensorModule", "Uids"): _map_uids,
    ("SubtensorModule", "Weights"): _map_weights,
    ("SubtensorModule", "TokenSymbol"): lambda s, p: [(n, b"\xce\xb1") for n in s.subnets],
}


def metagraph(state: ChainState, netuid: Any) -> dict[str, Any] | None:
    """``SubnetInfoRuntimeApi.get_metagraph``: the subnet as one record, None if absent."""
    net = _net(state, netuid)
    if net is None:
        return None
    neurons = net.neurons
    zeros = [0] * len(neurons)
    no_axon = {"block": 0, "version": 0, "ip": 0, "port": 0, "ip_type": 4, "protocol": 0}
    return {
        "netuid": net.netuid,
        "name": f"subnet {net.netuid}",
        "symbol": "α",
        "block": state.block,
        "tempo": net.params.tempo,
        "last_step": net.last_epoch_block,
        "blocks_since_last_step": state.block - net.last_epoch_block,
        "owner_hotkey": net.owner_hotkey,
        "owner_coldkey": net.owner_coldkey,
        "network_registered_at": net.registered_at,
        "num_uids": len(neurons),
        "max_uids": net.params.max_uids,
        "hotkeys": [n.hotkey for n in neurons],
        "coldkeys": [n.coldkey for n in neurons],
        "identities": [None] * len(neurons),
        "axons": [dict(n.axon) if n.axon else dict(no_axon) for n in neurons],
        "active": [True] * len(neurons),
        "validator_permit": [n.validator_permit for n in neurons],
        "last_update": [n.last_update for n in neurons],
        "block_at_registration": [n.registered_at for n in neurons],
        "rank": zeros,
        "trust": zeros,
        "consensus": zeros,
        "incentives": zeros,
        "dividends": zeros,
        "pruning_score": zeros,
        "emission": zeros,
        "alpha_stake": [n.stake_rao for n in neurons],
        "tao_stake": zeros,
        "total_stake": [n.stake_rao for n in neurons],
        "tao_in": 0,
        "alpha_in": 0,
        "moving_price": {"bits": 0},
        "identity": None,
    }


RUNTIME_CALLS: dict[tuple[str, str], Callable[[ChainState, list[Any]], Any]] = {
    ("SubnetInfoRuntimeApi", "get_metagraph"): lambda s, p: metagraph(s, p[0]),
}
