"""The episode score formula: SN15's success term plus a small partial credit."""

from __future__ import annotations

import itertools

import pytest
from pydantic import ValidationError

from shopbench.scoring.score import DEFAULT_FORMULA, ScoreFormula


def test_success_follows_sn15() -> None:
    f = DEFAULT_FORMULA
    assert f.score(True, 0.0) == 0.3
    assert f.score(True, 0.4) == pytest.approx(0.65)
    assert f.score(True, 0.8) == 1.0
    assert f.score(True, 1.0) == 1.0  # capped
    assert f.score(True, 0.9, rule=0.0) == 1.0  # a success ignores the rule score


def test_failure_gets_a_small_partial_credit_ordered_by_rule_and_process() -> None:
    f = DEFAULT_FORMULA
    assert f.score(False, 0.8, rule=1.0) == pytest.approx(0.1)
    assert f.score(False, 0.8, rule=0.5) == pytest.approx(0.05)
    assert f.score(False, 0.0, rule=0.5) == pytest.approx(0.015)
    assert f.score(False, 0.9, rule=0.0) == 0.0
    near, far = f.score(False, 0.9, rule=0.75), f.score(False, 0.9, rule=0.25)
    careful, careless = f.score(False, 0.9, rule=0.5), f.score(False, 0.1, rule=0.5)
    assert near > far and careful > careless


def test_every_success_outranks_every_failure() -> None:
    grid = [i / 10 for i in range(11)]
    worst_success = min(DEFAULT_FORMULA.score(True, q) for q in grid)
    best_failure = max(DEFAULT_FORMULA.score(False, q, r) for q, r in itertools.product(grid, grid))
    assert worst_success > best_failure


def test_out_of_range_inputs_are_clipped_and_bad_formulas_rejected() -> None:
    f = DEFAULT_FORMULA
    assert f.score(True, -1.0) == 0.3 and f.score(True, 7.0) == 1.0
    assert f.score(False, 1.0, rule=3.0) == pytest.approx(0.1)
    with pytest.raises(ValidationError, match="must be below floor"):
        ScoreFormula(partial=0.3)
    with pytest.raises(ValidationError):
        ScoreFormula(q_full=0.0)
    assert ScoreFormula(floor=0.2, slope=0.8, q_full=1.0).score(True, 0.5) == pytest.approx(0.6)
