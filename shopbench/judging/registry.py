"""Judges by name: ``rubric`` (the packaged rubric judge) or ``openai:MODEL@URL`` (an LLM judge).

:func:`make_judge` is how the CLI, calibration and the validator turn a judge spec into a
:class:`~shopbench.judging.judge.Judge`. The named judges are :data:`JUDGES`, the one registry
idiom (:class:`shopbench.registry.Registry`) of factories, each given the rubric file;
``openai:`` specs are routed to the LLM judge before it is asked.
"""

from __future__ import annotations

from collections.abc import Callable

from shopbench.judging.errors import JudgeError
from shopbench.judging.judge import Judge
from shopbench.registry import Registry

JudgeFactory = Callable[[str | None], Judge]
"""Makes a judge from a rubric file (None: the release's)."""


def _rubric_judge(rubric: str | None) -> Judge:
    from shopbench.judging.rubric.judge import RubricJudge, load_rubric

    return RubricJudge(load_rubric(rubric))


JUDGES: Registry[JudgeFactory] = Registry("judge", error=JudgeError, also="openai:MODEL@URL")
"""Judge names :func:`make_judge` knows, each with its factory."""
JUDGES.register(_rubric_judge, name="rubric")


def make_judge(name: str = "rubric", rubric: str | None = None) -> Judge:
    """The judge called `name`; `rubric` is a rubric file (default: the release's, v2).

    Raises :class:`JudgeError` naming the allowed judges for an unknown name.
    """
    if name.strip().startswith("openai:"):
        from shopbench.judging.llm.build import make_llm_judge

        # Offline use (calibration, `judge show`): the spec names its model explicitly.
        return make_llm_judge(name, rubric=rubric, override=True)
    return JUDGES.lookup(name)(rubric)
