"""Signed HTTP between validators and miners on ``bittensor.http_auth``.

- :func:`create_miner_app` — the miner's FastAPI app (``POST /step``, ``GET /card``,
  ``GET /health``), with its :class:`MinerAppConfig`, :class:`CallerGate` (who is served)
  and stake-priority admission under load;
- :class:`MinerClient` — the validator's pooled, bounded, deadline-keeping client, with
  :class:`ClientConfig` and :class:`MinerEndpoint`;
- :class:`RemotePolicy` — a miner as a ``Policy``, one signed request per turn;
- :class:`BackgroundServer` — an app served on a loopback port in a thread.
"""

from template.transport.admission import Overloaded, PriorityAdmission
from template.transport.client import ClientConfig, MinerClient, MinerEndpoint
from template.transport.remote_policy import RemotePolicy, TurnReport
from template.transport.serve import BackgroundServer, bind
from template.transport.server import MinerAppConfig, create_miner_app
from template.transport.standing import CallerGate, Forbidden, StandingConfig

__all__ = [
    "BackgroundServer",
    "CallerGate",
    "ClientConfig",
    "Forbidden",
    "MinerAppConfig",
    "MinerClient",
    "MinerEndpoint",
    "Overloaded",
    "PriorityAdmission",
    "RemotePolicy",
    "StandingConfig",
    "TurnReport",
    "bind",
    "create_miner_app",
]
