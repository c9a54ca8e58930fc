"""The LLM judge's entry point: build one from a spec.

```python
from shopbench.judging.llm.build import make_llm_judge

judge = make_llm_judge("openai:Qwen/Qwen3-32B@http://127.0.0.1:8000/v1")
verdict = judge.judge(trajectory)             # the Judge protocol; never raises
verdict = await judge.assess(trajectory)      # raises JudgeUnavailable instead of falling back
```

A spec is ``openai:MODEL@URL``, or several joined by commas for a median ensemble. Without
``override`` every endpoint must name the release's model (:data:`RELEASE`); local mode,
the arena and calibration pass ``override=True`` to judge with whatever model they name.
See :mod:`shopbench.judging.llm.judge` for what one judgement does, and
:mod:`shopbench.scoring.combine` for how validators use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from shopbench.errors import first_problem
from shopbench.judging.errors import JudgeSpecError
from shopbench.judging.llm.cache import DiskCache, VerdictCache
from shopbench.judging.llm.client import Sleep
from shopbench.judging.llm.config import (
    API_KEY_VARIABLES,
    SPEC_PREFIX,
    LLMJudgeConfig,
    parse_judge_spec,
)
from shopbench.judging.llm.judge import LLMJudge
from shopbench.judging.rubric.judge import load_rubric
from shopbench.openai_compat.keys import api_key_from_env


def is_llm_spec(spec: str) -> bool:
    """Whether `spec` names an LLM judge (``openai:...``) rather than a judge by name."""
    return spec.strip().startswith(SPEC_PREFIX)


def make_llm_judge(
    spec: str,
    *,
    rubric: str | Path | None = None,
    override: bool = False,
    cache_dir: str | Path | None = None,
    sleep: Sleep | None = None,
    **options: Any,
) -> LLMJudge:
    """The LLM judge of `spec` (``openai:MODEL@URL[,openai:MODEL@URL...]``).

    `rubric` is a rubric file (default: the packaged one); `override` lifts the release's
    model pin (local mode, arena, calibration); `cache_dir` keeps verdicts on disk (default:
    in memory); `options` are :class:`LLMJudgeConfig` fields (``quorum``, ``deadline_s``,
    ``retries``, ``release``...). The bearer token comes from the first set of
    ``SHOPBENCH_JUDGE_API_KEY``, ``SHOPBENCH_OPENAI_API_KEY``, ``OPENAI_API_KEY``.
    Raises :class:`JudgeSpecError` for a malformed spec or option, naming it.
    """
    endpoints = parse_judge_spec(spec, api_key_from_env(API_KEY_VARIABLES))
    try:
        config = LLMJudgeConfig(endpoints=endpoints, override=override, **options)
    except ValidationError as e:
        raise JudgeSpecError(f"judge {spec!r}: {first_problem(e, default='judge')}") from None
    cache: VerdictCache | None = DiskCache(cache_dir) if cache_dir is not None else None
    return LLMJudge(config, rubric=load_rubric(rubric), cache=cache, sleep=sleep)
