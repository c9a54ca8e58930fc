"""The one reader of API keys from the environment.

Each component names its own variables, in order of preference: the policy
``SHOPBENCH_OPENAI_API_KEY, OPENAI_API_KEY`` (:data:`shopbench.agents.registry.API_KEY_VARIABLES`),
the judge ``SHOPBENCH_JUDGE_API_KEY, SHOPBENCH_OPENAI_API_KEY, OPENAI_API_KEY``
(:data:`shopbench.judging.llm.config.API_KEY_VARIABLES`), the paraphraser
``SHOPBENCH_PARAPHRASE_KEY`` (:data:`shopbench.tasks.paraphrase.API_KEY_VARIABLES`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence


def api_key_from_env(
    variables: Sequence[str], env: Mapping[str, str] | None = None
) -> str | None:
    """The value of the first of `variables` set to a non-empty value, or None.

    Reads `env` when given, else the process environment.
    """
    source = os.environ if env is None else env
    return next((source[v] for v in variables if source.get(v)), None)
