"""Reference policies: agents whose behaviour is known, for measuring arenas, judges and filters.

Honest ones (``careful``, ``careful_terse``, ``trial_and_error``), lazy ones (``greedy``),
narrators whose reasoning does not drive their calls (``narrator``, ``narrator_quoting``), a
bluffer that shops on the surface and recommends the cheapest product it opened while claiming
every requirement holds (``bluffer``), a cheat that solves tasks offline with the catalog in
hand (``offline``), and agents that never succeed (``guesser``, ``random``). Two attacks on
curation are played by name only: a paraphrasing sybil that copies the careful shopper's
decisions (``paraphraser``) and a liar that varies its plan and claims every requirement
holds of a pick it never checked (``liar``); copies of the careful shopper that must not be
paid twice (``copycat`` word for word, ``padder`` with one more view of its pick); and a
vandal whose first turn's arguments are built to break every reader (``vandal``). Two more
are made by name for clarify requests: ``presumer``, the careful shopper that never asks the
shopper, and ``interrogator``, which asks about everything. All see
only the messages and the tool schemas, and are deterministic for a seed.
"""

from shopbench.agents.reference.bluffer import BlufferPolicy
from shopbench.agents.reference.careful import (
    CarefulPolicy,
    CarefulTersePolicy,
    InterrogatorPolicy,
    PresumerPolicy,
)
from shopbench.agents.reference.copies import CopycatPolicy, PadderPolicy
from shopbench.agents.reference.first_hit import FilteredFirstHitPolicy, FirstHitPolicy
from shopbench.agents.reference.greedy import GreedyPolicy
from shopbench.agents.reference.guesser import GuesserPolicy, RandomPolicy
from shopbench.agents.reference.liar import LiarPolicy
from shopbench.agents.reference.narrator import NarratorPolicy, NarratorQuotingPolicy
from shopbench.agents.reference.offline import OfflinePolicy
from shopbench.agents.reference.paraphraser import ParaphraserPolicy
from shopbench.agents.reference.script import ScriptedPolicy
from shopbench.agents.reference.trial import TrialAndErrorPolicy
from shopbench.agents.reference.vandal import VandalPolicy

__all__ = [
    "BlufferPolicy",
    "CarefulPolicy",
    "CarefulTersePolicy",
    "CopycatPolicy",
    "FilteredFirstHitPolicy",
    "FirstHitPolicy",
    "GreedyPolicy",
    "GuesserPolicy",
    "InterrogatorPolicy",
    "LiarPolicy",
    "NarratorPolicy",
    "NarratorQuotingPolicy",
    "OfflinePolicy",
    "PadderPolicy",
    "ParaphraserPolicy",
    "PresumerPolicy",
    "RandomPolicy",
    "ScriptedPolicy",
    "TrialAndErrorPolicy",
    "VandalPolicy",
]
