"""The updater, run as the process managers run it (``python neurons/updater.py``), over
real git repositories: a bare upstream, a clone to push from, and the validator's checkout.

The reinstall is replaced by a command that records which commit it ran on, so no test
installs anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from template.base.restart import RestartRequest
from template.deploy.entry import UPDATER_SCRIPT

ROOT = Path(__file__).resolve().parents[2]
GIT_ENV = {
    **os.environ, "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.org",
    "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.strip()


@dataclass
class Repos:
    """A bare upstream, a developer's clone that pushes to it, and the validator's checkout."""

    upstream: Path
    dev: Path
    checkout: Path
    state: Path
    marker: Path

    def push(self, name: str, text: str) -> str:
        """Commit `name` with `text` in the developer's clone and push it; the new commit."""
        (self.dev / name).parent.mkdir(parents=True, exist_ok=True)
        (self.dev / name).write_text(text)
        git(self.dev, "add", name)
        git(self.dev, "commit", "-q", "-m", f"change {name}")
        git(self.dev, "push", "-q", "origin", "main")
        return git(self.dev, "rev-parse", "HEAD")

    def head(self) -> str:
        return git(self.checkout, "rev-parse", "HEAD")

    @property
    def restart_file(self) -> Path:
        return self.state / "restart-request.json"

    def reinstall(self, exit_status: int = 0) -> str:
        """A reinstall command that writes the commit it ran on to the marker file."""
        code = (
            "import pathlib, subprocess, sys; "
            f"pathlib.Path({str(self.marker)!r}).write_text(subprocess.check_output("
            "['git', 'rev-parse', 'HEAD'], text=True).strip()); "
            f"sys.exit({exit_status})"
        )
        return f'{{python}} -c "{code}"'


VALIDATOR = """import sys


def main():
    import json  # what main() imports, the trial imports

    if "--help" in sys.argv:
        print("usage: validator.py")


if __name__ == "__main__":
    main()
"""
"""A release's entry point that starts (the trial runs its --help)."""


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    upstream = tmp_path / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(upstream)], check=True,
                   env=GIT_ENV)  # fmt: skip
    dev = tmp_path / "dev"
    subprocess.run(["git", "clone", "-q", str(upstream), str(dev)], check=True, env=GIT_ENV,
                   capture_output=True)  # fmt: skip
    git(dev, "checkout", "-q", "-b", "main")
    r = Repos(upstream, dev, tmp_path / "checkout", tmp_path / "state", tmp_path / "reinstalled")
    r.push("pyproject.toml", "[project]\nname = 'x'\n")
    r.push("neurons/validator.py", VALIDATOR)
    subprocess.run(["git", "clone", "-q", str(upstream), str(r.checkout)], check=True,
                   env=GIT_ENV)  # fmt: skip
    return r


def updater(repos: Repos, *flags: str, reinstall: str | None = None) -> list[str]:
    """The updater's command line, as the deployment files run it, for `repos`."""
    return [
        sys.executable, str(ROOT / UPDATER_SCRIPT), "--update.repo", str(repos.checkout),
        "--neuron.full_path", str(repos.state), "--logging.format", "text",
        "--update.reinstall", repos.reinstall() if reinstall is None else reinstall, *flags,
    ]  # fmt: skip


def run_updater(repos: Repos, *flags: str, reinstall: str | None = None,
                ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(updater(repos, *flags, reinstall=reinstall), env=GIT_ENV,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_a_moved_upstream_is_fast_forwarded_reinstalled_and_a_restart_requested(
    repos: Repos,
) -> None:
    before = repos.head()
    done = run_updater(repos)
    assert done.returncode == 0, done.stderr
    assert "up to date" in done.stderr
    assert not repos.restart_file.exists() and not repos.marker.exists()

    first = repos.push("a.py", "one\n")
    second = repos.push("b.py", "two\n")
    done = run_updater(repos)

    assert done.returncode == 0, done.stderr
    assert repos.head() == second  # fast-forwarded to the upstream's tip
    assert git(repos.checkout, "rev-list", "--count", f"{before}..{second}") == "2"
    assert git(repos.checkout, "rev-parse", "HEAD~1") == first
    assert repos.marker.read_text() == second  # reinstalled on the new code, in the checkout
    request = RestartRequest.model_validate(json.loads(repos.restart_file.read_text()))
    assert (request.by, request.from_commit, request.to_commit) == ("updater", before, second)
    assert request.reason == f"update {before[:12]}..{second[:12]} on origin/main (2 commits)"
    assert f"updated {before[:12]}..{second[:12]} (2 commits on origin/main)" in done.stderr

    # Nothing new upstream: nothing done, and the request (still waiting) is left as it is.
    repos.marker.unlink()
    again = run_updater(repos)
    assert again.returncode == 0 and "up to date" in again.stderr
    assert not repos.marker.exists() and repos.restart_file.exists()


def test_a_failed_reinstall_puts_the_checkout_back_and_requests_nothing(repos: Repos) -> None:
    before = repos.head()
    repos.push("a.py", "one\n")
    done = run_updater(repos, reinstall=repos.reinstall(exit_status=3))

    assert done.returncode == 2
    assert "exited with status 3" in done.stderr
    assert f"the checkout is back at {before[:12]}" in done.stderr
    assert repos.head() == before and not (repos.checkout / "a.py").exists()
    assert not repos.restart_file.exists()
    # The next pass runs none of that release's build code again, and says why.
    repos.marker.unlink()
    again = run_updater(repos)
    assert again.returncode == 0 and "refused before" in again.stderr
    assert "exited with status 3" in again.stderr and not repos.marker.exists()
    # Once the upstream moves, the new release is tried, and taken.
    tip = repos.push("b.py", "two\n")
    assert run_updater(repos).returncode == 0
    assert repos.head() == repos.marker.read_text() == tip


def test_without_a_reinstall_a_dependency_change_is_refused_and_code_alone_is_taken(
    repos: Repos,
) -> None:
    before = repos.head()
    repos.push("pyproject.toml", "[project]\nname = 'x'\ndependencies = ['new']\n")
    done = run_updater(repos, reinstall="")
    assert done.returncode == 2
    assert "changes pyproject.toml and no reinstall is configured" in done.stderr
    assert repos.head() == before and not repos.restart_file.exists()

    git(repos.dev, "revert", "--no-edit", "HEAD")
    git(repos.dev, "push", "-q", "origin", "main")
    tip = repos.push("a.py", "code only\n")  # the range as a whole leaves pyproject as it was
    done = run_updater(repos, reinstall="")
    assert done.returncode == 0, done.stderr
    assert repos.head() == tip and repos.restart_file.exists()


def test_local_commits_are_left_alone_and_a_diverged_checkout_is_refused(repos: Repos) -> None:
    (repos.checkout / "local.py").write_text("mine\n")
    git(repos.checkout, "add", "local.py")
    git(repos.checkout, "commit", "-q", "-m", "local")
    mine = repos.head()
    done = run_updater(repos)
    assert done.returncode == 0 and "is ahead of origin/main" in done.stderr

    repos.push("a.py", "one\n")
    done = run_updater(repos)
    assert done.returncode == 2 and "have diverged; no fast-forward is possible" in done.stderr
    assert repos.head() == mine and not repos.restart_file.exists()


def test_a_checkout_that_follows_no_branch_is_named(repos: Repos) -> None:
    git(repos.checkout, "checkout", "-q", "--detach")
    done = run_updater(repos)
    assert done.returncode == 2
    assert "follows no upstream branch" in done.stderr and str(repos.checkout) in done.stderr


def test_every_seconds_keeps_checking_until_sigterm(repos: Repos) -> None:
    proc = subprocess.Popen(updater(repos, "--every", "0.2"), env=GIT_ENV, text=True,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        tip = repos.push("a.py", "one\n")
        for _ in range(600):  # bounded: the check itself says whether the request came
            if repos.restart_file.exists():
                break
            time.sleep(0.1)
        assert repos.restart_file.exists()
        assert repos.head() == tip
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "checking" in stderr and "stopped" in stderr


def test_a_release_that_does_not_start_is_rolled_back_and_never_restarted_into(
    repos: Repos,
) -> None:
    before = repos.head()
    broken = repos.push("neurons/validator.py", VALIDATOR.replace("import json", "import nope_"))
    done = run_updater(repos)
    assert done.returncode == 2
    assert f"origin/main {broken[:12]} does not start" in done.stderr
    assert "neurons/validator.py does not import: ModuleNotFoundError" in done.stderr
    assert repos.head() == before and not repos.restart_file.exists()
    assert repos.marker.read_text() == before  # the old code reinstalled with the old checkout
    syntax = repos.push("neurons/validator.py", "def main(:\n")
    done = run_updater(repos)
    assert done.returncode == 2 and "SyntaxError" in done.stderr and syntax[:12] in done.stderr
    assert repos.head() == before and not repos.restart_file.exists()
    repos.push("neurons/validator.py", VALIDATOR.replace('print("usage', 'sys.exit("no usage'))
    done = run_updater(repos)
    assert done.returncode == 2 and "--help` exited with status 1: no usage" in done.stderr
    fixed = repos.push("neurons/validator.py", VALIDATOR)
    done = run_updater(repos)
    assert done.returncode == 0, done.stderr
    assert repos.head() == fixed and repos.restart_file.exists()


def _ssh_key(where: Path) -> tuple[Path, str]:
    """A new ed25519 key pair: the private key's path and the public key line."""
    key = where / "signing"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "release", "-f",
                    str(key)], check=True)  # fmt: skip
    return key, (where / "signing.pub").read_text().strip()


def test_with_signatures_checked_only_a_signed_tip_is_taken(repos: Repos, tmp_path: Path) -> None:
    key, public = _ssh_key(tmp_path)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f'dev@example.org namespaces="git" {public}\n')
    flags = ("--update.verify_signatures", "--update.allowed_signers", str(allowed))
    before = repos.head()
    unsigned = repos.push("a.py", "one\n")
    done = run_updater(repos, *flags)
    assert done.returncode == 2 and f"origin/main {unsigned[:12]}: the signature" in done.stderr
    assert repos.head() == before and not repos.marker.exists()  # no build code ran
    git(repos.dev, "config", "gpg.format", "ssh")
    git(repos.dev, "config", "user.signingkey", str(key))
    (repos.dev / "b.py").write_text("two\n")
    git(repos.dev, "add", "b.py")
    git(repos.dev, "commit", "-q", "-S", "-m", "signed")
    git(repos.dev, "push", "-q", "origin", "main")
    done = run_updater(repos, *flags)
    assert done.returncode == 0, done.stderr
    assert repos.head() == git(repos.dev, "rev-parse", "HEAD") and repos.restart_file.exists()
