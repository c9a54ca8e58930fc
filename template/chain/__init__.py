"""The chain as the neurons use it: :class:`ChainClient` and its implementations.

- :class:`BittensorChain` — the bittensor 11 SDK against a subtensor node;
- :class:`LocalChain` — the same SDK code against :class:`MemorySubstrate`, an in-memory
  chain for the arena and tests;
- the models they return (:class:`MetagraphView`, :class:`Commitment`,
  :class:`WeightsReceipt`) and their :class:`ChainConfig`.
"""

from template.chain.bittensor_chain import BittensorChain, typed_chain_error
from template.chain.client import ChainClient, ChainConfig
from template.chain.local import LocalChain
from template.chain.memory.state import SubnetParams, TimelockedCommit
from template.chain.memory.substrate import MemorySubstrate
from template.chain.model import Commitment, MetagraphView, NeuronView, WeightsReceipt

__all__ = [
    "BittensorChain",
    "ChainClient",
    "ChainConfig",
    "Commitment",
    "LocalChain",
    "MemorySubstrate",
    "MetagraphView",
    "NeuronView",
    "SubnetParams",
    "TimelockedCommit",
    "WeightsReceipt",
    "typed_chain_error",
]
