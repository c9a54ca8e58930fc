"""What ``shopbench chain register`` and ``shopbench chain show`` do on a served chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from template.chain.memory.client import RemoteMemorySubstrate
from template.chain.memory.wire import parse_url


def dev_wallet(name: str, hotkey: str, path: str, *, create: bool) -> Any:
    """The ``bittensor.Wallet`` `name`/`hotkey` under `path`; with `create`, the keys it
    lacks are made (random, unencrypted: development keys, never for value)."""
    import bittensor as bt

    wallet = bt.Wallet(name=name, hotkey=hotkey, path=path)
    root = Path(path).expanduser() / name
    if create and not (root / "coldkey").exists():
        wallet.create_new_coldkey(use_password=False, suppress=True)
    if create and not (root / "hotkeys" / hotkey).exists():
        wallet.create_new_hotkey(use_password=False, suppress=True)
    return wallet


async def register(
    network: str, netuid: int, wallet: Any, *, stake: float, validator_permit: bool
) -> int:
    """Register `wallet`'s hotkey on `netuid` of the served chain, signed by its coldkey."""
    chain = RemoteMemorySubstrate(parse_url(network))
    try:
        return await chain.register(
            netuid, wallet.hotkey.ss58_address, wallet.coldkey,
            stake=stake, validator_permit=validator_permit,
        )  # fmt: skip
    finally:
        await chain.close()


async def show(network: str, netuid: int) -> dict[str, Any]:
    """The subnet on the served chain: head, neurons, weights and waiting commits."""
    chain = RemoteMemorySubstrate(parse_url(network))
    try:
        graph = await chain.runtime_call("SubnetInfoRuntimeApi", "get_metagraph", [netuid])
        if graph is None:
            return {"block": await chain.block_number(), "netuid": netuid, "exists": False}
        params = await chain.subnet_params(netuid)
        neurons = [
            {
                "uid": uid, "hotkey": hotkey, "stake": stake / 1e9, "validator_permit": permit,
                "axon": (f"{_ip(axon['ip'])}:{axon['port']}" if axon.get("port") else None),
                "last_update": last,
            }  # fmt: skip
            for uid, (hotkey, stake, permit, axon, last) in enumerate(
                zip(
                    graph["hotkeys"], graph["total_stake"], graph["validator_permit"],
                    graph["axons"], graph["last_update"], strict=True,
                )  # fmt: skip
            )
        ]
        return {
            "block": graph["block"],
            "netuid": netuid,
            "exists": True,
            "params": params.model_dump(),
            "neurons": neurons,
            "weights": await chain.stored_weights(netuid),
            "pending_commits": [
                {**{k: v for k, v in c.items() if k != "commit"}, "commit_bytes": len(c["commit"])}
                for c in await chain.pending_commits(netuid)
            ],
        }
    finally:
        await chain.close()


def _ip(value: int) -> str:
    import ipaddress

    return str(ipaddress.ip_address(int(value)))
