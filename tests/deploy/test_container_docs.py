"""docs/validator.md's container routes for hosts without Docker Hub and for rootless hosts
are the ones scripts/container-check.sh runs, on a base the Dockerfile takes as an argument."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from template.base.config import validator_config

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "validator.md").read_text(encoding="utf-8")
SCRIPT = (ROOT / "scripts" / "container-check.sh").read_text(encoding="utf-8")
DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")


def _block(after: str) -> str:
    """The first bash block after the paragraph that starts with `after`."""
    found = re.search(r"```bash\n(.*?)```", DOC[DOC.index(after) :], re.S)
    assert found is not None, after
    return found.group(1)


def _words(line: str) -> list[str]:
    return shlex.split(line.replace("\\\n", " "))


def test_the_debian_route_is_the_checks_own_on_the_dockerfiles_base_argument() -> None:
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.12-slim$", DOCKERFILE, re.M)
    assert "FROM ${PYTHON_IMAGE}" in DOCKERFILE
    block = _block("**Without Docker Hub.**").replace("\\\n", " ")
    bootstrap, build = [ln for ln in block.splitlines() if ln.strip()]
    script = next(ln for ln in SCRIPT.replace("\\\n", " ").splitlines()
                  if ln.strip().startswith("mmdebstrap "))  # fmt: skip
    ours, theirs = _words(bootstrap.split("|")[0]), _words(script.split("2>")[0])
    assert ours == theirs  # the same suite, packages and mirror
    image = _words(bootstrap.split("|")[1])[-1]
    words = _words(build)
    assert words[:2] == ["podman", "build"]
    assert f"PYTHON_IMAGE={image}" in words and "deploy/Dockerfile" in words


def test_the_rootless_run_options_are_the_ones_the_check_falls_back_to() -> None:
    fallback = re.search(r'opts_sets=\("" "([^"]+)"\)', SCRIPT)
    assert fallback is not None
    global_opts, run_opts = fallback.group(1).split("|")
    words = _words(_block("**Rootless and nested hosts.**").strip())
    assert words[:3] == ["podman", *global_opts.split()]
    joined = " ".join(words)
    assert run_opts in joined and "--network host" in joined
    image = words.index("shopbench-validator")
    # what follows the image are the validator's own flags
    flags = ["5" if w == "N" else w for w in words[image + 1 :]]  # N: your netuid
    config = validator_config(flags, env={})
    assert config.wallet.path == "/wallets" and config.wallet.name == "my-validator"
