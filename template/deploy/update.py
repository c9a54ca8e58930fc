"""The updater: keep the validator's git checkout on its upstream branch.

One pass (:func:`update_once`): ``git fetch``; when the checkout's upstream has moved past
it, (with ``--update.verify_signatures``, ``git verify-commit`` of the upstream tip first),
fast-forward to that tip, run the reinstall command (``pip install -e .[subnet]`` with this
Python, by default), try the new checkout (``--update.check``: :mod:`template.deploy.trial`
imports every entry point and runs ``neurons/validator.py --help``), and only then write
the restart-request file, which the validator honours between two rounds
(:mod:`template.base.restart`). A checkout ahead of its upstream (local commits) is left
alone; one that has diverged from it is an error. A reinstall or a trial that fails puts the
checkout back where it was (after a failed trial the old code is reinstalled too), so the
code on disk always matches the environment installed for it and the validator never
restarts into a release that cannot start; so does a release that changes
``pyproject.toml`` when no reinstall is configured (a container image must be rebuilt).

A refused release is remembered (``update-refused.json`` beside the restart file, with the
reason): later passes run none of its build code again, and say why, until the upstream
moves to another commit (or the file is removed).

:func:`run_updater` runs one pass, or one every ``--every`` seconds until SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import signal
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from template.base.restart import RestartRequest, request_restart
from template.deploy.config import DEPENDENCY_FILES, UpdaterConfig
from template.deploy.git import UpdateError, git, is_ancestor, run

log = logging.getLogger("template.updater")

Status = Literal["current", "ahead", "updated", "refused"]


class RefusedRelease(BaseModel):
    """An upstream commit the updater will not take again, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commit: str
    reason: str


class UpdateOutcome(BaseModel):
    """What one pass found and did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Status = Field(
        description="current: on its upstream; ahead: holds local commits the upstream lacks; "
        "updated: fast-forwarded, reinstalled, tried and a restart requested; refused: the "
        "upstream is a release refused before (reason), nothing run"
    )
    branch: str = Field(description="the upstream followed, e.g. origin/main")
    head: str = Field(description="the commit checked out after the pass")
    previous: str = Field(description="the commit checked out before it")
    commits: int = Field(default=0, ge=0, description="commits brought in")
    reason: str | None = Field(default=None, description="why a refused release was refused")


def reinstall_argv(command: str) -> list[str]:
    """The reinstall command as arguments, ``{python}`` standing for this Python; empty
    when no reinstall is configured."""
    return [part.replace("{python}", sys.executable) for part in shlex.split(command)]


def update_once(config: UpdaterConfig) -> UpdateOutcome:
    """One pass over the checkout (see the module docstring). UpdateError names what failed:
    the checkout is then where it was before the pass."""
    u = config.update
    repo = Path(u.repo).expanduser().resolve()
    if not repo.is_dir():
        raise UpdateError(f"--update.repo {repo}: no such directory")
    try:
        branch = git(repo, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    except UpdateError as e:
        raise UpdateError(
            f"--update.repo {repo}: the checked-out branch follows no upstream branch (check "
            f"out a branch and `git branch --set-upstream-to origin/main`): {e}"
        ) from None
    git(repo, "fetch", "--quiet", timeout_s=u.timeout_s)
    head = git(repo, "rev-parse", "HEAD")
    upstream = git(repo, "rev-parse", "@{upstream}")
    if head == upstream:
        return UpdateOutcome(status="current", branch=branch, head=head, previous=head)
    if is_ancestor(repo, upstream, head):
        return UpdateOutcome(status="ahead", branch=branch, head=head, previous=head)
    if not is_ancestor(repo, head, upstream):
        raise UpdateError(
            f"--update.repo {repo}: HEAD {head[:12]} and {branch} {upstream[:12]} have "
            "diverged; no fast-forward is possible (reset the checkout to its upstream by hand)"
        )
    refused = _refused(config)
    if refused is not None and refused.commit == upstream:
        return UpdateOutcome(status="refused", branch=branch, head=head, previous=head,
                             reason=refused.reason)  # fmt: skip
    if u.verify_signatures:
        problem = signature_problem(repo, upstream, u.allowed_signers)
        if problem is not None:
            raise _refuse(config, upstream, f"{branch} {upstream[:12]}: {problem}")
    # The commit fetched (and checked) above, not whatever a second fetch would bring.
    git(repo, "merge", "--ff-only", "--quiet", upstream, timeout_s=u.timeout_s)
    new = git(repo, "rev-parse", "HEAD")
    commits = int(git(repo, "rev-list", "--count", f"{head}..{new}"))
    changed = set(git(repo, "diff", "--name-only", head, new).splitlines())
    dependencies = sorted(changed & set(DEPENDENCY_FILES))
    argv = reinstall_argv(u.reinstall)
    try:
        if argv:
            log.info("reinstalling after %s..%s: %s", head[:12], new[:12], shlex.join(argv))
            run(repo, argv, u.timeout_s)
        elif dependencies:
            raise UpdateError(
                f"{branch} {head[:12]}..{new[:12]} changes {', '.join(dependencies)} and no "
                "reinstall is configured (--update.reinstall): rebuild the image (docker "
                "compose build) to take this release"
            )
    except UpdateError as e:
        git(repo, "reset", "--keep", head)  # the code on disk stays the code installed
        raise _refuse(config, new, f"{e}; the checkout is back at {head[:12]}") from None
    check = reinstall_argv(u.check)
    if check:
        try:
            run(repo, check, u.timeout_s)
        except UpdateError as e:
            git(repo, "reset", "--keep", head)
            undone = ""
            if argv:  # the environment goes back with the code
                try:
                    run(repo, argv, u.timeout_s)
                except UpdateError as again:
                    undone = f"; reinstalling {head[:12]} failed too ({again})"
            raise _refuse(
                config, new,
                f"{branch} {new[:12]} does not start ({e}); the checkout is back at "
                f"{head[:12]}{undone}; no restart requested",
            ) from None  # fmt: skip
    config.refused_path.unlink(missing_ok=True)
    request_restart(config.restart_path, RestartRequest(
        reason=f"update {head[:12]}..{new[:12]} on {branch} ({commits} commits)",
        by="updater", from_commit=head, to_commit=new,
    ))  # fmt: skip
    return UpdateOutcome(
        status="updated", branch=branch, head=new, previous=head, commits=commits
    )


def signature_problem(repo: Path, commit: str, allowed_signers: str | None) -> str | None:
    """Why `commit`'s signature does not verify (``git verify-commit``, SSH signatures against
    `allowed_signers`), or None when it does."""
    options = [] if allowed_signers is None else [
        "-c", f"gpg.ssh.allowedSignersFile={Path(allowed_signers).expanduser().resolve()}",
    ]  # fmt: skip
    try:
        git(repo, *options, "verify-commit", commit)
    except UpdateError as e:
        return f"the signature does not verify against the configured keys ({e})"
    return None


def _refused(config: UpdaterConfig) -> RefusedRelease | None:
    try:
        return RefusedRelease.model_validate_json(config.refused_path.read_bytes())
    except (OSError, ValueError):
        return None


def _refuse(config: UpdaterConfig, commit: str, reason: str) -> UpdateError:
    """Remember `commit` as refused for `reason`; the UpdateError that says so."""
    path = config.refused_path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(RefusedRelease(commit=commit, reason=reason).model_dump_json() + "\n")
        tmp.replace(path)
    except OSError as e:
        reason += f" (not remembered: {path}: {e.strerror or e})"
    return UpdateError(reason)


def _report(outcome: UpdateOutcome, config: UpdaterConfig) -> None:
    fields = {"status": outcome.status, "head": outcome.head, "branch": outcome.branch}
    if outcome.status == "updated":
        log.info(
            "updated %s..%s (%d commits on %s); restart requested in %s",
            outcome.previous[:12], outcome.head[:12], outcome.commits, outcome.branch,
            config.restart_path, extra=fields,
        )  # fmt: skip
    elif outcome.status == "refused":
        log.warning(
            "%s is a release refused before, left alone until the upstream moves (remove %s "
            "to try it again): %s", outcome.branch, config.refused_path, outcome.reason,
            extra=fields,
        )  # fmt: skip
    elif outcome.status == "ahead":
        log.info("%s is ahead of %s: nothing to take", outcome.head[:12], outcome.branch,
                 extra=fields)  # fmt: skip
    else:
        log.info("on %s at %s: up to date", outcome.branch, outcome.head[:12], extra=fields)


async def run_updater(config: UpdaterConfig) -> None:
    """One pass (UpdateError when it fails: the process exits 2), or with ``--every`` one
    pass every that many seconds until SIGINT/SIGTERM, a failed pass logged and retried."""
    every = config.update.every
    if not every:
        _report(await asyncio.to_thread(update_once, config), config)
        return
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("checking %s every %g s", config.update.repo, every)
    while not stop.is_set():
        try:
            # A pass in flight is finished (its commands are bounded by --update.timeout_s):
            # stopping in the middle of a pull would leave the checkout half moved.
            _report(await asyncio.to_thread(update_once, config), config)
        except UpdateError as e:
            log.error("update failed, retrying in %g s: %s", every, e)
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            continue
    log.info("stopped")
