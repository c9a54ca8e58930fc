"""What both neurons share: structured logs, the wallet, the chain client, the start-up checks.

Logs are one JSON object per line by default (``--logging.format json``): the time, the
level, the logger, the message, and the event's fields (``round``, ``uid``...), so a log
shipper can index them; ``text`` is for people at a terminal.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any, TextIO

from shopbench.errors import ShopbenchError
from template.base.config import ClockConfig, LoggingConfig, SubtensorConfig, WalletConfig
from template.errors import SubnetNotFound

_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


class NeuronError(ShopbenchError):
    """A neuron cannot start: missing wallet, unregistered hotkey, bad address."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_FIELDS and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(config: LoggingConfig, stream: TextIO | None = None) -> None:
    """Send the root logger's records to `stream` (stderr) in the configured format, and to
    ``--logging.file`` as well when one is named: rotated when it reaches
    ``--logging.max_mb``, with ``--logging.backups`` old files kept (``FILE.1`` the newest).
    NeuronError names a log file that cannot be opened."""
    handlers: list[logging.Handler] = [logging.StreamHandler(stream or sys.stderr)]
    if config.file:
        path = Path(config.file).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handlers.append(RotatingFileHandler(
                path, maxBytes=max(1, int(config.max_mb * 1024 * 1024)),
                backupCount=config.backups, encoding="utf-8",
            ))  # fmt: skip
        except OSError as e:
            reason = e.strerror or e
            raise NeuronError(f"--logging.file {path}: cannot open it ({reason})") from None
    formatter = (
        JsonFormatter() if config.format == "json"
        else logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    )  # fmt: skip
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        if isinstance(old, logging.FileHandler):
            old.close()  # a file handler of an earlier configuration
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(config.level)
    # Per-request access lines would drown the events that matter.
    for noisy in ("uvicorn.access", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def load_wallet(config: WalletConfig) -> Any:
    """The ``bittensor.Wallet`` named by `config`; NeuronError naming the missing key file."""
    import bittensor as bt

    wallet = bt.Wallet(name=config.name, hotkey=config.hotkey, path=config.path)
    hotkey_file = Path(config.path).expanduser() / config.name / "hotkeys" / config.hotkey
    if not hotkey_file.exists():
        raise NeuronError(
            f"--wallet.name {config.name} --wallet.hotkey {config.hotkey}: no hotkey file at "
            f"{hotkey_file} (create one with `btcli wallet new-hotkey`, or set --wallet.path)"
        )
    try:
        wallet.hotkey  # noqa: B018 - load it now, so a locked or corrupt key fails at start
    except Exception as e:  # the SDK raises several types for unreadable key files
        raise NeuronError(f"{hotkey_file}: cannot load the hotkey ({e})") from None
    return wallet


def make_chain(wallet: Any, subtensor: SubtensorConfig, netuid: int) -> Any:
    """The chain client for `netuid` on the configured network: a
    :class:`~template.chain.BittensorChain` on a subtensor node, or, for
    ``memory://HOST:PORT``, a :class:`~template.chain.LocalChain` on a served in-memory
    chain (``shopbench chain serve``)."""
    from template.chain import BittensorChain, ChainConfig
    from template.chain.memory.wire import is_memory_network, parse_url

    if is_memory_network(subtensor.network):
        from template.chain import LocalChain
        from template.chain.memory.client import RemoteMemorySubstrate

        substrate = RemoteMemorySubstrate(parse_url(subtensor.network), signer=wallet.hotkey)
        return LocalChain(substrate, wallet, netuid, retries=2, retry_backoff_s=1.0)
    return BittensorChain(wallet, ChainConfig(network=subtensor.network, netuid=netuid))


def missing_subnet(error: SubnetNotFound, subtensor: SubtensorConfig) -> NeuronError:
    """The start-up error for a netuid the reached chain does not have: what to change."""
    return NeuronError(
        f"--netuid {error.netuid}: {error} (--subtensor.network {subtensor.network}); give "
        "the netuid of a subnet there (`btcli subnets list` shows them) or another network"
    )


def startup_clock_check(config: ClockConfig) -> None:
    """Refuse to start on a clock that signed requests would not tolerate (ClockError)."""
    from template.base.clock import check_clock

    check_clock(config.ntp_servers, config.max_offset_s, config.timeout_s)


def write_local_wallet(path: Path, name: str, hotkey: str = "default") -> Any:
    """Create (or overwrite) an unencrypted wallet under `path` whose keys derive from `name`.

    The keys are public (anyone can derive them from the name): for the arena and tests
    only. Returns the ``bittensor.Wallet``.
    """
    import bittensor as bt

    wallet = bt.Wallet(name=name, hotkey=hotkey, path=str(path))
    for role, regenerate in (
        ("coldkey", wallet.regenerate_coldkey),
        ("hotkey", wallet.regenerate_hotkey),
    ):
        # The derivation of template.signing.LocalWallet, so both give the same addresses.
        seed = hashlib.sha256(f"shopbench/local-wallet/{name}/{role}".encode()).hexdigest()
        regenerate(seed=seed, use_password=False, overwrite=True, suppress=True)
    return bt.Wallet(name=name, hotkey=hotkey, path=str(path))


class Backoff:
    """Exponential backoff for retried chain writes: `ready` says whether to try now."""

    def __init__(self, first_s: float, max_s: float, clock: Any = time.monotonic) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._clock = clock
        self._next = 0.0
        self.failures = 0

    def ready(self) -> bool:
        """Whether the wait since the last failure is over."""
        return self._clock() >= self._next

    def failed(self) -> float:
        """Record a failure; returns the wait before the next try."""
        wait = min(self.max_s, self.first_s * 2**self.failures)
        self.failures += 1
        self._next = self._clock() + wait
        return wait

    def succeeded(self) -> None:
        """Record a success: the next failure waits the first delay again."""
        self.failures = 0
        self._next = 0.0


def run_entry(
    parse: Callable[[Sequence[str] | None], Any],
    run: Callable[[Any], Awaitable[Any]],
    argv: Sequence[str] | None = None,
) -> None:
    """The neurons' shared entry: parse the config, set up logging, run until stopped.

    A shopbench error (bad flag value, unreadable wallet, clock off) becomes one line on
    stderr and exit status 2.
    """
    import asyncio

    try:
        config = parse(argv)
        configure_logging(config.logging)
        asyncio.run(run(config))
    except ShopbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
