"""Run a shopbench miner: ``python neurons/miner.py --netuid N --agent.base_url URL ...``.

Test an agent before registering with local mode: ``python neurons/miner.py --local
--local.allow VALIDATOR_HOTKEY --agent.policy careful``. Every flag has a ``SHOPBENCH_*``
environment variable and a ``--config FILE`` key; see ``--help`` and docs/miner.md.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the config and serve until SIGINT/SIGTERM; errors are one line."""
    from template.base.config import miner_config
    from template.base.miner import run_miner
    from template.base.neuron import run_entry

    run_entry(miner_config, run_miner, argv)


if __name__ == "__main__":
    main()
