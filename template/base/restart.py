"""The restart-request file: how a validator is asked to restart on new code between rounds.

Whoever wants the validator on new code (the updater, after a fast-forward and a reinstall;
an operator, with ``touch``) writes the file; the validator looks for it only between
rounds, never in the middle of one, and when it is there logs why, saves its state, removes
it and exits with status 0, so that its process manager (systemd ``Restart=always``, pm2,
compose ``restart: unless-stopped``) starts it again on the code now on disk.

The file holds a :class:`RestartRequest` as JSON; any other content, an empty file
included, is a request too, its reason read as "requested by hand".
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.errors import ShopbenchError

RESTART_FILE = "restart-request.json"
"""The request file's name inside ``--neuron.full_path`` unless ``--neuron.restart_file``
names another."""


class RestartError(ShopbenchError):
    """The restart-request file cannot be written or removed."""


class RestartRequest(BaseModel):
    """Why a restart is asked for, and by whom."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(min_length=1, description="why, in one line, for the log")
    by: str = Field(default="hand", description="who asked: the updater, or a person")
    from_commit: str | None = Field(default=None, description="the commit the code was on")
    to_commit: str | None = Field(default=None, description="the commit the code is on now")
    at: float = Field(default=0.0, description="unix time of the request")


def restart_file_path(full_path: str | Path, restart_file: str | None) -> Path:
    """The request file a validator with `full_path` watches: `restart_file` when given,
    else ``FULL_PATH/restart-request.json``; the one place both the validator and the
    updater resolve it."""
    if restart_file:
        return Path(restart_file).expanduser()
    return Path(full_path).expanduser() / RESTART_FILE


def request_restart(path: Path, request: RestartRequest) -> None:
    """Write `request` to `path` atomically (a reader never sees half of it); RestartError
    naming the file when it cannot be written."""
    stamped = request if request.at else request.model_copy(update={"at": time.time()})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(stamped.model_dump_json(indent=1) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise RestartError(
            f"{path}: cannot write the restart request ({e.strerror or e})"
        ) from None


def read_restart_request(path: Path) -> RestartRequest | None:
    """The request at `path`, or None when there is none; a file that holds no request
    model (an empty ``touch``, a line of text) is a request by hand. A request without its
    time is dated by the file's modification time."""
    try:
        written = path.stat().st_mtime
        raw = path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    except OSError as e:
        return RestartRequest(reason=f"the request file is there but unreadable ({e})")
    try:
        request = RestartRequest.model_validate_json(raw)
    except ValidationError:
        first = raw.strip().splitlines()[0][:200] if raw.strip() else ""
        request = RestartRequest(reason=first or "an empty request file")
    return request if request.at else request.model_copy(update={"at": written})


def take_restart_request(path: Path) -> RestartRequest | None:
    """The request at `path`, removed; None when there is none. RestartError when the file
    cannot be removed: a request that cannot be taken back would restart the validator
    again and again."""
    request = read_restart_request(path)
    if request is None:
        return None
    try:
        path.unlink()
    except FileNotFoundError:
        pass  # taken by another reader in between: it is still this one's to honour
    except OSError as e:
        raise RestartError(
            f"{path}: cannot remove the restart request ({e.strerror or e}); remove it by hand"
        ) from None
    return request
