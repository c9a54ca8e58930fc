"""The in-memory chain's wire format, shared by its server and its client.

Values cross as JSON with two tags, so the SDK gets back exactly the shapes the in-memory
chain returns in-process: bytes as ``{"$bytes": hex}`` and a tuple as
``{"$tuple": [...]}``. Reads name a method of the chain's ``Substrate`` surface; writes
are :class:`SignedWrite` envelopes: the operation, its body, the signer's ss58 address, a
nonce that must grow with every write of that signer, and the signer's sr25519 signature
of :func:`write_payload` — domain-separated, so no record, request or extrinsic signature
can pass as one, and none of these as any of those.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CHAIN_DOMAIN = b"shopbench/memory-chain/v1\n"
MAX_BODY_BYTES = 1 << 20
MAX_DEPTH = 32
DEFAULT_PORT = 9945
SCHEME = "memory"

#: The ``Substrate`` methods a client may call without signing (reads and call checks).
READS = frozenset({
    "block_hash", "block_number", "finalized_block_number", "block_time", "spec_version",
    "get_block", "query", "map_has_entries", "query_map", "query_batch", "runtime_call",
    "events", "account_next_index", "compose",
    # the dev chain's own reads
    "subnet_params", "subnet_uid", "stored_weights", "pending_commits", "subnet_netuids",
})  # fmt: skip

WriteOp = Literal["submit", "deposit_reveal", "withdraw_reveal", "register"]


class ReadCall(BaseModel):
    """One unsigned read: a method of :data:`READS` and its (tagged) arguments."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(max_length=64)
    args: list[Any] = Field(default_factory=list, max_length=16)
    kwargs: dict[str, Any] = Field(default_factory=dict, max_length=16)


class SignedWrite(BaseModel):
    """One write, signed by `signer` (a hotkey; a coldkey for ``register``)."""

    model_config = ConfigDict(extra="forbid")

    op: WriteOp
    body: dict[str, Any] = Field(max_length=16, description="tagged JSON (see encode)")
    signer: str = Field(min_length=40, max_length=64)
    nonce: int = Field(ge=0, lt=2**63)
    signature: str = Field(min_length=128, max_length=130)


class WireError(BaseModel):
    """A refusal: the chain's error name (when the chain refused) and its message."""

    message: str
    name: str | None = None
    kind: Literal["chain", "request", "auth"] = "chain"


def write_payload(op: str, body: dict[str, Any], signer: str, nonce: int) -> bytes:
    """The bytes a write's signature covers (after :data:`CHAIN_DOMAIN`): canonical JSON of
    the operation, its tagged body, the signer and the nonce."""
    doc = {"op": op, "body": body, "signer": signer, "nonce": nonce}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def encode(value: Any, depth: int = 0) -> Any:
    """`value` as tagged JSON (bytes, tuples, lists, dicts with string keys, scalars)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, bytes | bytearray):
        return {"$bytes": bytes(value).hex()}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("dictionary keys must be strings")
        return {k: encode(v, depth + 1) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ValueError(f"cannot send a {type(value).__name__}")


def decode(value: Any, depth: int = 0) -> Any:
    """The inverse of :func:`encode`; ValueError on a malformed tag."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, list):
        return [decode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and "$bytes" in value:
            return bytes.fromhex(str(value["$bytes"]))
        if len(value) == 1 and "$tuple" in value:
            items = value["$tuple"]
            if not isinstance(items, list):
                raise ValueError("$tuple holds a list")
            return tuple(decode(v, depth + 1) for v in items)
        return {str(k): decode(v, depth + 1) for k, v in value.items()}
    return value


def parse_url(network: str) -> str:
    """The http:// base URL of a ``memory[://HOST[:PORT]]`` network; ValueError otherwise."""
    if network == SCHEME:
        return f"http://127.0.0.1:{DEFAULT_PORT}"
    prefix = SCHEME + "://"
    if not network.startswith(prefix):
        raise ValueError(f"{network!r} is not memory://HOST:PORT")
    rest = network[len(prefix) :].rstrip("/")
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", str(DEFAULT_PORT))
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in host:
        raise ValueError(f"{network!r} is not memory://HOST:PORT")
    return f"http://{host}:{int(port)}"


def is_memory_network(network: str) -> bool:
    """True for ``memory`` and ``memory://...``."""
    return network == SCHEME or network.startswith(SCHEME + "://")
