"""The judging layer's exception family.

:class:`JudgeError` is the root: a judge cannot be built (an unknown judge name, a rubric file
that does not load). The LLM judge's errors are :class:`LLMJudgeError` and its subclasses:
:class:`JudgeSpecError` is a configuration mistake (a malformed ``openai:MODEL@URL``, an
endpoint that names another model than the release's); the CLI prints it as one line.
:class:`JudgeUnavailable` says the judge could not give a verdict this time — endpoint down,
slow, rate-limited, a reply that is not a judgement, a server serving another model — and
what kind of failure it was; callers answer it with the rubric's verdict (a *fallback*).
:class:`Failure` is a failed endpoint request in those terms.
"""

from __future__ import annotations

from shopbench.errors import ShopbenchError
from shopbench.openai_compat.errors import EndpointFailure
from shopbench.records.verdict import LLMFailureKind

FailureKind = LLMFailureKind
"""The kinds of :class:`JudgeUnavailable`: what a fallback records (one list, in the records)."""


class JudgeError(ShopbenchError):
    """A judge cannot be built: an unknown judge name, a rubric file that does not load; the
    root of the judging layer's errors."""


class LLMJudgeError(JudgeError):
    """Base of the LLM judge's errors."""


class JudgeSpecError(LLMJudgeError):
    """A judge spec or configuration is malformed or breaks the release's pins."""


class JudgeUnavailable(LLMJudgeError):
    """No verdict this time; `kind` says why, `transient` whether a retry may help."""

    def __init__(self, kind: FailureKind, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.transient = transient


class Failure(JudgeUnavailable):
    """One failed request; `status` and `body` are the server's answer, when it gave one."""

    def __init__(self, failure: EndpointFailure) -> None:
        super().__init__(failure.kind, str(failure), transient=failure.transient)
        self.retry_after = failure.retry_after
        self.status = failure.status
        self.body = failure.body
