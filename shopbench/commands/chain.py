"""`shopbench chain`: a development chain for running the real neurons before registering.

``chain serve`` runs the in-memory chain as a process; ``chain register`` registers a
wallet's hotkey on it (signed by the wallet's coldkey); ``chain show`` prints the subnet
(neurons, endpoints, weights, waiting commits) as JSON. The neurons reach it with
``--subtensor.network memory://HOST:PORT``. The subnet plumbing (``template``, bittensor)
is imported inside the commands only.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer


def _network() -> Any:
    """``--subtensor.network``: the served chain."""
    return typer.Option(
        "memory", "--subtensor.network",
        help="the served chain, memory://HOST:PORT (as `chain serve` printed it)",
    )  # fmt: skip


def _netuid() -> Any:
    """``--netuid``: the subnet on the served chain."""
    return typer.Option(2, "--netuid", min=0, max=65535, help="the subnet")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add the `chain` group to the root app."""
    chain_app = typer.Typer(
        help="A development chain (in memory) for the real neurons: try it before you register.",
        no_args_is_help=True,
    )
    app.add_typer(chain_app, name="chain")
    chain_app.command("serve")(serve_command)
    chain_app.command("register")(register_command)
    chain_app.command("show")(show_command)


def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", help="address to bind (keep it loopback)"),
    port: int = typer.Option(9945, "--port", min=0, max=65535, help="port (0: a free one)"),
    netuid: int = typer.Option(2, "--netuid", min=1, max=65535, help="the subnet to create"),
    block_time: float = typer.Option(
        2.0, "--block-time", min=0.05, max=60, help="seconds per block"
    ),
    tempo: int = typer.Option(30, "--tempo", min=1, help="blocks per epoch"),
    commit_reveal: bool = typer.Option(
        False, "--commit-reveal", help="weights go through timelocked commits (commit-reveal)"
    ),
    reveal_period: int = typer.Option(
        1, "--reveal-period", min=1, help="epochs until a commit is revealed"
    ),
    weights_rate_limit: int = typer.Option(
        5, "--weights-rate-limit", min=0, help="blocks between a hotkey's weight settings"
    ),
) -> None:
    """Serve a fresh in-memory chain holding one subnet, producing blocks, until Ctrl-C."""
    from template.chain.memory.server import MemoryChainConfig, serve_memory_chain
    from template.chain.memory.state import SubnetParams
    from template.errors import ChainUnavailable

    params = SubnetParams(
        tempo=tempo, commit_reveal=commit_reveal, reveal_period_epochs=reveal_period,
        weights_rate_limit=weights_rate_limit, serving_rate_limit=0,
    )  # fmt: skip
    config = MemoryChainConfig(
        host=host, port=port, netuid=netuid, block_time_s=block_time, params=params
    )
    try:
        asyncio.run(serve_memory_chain(config, announce=lambda line: print(line, flush=True)))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        raise ChainUnavailable(f"cannot serve on {host}:{port}: {e.strerror or e}") from None


def register_command(
    network: str = _network(),
    netuid: int = _netuid(),
    name: str = typer.Option("default", "--wallet.name", help="wallet (coldkey) name"),
    hotkey: str = typer.Option("default", "--wallet.hotkey", help="hotkey name in the wallet"),
    path: str = typer.Option("~/.bittensor/wallets", "--wallet.path", help="wallets directory"),
    stake: float = typer.Option(0.0, "--stake", min=0, help="stake (alpha) to hold"),
    validator_permit: bool = typer.Option(
        False, "--validator-permit", help="grant a validator permit (a validator needs one)"
    ),
    create: bool = typer.Option(
        False, "--create", help="create the wallet's missing keys (random, unencrypted: "
        "development keys, never for value)",
    ),  # fmt: skip
) -> None:
    """Register a wallet's hotkey on the development chain; prints its uid."""
    from bittensor import ChainError, RpcConnectionError

    from template.base.neuron import NeuronError
    from template.chain.memory.admin import dev_wallet
    from template.chain.memory.admin import register as register_on
    from template.errors import ChainRejected, ChainUnavailable

    _checked(network)
    wallet = dev_wallet(name, hotkey, path, create=create)
    try:
        wallet.hotkey  # noqa: B018 - fail here, naming the key, not inside the request
        wallet.coldkey  # noqa: B018
    except Exception as e:  # the SDK raises several types for missing or unreadable keys
        raise NeuronError(
            f"--wallet.name {name} --wallet.hotkey {hotkey} under {path}: {e} "
            "(create development keys with --create)"
        ) from None
    try:
        uid = asyncio.run(
            register_on(network, netuid, wallet, stake=stake, validator_permit=validator_permit)
        )
    except RpcConnectionError as e:
        raise ChainUnavailable(f"register on {network} netuid {netuid}: {e}") from None
    except ChainError as e:
        raise ChainRejected(f"register on {network} netuid {netuid}: {e}", e.name) from None
    print(json.dumps({"uid": uid, "hotkey": wallet.hotkey.ss58_address, "netuid": netuid}))


def show_command(
    network: str = _network(),
    netuid: int = _netuid(),
) -> None:
    """Print the subnet on the development chain as JSON: neurons, weights, commits."""
    from bittensor import ChainError, RpcConnectionError

    from template.chain.memory.admin import show
    from template.errors import ChainRejected, ChainUnavailable

    _checked(network)
    try:
        print(json.dumps(asyncio.run(show(network, netuid)), indent=2))
    except RpcConnectionError as e:
        raise ChainUnavailable(f"read {network} netuid {netuid}: {e}") from None
    except ChainError as e:
        raise ChainRejected(f"read {network} netuid {netuid}: {e}", e.name) from None


def _checked(network: str) -> None:
    """BadParameter unless `network` is a well-formed memory://HOST:PORT."""
    from template.chain.memory.wire import parse_url

    try:
        parse_url(network)
    except ValueError:
        raise typer.BadParameter(
            f"{network!r}: expected memory://HOST:PORT", param_hint="--subtensor.network"
        ) from None
