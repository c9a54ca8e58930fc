"""The judge interface: what every process judge promises, and the verdict it returns.

A judge reads one trajectory — the task query, the environment's tool log (facts the
validator executed itself) and the agent's messages (claims, untrusted) — and returns a
:class:`Verdict`: a process score in [0, 1], which gates passed, the evidence behind each
criterion, and the judge's id and version. Judges are consensus parameters: every validator
running the same judge version and rubric version on the same trajectory must produce the
same verdict.

:class:`~shopbench.records.verdict.Verdict` is the one verdict model: what a judge
returns is what ``Trajectory.judge`` holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict


@runtime_checkable
class Judge(Protocol):
    """A process judge. Deterministic judges must give equal verdicts for equal inputs.

    `judge` accepts a :class:`~shopbench.records.trajectory.Trajectory` or a raw record (a mapping,
    e.g. a JSON line of an archive) and never raises for anything inside it: missing fields,
    empty messages, oversized text or calls that never ran are judged on what is there, with
    the reason in :attr:`Verdict.notes`.
    """

    id: str
    version: str

    def judge(self, trajectory: Trajectory | Mapping[str, Any]) -> Verdict:
        """The verdict on one trajectory."""
        ...
