"""What an arena run is given, as plain pydantic the domain can read: :class:`ArenaConfig`
(``config.py``) and its error family (``errors.py``).

The arena itself (catalog, wallets, chain, miner processes, the validator's rounds) is the
subnet layer's, ``template/arena/``; the experiment (:mod:`shopbench.experiment`) types the
arena it asks for with this config and hands it to the runner the command passes in.
"""
