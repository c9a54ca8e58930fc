"""The local arena: a whole subnet on one machine (``shopbench arena``).

- ``config.py`` — :class:`ArenaConfig`, plain pydantic, read by the CLI at import;
- ``run.py`` — :func:`run_arena`: catalog, wallets, chain, miners and the validator's rounds;
- ``miners.py`` — the miner processes and their readiness;
- ``view.py`` — what a person watching sees (quiet or rich).
"""
