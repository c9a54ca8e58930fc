"""Judges by name: ``rubric`` (the packaged rubric judge) or ``openai:MODEL@URL`` (an LLM judge).

:func:`make_judge` is how the CLI, calibration and the validator turn a judge spec into a
:class:`~shopbench.judging.judge.Judge`.
"""

from __future__ import annotations

from shopbench.judging.errors import JudgeError
from shopbench.judging.judge import Judge

JUDGES: tuple[str, ...] = ("rubric",)
"""Judge names :func:`make_judge` knows."""


def make_judge(name: str = "rubric", rubric: str | None = None) -> Judge:
    """The judge called `name`; `rubric` is a rubric file (default: the release's, v2).

    Raises :class:`JudgeError` naming the allowed judges for an unknown name.
    """
    if name.strip().startswith("openai:"):
        from shopbench.judging.llm.build import make_llm_judge

        # Offline use (calibration, `judge show`): the spec names its model explicitly.
        return make_llm_judge(name, rubric=rubric, override=True)
    if name == "rubric":
        from shopbench.judging.rubric.judge import RubricJudge, load_rubric

        return RubricJudge(load_rubric(rubric))
    raise JudgeError(
        f"unknown judge {name!r}; allowed: {', '.join(JUDGES)}, or openai:MODEL@URL"
    )
