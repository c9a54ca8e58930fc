"""Run a shopbench miner: ``python neurons/miner.py --netuid N --agent.base_url URL ...``.

Test an agent before registering with local mode: ``python neurons/miner.py --local
--local.allow VALIDATOR_HOTKEY --agent.policy careful``. Every flag has a ``SHOPBENCH_*``
environment variable and a ``--config FILE`` key; see ``--help`` and docs/miner.md.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the config and serve until SIGINT/SIGTERM; errors are one line."""
    from shopbench.errors import ShopbenchError
    from template.base.config import miner_config
    from template.base.miner import run_miner
    from template.base.neuron import configure_logging

    try:
        config = miner_config(argv)
        configure_logging(config.logging)
        asyncio.run(run_miner(config))
    except ShopbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
