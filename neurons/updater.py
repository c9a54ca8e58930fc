"""Keep a validator's checkout up to date: ``python neurons/updater.py [--every SECONDS]``.

Fetches the checkout's upstream; when it moved, fast-forwards, reinstalls and asks the
validator to restart between rounds. Every flag has a ``SHOPBENCH_*`` environment variable
and a ``--config FILE`` key; see ``--help`` and docs/validator.md (*Run it for weeks*).
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the config and run one update pass, or one every ``--every`` seconds; a failed
    single pass is one line on stderr and exit status 2."""
    from template.base.neuron import run_entry
    from template.deploy.config import updater_config
    from template.deploy.update import run_updater

    run_entry(updater_config, run_updater, argv)


if __name__ == "__main__":
    main()
