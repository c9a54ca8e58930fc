"""The chain as the neurons use it: :class:`ChainClient` and its implementations.

- :class:`BittensorChain` — the bittensor 11 SDK against a subtensor node;
- :class:`LocalChain` — the same SDK code against :class:`MemorySubstrate`, an in-memory
  chain for the arena and tests;
- the models they return (:class:`Commitment`, :class:`WeightsReceipt`; the metagraph's,
  :class:`~template.metagraph.MetagraphView`, lives a floor below, in
  :mod:`template.metagraph`, where the transport reads it too) and their
  :class:`ChainConfig`.
"""

from template.chain.bittensor_chain import BittensorChain, typed_chain_error
from template.chain.client import ChainClient, ChainConfig
from template.chain.local import LocalChain
from template.chain.memory.state import SubnetParams, TimelockedCommit
from template.chain.memory.substrate import MemorySubstrate
from template.chain.model import Commitment, WeightsReceipt

__all__ = [
    "BittensorChain",
    "ChainClient",
    "ChainConfig",
    "Commitment",
    "LocalChain",
    "MemorySubstrate",
    "SubnetParams",
    "TimelockedCommit",
    "WeightsReceipt",
    "typed_chain_error",
]
