"""Signed HTTP between validators and miners on ``bittensor.http_auth``.

- :func:`create_miner_app` — the miner's FastAPI app (``POST /step``, ``GET /card``,
  ``GET /health``), with its :class:`MinerAppConfig`, :class:`CallerGate` (who is served)
  and stake-priority admission under load;
- :class:`MinerClient` — the validator's pooled, bounded, deadline-keeping client, with
  :class:`ClientConfig` and :class:`MinerEndpoint`;
- :class:`RemotePolicy` — a miner as a ``Policy``, one signed request per turn.

Serving an app on a socket (``bind``, ``BackgroundServer``) is a floor below, in
:mod:`template.serve`, which the development chain's server shares.
"""

from template.transport.admission import Overloaded, PriorityAdmission
from template.transport.client import ClientConfig, MinerClient, MinerEndpoint
from template.transport.remote_policy import RemotePolicy, TurnReport
from template.transport.server import MinerAppConfig, create_miner_app
from template.transport.standing import CallerGate, Forbidden, StandingConfig

__all__ = [
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
    "create_miner_app",
]
