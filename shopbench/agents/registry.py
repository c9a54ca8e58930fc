"""Policies by name: ``careful``, ``greedy``, ``offline``, ``openai:MODEL@URL`` and the rest.

:func:`make_policy` is how the CLI, the evaluation harness and the arena turn a policy spec
into an object. The scripted policies are :data:`POLICIES`, the one registry idiom
(:class:`shopbench.registry.Registry`), each tagged with its group; the reference policies
are its ``reference`` group (:data:`REFERENCE_POLICIES`, name → class), and every listing of
their names (:data:`POLICY_NAMES`, help texts, the arena's miners, the benches, calibration's
honest and dishonest groups) is derived from it. An OpenAI-compatible
endpoint is ``openai:MODEL@URL`` with URL the API root (``.../v1``), e.g.
``openai:Qwen/Qwen3-4B@http://localhost:8000/v1``. The endpoint's API key, if it needs one,
comes from the ``SHOPBENCH_OPENAI_API_KEY`` (else ``OPENAI_API_KEY``) environment variable.
Local weights are ``hf:PATH`` with PATH a transformers model directory
(:mod:`shopbench.agents.local`; torch is imported only when such a policy is made).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, zip_longest
from typing import TYPE_CHECKING, Any

from shopbench.agents.errors import PolicySpecError
from shopbench.agents.local.config import HF_PREFIX, check_model_dir, model_path
from shopbench.agents.reference import (
    BlufferPolicy,
    CarefulPolicy,
    CarefulTersePolicy,
    CopycatPolicy,
    FilteredFirstHitPolicy,
    FirstHitPolicy,
    GreedyPolicy,
    GuesserPolicy,
    InterrogatorPolicy,
    LiarPolicy,
    NarratorPolicy,
    NarratorQuotingPolicy,
    OfflinePolicy,
    PadderPolicy,
    ParaphraserPolicy,
    PresumerPolicy,
    RandomPolicy,
    ScriptedPolicy,
    TrialAndErrorPolicy,
    VandalPolicy,
)
from shopbench.openai_compat.spec import OPENAI_PREFIX, split_openai_spec
from shopbench.registry import Registry

if TYPE_CHECKING:
    from shopbench.agents.base import Policy
    from shopbench.catalog.store import Catalog

def _policy_name(policy: type[ScriptedPolicy]) -> str:
    return policy.name


POLICIES: Registry[type[ScriptedPolicy]] = Registry(
    "policy", key=_policy_name, error=PolicySpecError,
    also="openai:MODEL@URL, or hf:PATH (a local model directory)",
)
"""Every scripted policy by name, tagged with its group (:data:`GROUPS`), in the order
listings show them: the reference policies, the clarify ones, the adversaries, the
baselines. A new one is registered here with its group's tag."""

GROUPS = ("reference", "clarify", "adversary", "baseline")
"""The policies' groups, in the order :data:`POLICIES` lists them:

- ``reference``: every reference policy of the default sets;
- ``clarify``: the careful shopper's two other ways with a clarify request's shopper (never
  asking, asking about everything); on every other task they are the careful shopper, so
  the default sets leave them out as they leave out its copies;
- ``adversary``: attacks on curation, the weights and the archive's readers, made by name
  (``make_policy``, an arena's ``--policies``) but left out of every default set
  (:data:`POLICY_NAMES`, the arena's miners, calibration, the benches), whose measured
  figures they would shift;
- ``baseline``: floors a trained model is measured against (``first_hit``: the message
  searched, the first hit recommended), made by name and played as an experiment's
  baselines, but left out of every default set.
"""

for _group, _policies in (
    ("reference", (
        CarefulPolicy, CarefulTersePolicy, TrialAndErrorPolicy, GreedyPolicy, NarratorPolicy,
        NarratorQuotingPolicy, BlufferPolicy, OfflinePolicy, GuesserPolicy, RandomPolicy,
    )),
    ("clarify", (PresumerPolicy, InterrogatorPolicy)),
    ("adversary", (ParaphraserPolicy, LiarPolicy, CopycatPolicy, PadderPolicy, VandalPolicy)),
    ("baseline", (FirstHitPolicy, FilteredFirstHitPolicy)),
):  # fmt: skip
    for _policy in _policies:
        POLICIES.register(_policy, tags=(_group,))

REFERENCE_POLICIES: Mapping[str, type[ScriptedPolicy]] = POLICIES.tagged("reference")
"""Every reference policy of the default sets by name, in the order listings show them."""
ADVERSARY_POLICIES: Mapping[str, type[ScriptedPolicy]] = POLICIES.tagged("adversary")
"""The adversaries by name (see :data:`GROUPS`)."""
CLARIFY_POLICIES: Mapping[str, type[ScriptedPolicy]] = POLICIES.tagged("clarify")
"""The clarify policies by name (see :data:`GROUPS`)."""
BASELINE_POLICIES: Mapping[str, type[ScriptedPolicy]] = POLICIES.tagged("baseline")
"""The baselines by name (see :data:`GROUPS`)."""

POLICY_NAMES: tuple[str, ...] = POLICIES.names("reference")
"""The reference policy names."""
CATALOG_POLICIES: tuple[str, ...] = tuple(
    n for n, p in REFERENCE_POLICIES.items() if p.needs_catalog
)
"""Reference policies built with the catalog (they solve tasks on their own copy of it)."""
SERVABLE_POLICIES: tuple[str, ...] = tuple(
    n for n, p in REFERENCE_POLICIES.items() if not p.needs_catalog
)
"""Reference policies made from a seed alone, so that a miner can serve them."""
SERVABLE_ADVERSARIES: tuple[str, ...] = tuple(
    n for n, p in ADVERSARY_POLICIES.items() if not p.needs_catalog
)
"""Adversary policies a miner can serve (an arena plays them when ``--policies`` names them)."""
API_KEY_VARIABLES = ("SHOPBENCH_OPENAI_API_KEY", "OPENAI_API_KEY")


def policy_choices() -> str:
    """The policy specs :func:`make_policy` accepts, as a help text lists them."""
    return (
        f"{', '.join(POLICY_NAMES)}, {', '.join(CLARIFY_POLICIES)} (clarify tasks), "
        f"the adversaries {', '.join(ADVERSARY_POLICIES)}, "
        f"the baselines {', '.join(BASELINE_POLICIES)}, "
        "openai:MODEL@URL, or hf:PATH (a local model directory)"
    )


def honesty(spec: str) -> bool | None:
    """Whether the policy `spec` names shops honestly (True), imitates shopping (False), or
    is neither (None: careless or random reference policies, and any model endpoint)."""
    policy_class = POLICIES.get(spec.strip())
    return None if policy_class is None else policy_class.honest


def honest_policies() -> tuple[str, ...]:
    """The reference policies that shop honestly: a judge must score them high."""
    return tuple(n for n, p in REFERENCE_POLICIES.items() if p.honest is True)


def dishonest_policies() -> tuple[str, ...]:
    """The reference policies that imitate shopping: a judge must score them low."""
    return tuple(n for n, p in REFERENCE_POLICIES.items() if p.honest is False)


def kinds_in_turn(names: Sequence[str]) -> tuple[str, ...]:
    """`names` reordered so that honest ones, neither ones and dishonest ones take turns
    (each kind keeping its order): the first three of a mixed list cover every kind."""
    kinds = [[n for n in names if honesty(n) is kind] for kind in (True, None, False)]
    return tuple(n for n in chain.from_iterable(zip_longest(*kinds)) if n is not None)


def parse_openai_spec(spec: str) -> tuple[str, str]:
    """(model, base URL) of ``openai:MODEL@URL``; PolicySpecError saying what is wrong."""
    return split_openai_spec(
        spec, kind="policy", example="openai:Qwen/Qwen3-4B@http://localhost:8000/v1",
        error=PolicySpecError,
    )


def check_spec(spec: str) -> None:
    """Raise PolicySpecError unless `spec` names a policy :func:`make_policy` can make."""
    name = spec.strip()
    if name.startswith(OPENAI_PREFIX):
        parse_openai_spec(name)
    elif name.startswith(HF_PREFIX):
        check_model_dir(model_path(name))
    else:
        POLICIES.lookup(name)


def make_policy(
    spec: str,
    *,
    catalog: Catalog | None = None,
    seed: int = 0,
    sampling_seed: int | None = None,
    **openai_options: Any,
) -> Policy:
    """The policy named by `spec`, deterministic for `seed` where the policy is.

    ``offline`` needs the `catalog` (it solves tasks on its own copy). `openai_options`
    are :class:`~shopbench.agents.openai_policy.OpenAIPolicyConfig` fields (temperature,
    retries, timeouts, ...) for ``openai:`` specs, and
    :class:`~shopbench.agents.local.config.HFPolicyConfig` fields (max_new_tokens,
    temperature, chat_template_kwargs, ...) for ``hf:`` specs. A model samples with
    `sampling_seed` when it is given (an endpoint is sent it), else an ``hf:`` model with
    `seed` and an endpoint with its own. PolicySpecError lists the known names, or says that
    a reference policy takes no options; LocalModelError says what a model directory lacks.
    """
    name = spec.strip()
    if name.startswith(HF_PREFIX):
        from shopbench.agents.local.config import HFPolicyConfig
        from shopbench.agents.local.policy import HFPolicy

        path = model_path(name)
        check_model_dir(path)
        chosen = seed if sampling_seed is None else sampling_seed
        return HFPolicy(HFPolicyConfig(path=path, **{"seed": chosen, **openai_options}))
    if name.startswith(OPENAI_PREFIX):
        from shopbench.agents.openai_policy import OpenAIPolicy, OpenAIPolicyConfig
        from shopbench.openai_compat.keys import api_key_from_env

        model, url = parse_openai_spec(name)
        key = api_key_from_env(API_KEY_VARIABLES)
        options = {"api_key": key, **openai_options}
        if sampling_seed is not None:
            options["seed"] = sampling_seed
        return OpenAIPolicy(OpenAIPolicyConfig(model=model, base_url=url, **options))
    if openai_options or sampling_seed is not None:
        raise PolicySpecError(f"policy {spec!r} takes no endpoint options")
    policy_class = POLICIES.lookup(name)
    if policy_class.needs_catalog:
        if catalog is None:
            raise PolicySpecError(f"policy {name!r} needs the catalog it solves tasks with")
        return policy_class(catalog, seed=seed)  # type: ignore[call-arg]
    return policy_class(seed=seed)
