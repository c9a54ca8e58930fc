"""Policies by name: ``careful``, ``greedy``, ``offline``, ``openai:MODEL@URL`` and the rest.

:func:`make_policy` is how the CLI, the evaluation harness and the arena turn a policy spec
into an object. Reference policy names are listed in :data:`POLICY_NAMES`; an
OpenAI-compatible endpoint is ``openai:MODEL@URL`` with URL the API root (``.../v1``), e.g.
``openai:Qwen/Qwen3-4B@http://localhost:8000/v1``. The endpoint's API key, if it needs one,
comes from the ``SHOPBENCH_OPENAI_API_KEY`` (else ``OPENAI_API_KEY``) environment variable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shopbench.errors import ShopbenchError
from shopbench.openai_compat.spec import OPENAI_PREFIX, split_openai_spec

if TYPE_CHECKING:
    from shopbench.agents.base import Policy
    from shopbench.catalog.store import Catalog

POLICY_NAMES: tuple[str, ...] = (
    "careful",
    "careful_terse",
    "trial_and_error",
    "greedy",
    "narrator",
    "narrator_quoting",
    "offline",
    "guesser",
    "random",
)
API_KEY_VARIABLES = ("SHOPBENCH_OPENAI_API_KEY", "OPENAI_API_KEY")


class PolicySpecError(ShopbenchError):
    """A policy spec names no known policy, or an OpenAI spec is malformed."""


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
    elif name not in POLICY_NAMES:
        raise PolicySpecError(
            f"unknown policy {spec!r}; known: {', '.join(POLICY_NAMES)}, or openai:MODEL@URL"
        )


def make_policy(
    spec: str, *, catalog: Catalog | None = None, seed: int = 0, **openai_options: Any
) -> Policy:
    """The policy named by `spec`, deterministic for `seed` where the policy is.

    ``offline`` needs the `catalog` (it solves tasks on its own copy). `openai_options`
    are :class:`~shopbench.agents.openai_policy.OpenAIPolicyConfig` fields (temperature,
    retries, timeouts, ...) for ``openai:`` specs. PolicySpecError lists the known names.
    """
    name = spec.strip()
    if name.startswith(OPENAI_PREFIX):
        from shopbench.agents.openai_policy import OpenAIPolicy, OpenAIPolicyConfig
        from shopbench.openai_compat.keys import api_key_from_env

        model, url = parse_openai_spec(name)
        key = api_key_from_env(API_KEY_VARIABLES)
        options = {"api_key": key, **openai_options}
        return OpenAIPolicy(OpenAIPolicyConfig(model=model, base_url=url, **options))
    if openai_options:
        raise PolicySpecError(f"policy {spec!r} takes no endpoint options")
    if name == "offline":
        if catalog is None:
            raise PolicySpecError("policy 'offline' needs the catalog it solves tasks with")
        from shopbench.agents.reference.offline import OfflinePolicy

        return OfflinePolicy(catalog, seed=seed)
    from shopbench.agents.reference import SCRIPTED

    policy_class = SCRIPTED.get(name)
    if policy_class is None:
        raise PolicySpecError(
            f"unknown policy {spec!r}; known: {', '.join(POLICY_NAMES)}, or openai:MODEL@URL"
        )
    return policy_class(seed=seed)
