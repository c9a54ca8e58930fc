"""The exception families of the subnet plumbing: transport (validator → miner) and chain.

Every class derives from :class:`shopbench.errors.ShopbenchError`, so the CLI prints any of
them as one line and the episode loop can record a transport failure as the turn's failure
without knowing this module.

Transport (raised by the validator-side client and by ``RemotePolicy.act``):

- :class:`TransportTimeout` — the miner did not answer within the turn's deadline.
- :class:`ConnectionFailed` — refused, reset or closed before a whole reply arrived.
- :class:`BadStatus` — the miner answered with a non-200 status (carries ``status_code``).
- :class:`OversizedReply` — the reply body is over the client's byte cap.
- :class:`InvalidReply` — the reply is not JSON, or not a valid ``StepResponse`` / card.
- :class:`InvalidRequest` — the validator's own request breaks a protocol limit (its
  subclass :class:`RequestTooLarge`: over 1 MB); nothing was sent.

Chain (raised by every ``ChainClient``):

- :class:`NotRegistered` — the wallet's hotkey holds no uid on the subnet.
- :class:`RateLimited` — the chain's rate limit for this call has not elapsed.
- :class:`ChainUnavailable` — the endpoint is down or dropped the connection (after retries).
- :class:`InvalidChainRequest` — the arguments cannot be submitted (all-zero weights, a
  commitment over the size limit, an unknown uid).
- :class:`ChainRejected` — the chain refused the call for another reason (its name kept);
  its subclass :class:`SubnetNotFound`: the netuid names no subnet on the chain reached.
"""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class TransportError(ShopbenchError):
    """A step or card request to a miner failed; ``endpoint`` names the miner."""

    reason = "transport"

    def __init__(self, endpoint: str, detail: str) -> None:
        super().__init__(f"{endpoint}: {detail}")
        self.endpoint = endpoint
        self.detail = detail


class TransportTimeout(TransportError):
    """The miner did not answer within the turn's deadline."""

    reason = "timeout"


class ConnectionFailed(TransportError):
    """The connection was refused, reset or closed before a whole reply arrived."""

    reason = "connection"


class BadStatus(TransportError):
    """The miner answered with an HTTP status other than 200."""

    reason = "status"

    def __init__(self, endpoint: str, status_code: int, detail: str) -> None:
        super().__init__(endpoint, f"HTTP {status_code}: {detail}")
        self.status_code = status_code


class OversizedReply(TransportError):
    """The reply body is larger than the client accepts."""

    reason = "oversized"


class InvalidReply(TransportError):
    """The reply is not JSON, or does not validate as the expected wire model."""

    reason = "invalid"


class InvalidRequest(TransportError):
    """The validator's own request does not fit the protocol; nothing was sent."""

    reason = "invalid_request"


class RequestTooLarge(InvalidRequest):
    """The serialised request is over the protocol's request limit; nothing was sent."""

    reason = "request_too_large"


class ChainClientError(ShopbenchError):
    """A chain read or write failed; the message names the call and the subnet."""


class NotRegistered(ChainClientError):
    """The wallet's hotkey holds no uid on the subnet."""


class RateLimited(ChainClientError):
    """The chain's rate limit for this call (weights, serving, commitments) has not elapsed."""


class ChainUnavailable(ChainClientError):
    """The chain endpoint is unreachable or dropped the connection, after the retries."""


class InvalidChainRequest(ChainClientError):
    """The request cannot be submitted as given (zero weights, oversized commitment, ...)."""


class ChainRejected(ChainClientError):
    """The chain refused the call for a reason not covered above; ``name`` is the chain's."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class SubnetNotFound(ChainRejected):
    """The chain answered, and has no subnet with this netuid: retrying cannot help."""

    def __init__(self, netuid: int) -> None:
        super().__init__(f"netuid {netuid} does not exist on this chain", "SubnetNotExists")
        self.netuid = netuid
