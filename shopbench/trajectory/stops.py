"""Every way an episode ends, declared once by name and checked in one place.

A stop condition is a function of the loop's state after a turn (and before the first)
that returns why the episode ends now — a detail for the record, ``""`` when there is none
to add — or None. Each is registered with :func:`stop` under the
:class:`~shopbench.records.trajectory.TerminationReason` it records, and
:func:`first_stop` checks them in the order they are declared here: the first that fires is
the record's ``termination``. The loop (:func:`~shopbench.trajectory.loop.run_episode`) has
no other exit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from shopbench.records.trajectory import FailureKind, TerminationReason

if TYPE_CHECKING:
    from shopbench.env.episode import EndReason, Episode


class Limits(Protocol):
    """The loop's limits the stop conditions read (:class:`~shopbench.trajectory.loop.
    RunLimits` has them)."""

    max_policy_failures: int
    max_idle_turns: int | None


@dataclass
class LoopState:
    """What the stop conditions read: the episode, the loop's limits, and its counters."""

    episode: Episode
    limits: Limits
    policy_failures: int = 0
    idle_turns: int = 0
    fault: tuple[FailureKind, str] | None = None  # the policy's failure on the last turn


Check = Callable[[LoopState], str | None]


class StopCondition(NamedTuple):
    """One named way an episode ends."""

    reason: TerminationReason
    check: Check
    ends: EndReason | None  # how the loop ends the episode (None: it has ended itself)


STOP_CONDITIONS: list[StopCondition] = []
"""Every stop condition, in the order :func:`first_stop` checks them."""


def stop(
    reason: TerminationReason, *, ends: EndReason | None = "aborted"
) -> Callable[[Check], Check]:
    """Register the decorated check as the condition that ends an episode with `reason`
    (`ends`: the end the loop gives the episode; None when the environment ended it)."""

    def register(check: Check) -> Check:
        if any(c.reason == reason for c in STOP_CONDITIONS):
            raise ValueError(f"a stop condition for {reason.value} is already declared")
        STOP_CONDITIONS.append(StopCondition(reason, check, ends))
        return check

    return register


def first_stop(state: LoopState) -> tuple[TerminationReason, str | None] | None:
    """(the reason, its detail or None) of the first condition that fires, having ended the
    episode as that condition says; None when the episode goes on."""
    for condition in STOP_CONDITIONS:
        detail = condition.check(state)
        if detail is not None:
            if condition.ends is not None:
                state.episode.end(condition.ends)
            return condition.reason, detail or None
    return None


def _policy_failed(kind: FailureKind) -> Check:
    def check(s: LoopState) -> str | None:
        if s.fault is None or s.fault[0] != kind:
            return None
        return s.fault[1] if s.policy_failures >= s.limits.max_policy_failures else None

    return check


@stop(TerminationReason.deadline)
def _deadline(s: LoopState) -> str | None:
    """The episode's time budget ran out (it ends the episode at the first such turn)."""
    return s.fault[1] if s.fault is not None and s.fault[0] == "deadline" else None


stop(TerminationReason.policy_error)(_policy_failed("policy_error"))
stop(TerminationReason.policy_timeout)(_policy_failed("policy_timeout"))
stop(TerminationReason.invalid_reply)(_policy_failed("invalid_reply"))


@stop(TerminationReason.no_progress)
def _no_progress(s: LoopState) -> str | None:
    """Too many turns in a row without a tool call that ran."""
    cap = s.limits.max_idle_turns
    if cap is None or s.idle_turns < cap:
        return None
    return f"{s.idle_turns} turns in a row without a tool call that ran"


@stop(TerminationReason.terminated, ends=None)
def _terminated(s: LoopState) -> str | None:
    """The agent called terminate."""
    return "" if s.episode.end_reason == "terminated" else None


@stop(TerminationReason.turn_limit, ends="max_turns")
def _turn_limit(s: LoopState) -> str | None:
    """The turn budget is spent (the environment's limit)."""
    e = s.episode
    return "" if e.end_reason == "max_turns" or e.turn >= e.limits.max_turns else None
