"""The updater's configuration: which checkout, how to reinstall it, which restart file.

Its ``neuron`` section is the validator's own two settings, ``--neuron.full_path`` and
``--neuron.restart_file``, with the same defaults and the same ``SHOPBENCH_NEURON_*``
variables, so a validator and its updater started with one environment agree on the file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from template.base.config import LoggingConfig, ValidatorNeuronConfig
from template.base.options import parse_config
from template.base.restart import restart_file_path

_VALIDATOR = ValidatorNeuronConfig.model_fields

DEFAULT_REINSTALL = "{python} -m pip install --quiet -e .[subnet]"
"""The reinstall after a fast-forward: the project with the validator's extra, editable, by
the Python the updater runs under (``{python}``)."""

DEFAULT_CHECK = "{python} -m template.deploy.trial"
"""The trial of a new checkout before the restart is requested (:mod:`template.deploy.trial`:
import every entry point and what it imports, run ``neurons/validator.py --help``)."""

REFUSED_FILE = "update-refused.json"
"""Beside the restart-request file: the upstream commit the updater refused, and why."""

DEPENDENCY_FILES = ("pyproject.toml",)
"""Files whose change means the installed environment must change too."""


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RestartTarget(_Section):
    """The validator whose restart file the updater writes (its own settings)."""

    full_path: str = Field(
        default=_VALIDATOR["full_path"].default, description=_VALIDATOR["full_path"].description
    )
    restart_file: str | None = Field(
        default=None, description=_VALIDATOR["restart_file"].description
    )


class UpdateSection(_Section):
    """The checkout kept up to date and how."""

    repo: str = Field(
        default=".", description="the validator's git checkout; its branch's upstream is followed"
    )
    reinstall: str = Field(
        default=DEFAULT_REINSTALL,
        description="command run in the checkout after a fast-forward, {python} standing for "
        "this Python (empty: no reinstall; then a change of pyproject.toml is not applied "
        "and the checkout is put back: rebuild the image)",
    )
    every: float = Field(
        default=0.0, ge=0, json_schema_extra={"flag": "every"},
        description="seconds between checks (0: check once and exit)",
    )  # fmt: skip
    timeout_s: float = Field(
        default=900.0, gt=0, description="longest a git or reinstall command may run"
    )
    check: str = Field(
        default=DEFAULT_CHECK,
        description="command run in the new checkout after the reinstall, {python} standing "
        "for this Python; when it fails the checkout is put back and no restart is requested "
        "(empty: no trial)",
    )
    verify_signatures: bool = Field(
        default=False,
        description="take an upstream tip only when `git verify-commit` accepts its signature "
        "(GPG keys from the updater's keyring; SSH keys from --update.allowed_signers)",
    )
    allowed_signers: str | None = Field(
        default=None,
        description="SSH allowed-signers file the signatures are checked against "
        "(git's gpg.ssh.allowedSignersFile)",
    )


class UpdaterConfig(BaseModel):
    """Everything the updater is started with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    neuron: RestartTarget = Field(default_factory=RestartTarget)
    update: UpdateSection = Field(default_factory=UpdateSection)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    @property
    def restart_path(self) -> Path:
        """The restart-request file the validator watches."""
        return restart_file_path(self.neuron.full_path, self.neuron.restart_file)

    @property
    def refused_path(self) -> Path:
        """Where the updater remembers the upstream commit it refused (:data:`REFUSED_FILE`)."""
        return self.restart_path.with_name(REFUSED_FILE)


def updater_config(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> UpdaterConfig:
    """The updater's config from flags, ``SHOPBENCH_*`` variables and ``--config``."""
    return parse_config(
        UpdaterConfig, argv, prog="neurons/updater.py", env=env,
        description="Bring the validator's git checkout to its upstream branch: fetch; when "
        "the branch moved, fast-forward, reinstall, and ask the validator to restart between "
        "rounds (the restart-request file).",
    )  # fmt: skip
