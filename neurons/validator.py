"""Run a shopbench validator: ``python neurons/validator.py --netuid N --wallet.name W ...``.

Every flag has a ``SHOPBENCH_*`` environment variable and a ``--config FILE`` key; see
``--help`` and docs/validator.md.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the config and run the validator until SIGINT/SIGTERM; errors are one line."""
    from shopbench.errors import ShopbenchError
    from template.base.config import validator_config
    from template.base.neuron import configure_logging
    from template.base.validator import run_validator

    try:
        config = validator_config(argv)
        configure_logging(config.logging)
        asyncio.run(run_validator(config))
    except ShopbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
