"""Who may call a miner: registered validators with a permit and enough stake, or a list.

The miner app asks :class:`CallerGate` about every authenticated caller. On a live subnet
the gate reads the latest metagraph the miner's loop handed it (``update``); in local mode
an explicit allow-list replaces the standing checks. The gate also gives each admitted
caller its priority under load: its stake.
"""

from __future__ import annotations

import threading

from pydantic import BaseModel, ConfigDict, Field

from template.metagraph import MetagraphView


class Forbidden(Exception):
    """The caller is authenticated but not permitted; the message says why (sent as 403)."""


class StandingConfig(BaseModel):
    """What a caller needs to be served."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_stake: float = Field(
        default=1000.0, ge=0, description="least total stake (alpha) a calling validator holds"
    )
    require_validator_permit: bool = Field(
        default=True, description="refuse callers without a validator permit"
    )
    allow_list: frozenset[str] | None = Field(
        default=None,
        description="local mode: serve exactly these hotkeys, without standing checks",
    )


class CallerGate:
    """Decides whether an authenticated hotkey is served, and at which priority.

    Thread-safe: the miner's loop calls :meth:`update` while requests call :meth:`admit`.
    """

    def __init__(self, config: StandingConfig, metagraph: MetagraphView | None = None) -> None:
        self.config = config
        self._metagraph = metagraph
        self._lock = threading.Lock()

    @classmethod
    def allow(cls, hotkeys: set[str] | frozenset[str] | list[str]) -> CallerGate:
        """A local-mode gate serving exactly `hotkeys` (all at priority 0 until a metagraph)."""
        return cls(StandingConfig(allow_list=frozenset(hotkeys)))

    def update(self, metagraph: MetagraphView) -> None:
        """Use `metagraph` for every later decision."""
        with self._lock:
            self._metagraph = metagraph

    def admit(self, hotkey: str) -> float:
        """The caller's priority (its stake); raises :class:`Forbidden` naming the reason."""
        with self._lock:
            metagraph = self._metagraph
        neuron = metagraph.by_hotkey(hotkey) if metagraph is not None else None
        allow = self.config.allow_list
        if allow is not None:
            if hotkey not in allow:
                raise Forbidden(f"hotkey {hotkey} is not on this miner's allow-list")
            return neuron.stake if neuron is not None else 0.0
        if metagraph is None:
            raise Forbidden("this miner has not read the metagraph yet; standing unknown")
        if neuron is None:
            raise Forbidden(f"hotkey {hotkey} is not registered on netuid {metagraph.netuid}")
        if self.config.require_validator_permit and not neuron.validator_permit:
            raise Forbidden(f"hotkey {hotkey} (uid {neuron.uid}) holds no validator permit")
        if neuron.stake < self.config.min_stake:
            raise Forbidden(
                f"hotkey {hotkey} (uid {neuron.uid}) stakes {neuron.stake:g}; "
                f"this miner requires {self.config.min_stake:g}"
            )
        return neuron.stake
