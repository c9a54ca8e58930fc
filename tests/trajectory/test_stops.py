"""Every way an episode ends is one named stop condition, checked in one place."""

from __future__ import annotations

import pytest

from shopbench.records.trajectory import TerminationReason
from shopbench.trajectory.stops import STOP_CONDITIONS, stop


def test_every_termination_reason_has_exactly_one_stop_condition() -> None:
    names = [c.reason for c in STOP_CONDITIONS]
    assert sorted(names) == sorted(TerminationReason)
    assert len(set(names)) == len(names)


def test_a_second_condition_for_a_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="already declared"):
        stop(TerminationReason.deadline)(lambda s: None)


def test_failures_end_the_episode_before_the_turn_cap_and_terminate_before_it_too() -> None:
    order = [c.reason for c in STOP_CONDITIONS]
    assert order.index(TerminationReason.deadline) < order.index(TerminationReason.turn_limit)
    assert order.index(TerminationReason.terminated) < order.index(TerminationReason.turn_limit)
