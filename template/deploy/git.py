"""The few git commands the updater runs, each a subprocess whose failure names it."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from shopbench.errors import ShopbenchError


class UpdateError(ShopbenchError):
    """A check or an update of the checkout failed; the message names the command and why."""


def _call(repo: Path, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    shown = shlex.join(argv)
    try:
        return subprocess.run(
            argv, cwd=repo, capture_output=True, text=True, timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise UpdateError(f"{repo}: `{shown}` ran past {timeout_s:g} s") from None
    except OSError as e:
        raise UpdateError(f"{repo}: `{shown}` could not start ({e.strerror or e})") from None


def _failed(repo: Path, argv: list[str], done: subprocess.CompletedProcess[str]) -> UpdateError:
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
    return UpdateError(
        f"{repo}: `{shlex.join(argv)}` exited with status {done.returncode}"
        + (f": {' | '.join(said)}" if said else "")
    )


def run(repo: Path, argv: list[str], timeout_s: float) -> str:
    """Run `argv` in `repo`; its stripped stdout. UpdateError naming the command, its exit
    status and the last lines it wrote when it fails or outlives `timeout_s`."""
    done = _call(repo, argv, timeout_s)
    if done.returncode != 0:
        raise _failed(repo, argv, done)
    return done.stdout.strip()


GIT = ["git", "-c", "core.askPass="]
"""git, never prompting for credentials (a service has no one to answer)."""


def git(repo: Path, *args: str, timeout_s: float = 120.0) -> str:
    """``git ARGS...`` run in `repo`: its stripped stdout (UpdateError when it fails)."""
    return run(repo, [*GIT, *args], timeout_s)


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    """Whether commit `older` is an ancestor of (or is) `newer`; UpdateError when git cannot
    tell (an unknown commit)."""
    argv = [*GIT, "merge-base", "--is-ancestor", older, newer]
    done = _call(repo, argv, 120.0)
    if done.returncode in (0, 1):
        return done.returncode == 0
    raise _failed(repo, argv, done)
