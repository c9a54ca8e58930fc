"""The one percentile every bench reports: nearest rank, always one of the values."""

from __future__ import annotations

import random

import pytest

from shopbench.bench.stats import percentile

HUNDRED = [float(v) for v in range(1, 101)]  # 1..100: the k-th smallest is k


@pytest.mark.parametrize(
    ("q", "want"),
    [(0.0, 1.0), (0.01, 1.0), (0.07, 7.0), (0.5, 50.0), (0.505, 51.0), (0.9, 90.0),
     (0.99, 99.0), (0.999, 100.0), (1.0, 100.0)],
)
def test_the_q_quantile_of_one_hundred_values_is_the_ceil_q_n_th(q: float, want: float) -> None:
    assert percentile(HUNDRED, q) == want


def test_order_of_the_input_does_not_matter_and_it_is_left_alone() -> None:
    shuffled = HUNDRED.copy()
    random.Random(3).shuffle(shuffled)
    before = list(shuffled)
    assert [percentile(shuffled, q) for q in (0.5, 0.99)] == [50.0, 99.0]
    assert shuffled == before
    assert percentile(iter(shuffled), 0.5) == 50.0


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [([4.0], 0.5, 4.0), ([4.0], 0.99, 4.0), ([2.0, 1.0], 0.5, 1.0), ([2.0, 1.0], 0.51, 2.0),
     ([3.0, 1.0, 2.0], 0.5, 2.0), ([5.0, 5.0, 1.0], 0.99, 5.0)],
)
def test_small_samples_give_one_of_their_values(values: list[float], q: float, want: float) -> None:
    assert percentile(values, q) == want


def test_no_values_give_zero() -> None:
    assert percentile([], 0.5) == 0.0


@pytest.mark.parametrize("q", [-0.01, 1.5, 50.0])
def test_a_q_outside_zero_to_one_is_refused_naming_it(q: float) -> None:
    with pytest.raises(ValueError, match=f"between 0 and 1, got {q!r}"):
        percentile(HUNDRED, q)
