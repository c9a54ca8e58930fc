"""The local arena: a whole subnet on one machine (``shopbench arena``).

- its config, :class:`~shopbench.arena.config.ArenaConfig`, is plain pydantic in the domain
  (:mod:`shopbench.arena`), where the CLI and the experiment read it;
- ``run.py`` — :func:`run_arena`: catalog, wallets, chain, miners and the validator's rounds;
- ``miners.py`` — the miner processes and their readiness;
- ``view.py`` — what a person watching sees (quiet or rich).
"""
