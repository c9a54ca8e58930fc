"""Run a shopbench validator: ``python neurons/validator.py --netuid N --wallet.name W ...``.

Every flag has a ``SHOPBENCH_*`` environment variable and a ``--config FILE`` key; see
``--help`` and docs/validator.md.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the config and run the validator until SIGINT/SIGTERM; errors are one line."""
    from template.base.config import validator_config
    from template.base.neuron import run_entry
    from template.base.validator_process import run_validator

    run_entry(validator_config, run_validator, argv)


if __name__ == "__main__":
    main()
