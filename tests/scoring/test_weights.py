"""The weight curve and the per-uid EMA book: exact values, determinism, resets."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from shopbench.scoring.weights import ScoreBook, WeightCurve


def test_curve_values_follow_the_exponent() -> None:
    w = WeightCurve(exponent=2.0).weights({1: 0.5, 2: 0.25})
    assert w == {1: pytest.approx(0.8), 2: pytest.approx(0.2)}
    assert sum(w.values()) == pytest.approx(1.0)


def test_curve_is_winner_take_most_and_monotone_in_the_exponent() -> None:
    scores = {1: 0.6, 2: 0.5, 3: 0.3}
    shares = [WeightCurve(exponent=e).weights(scores)[1] for e in (1.0, 2.0, 4.0, 8.0)]
    assert shares == sorted(shares) and shares[0] < shares[-1]
    assert shares[-1] > 0.75  # a 20% lead is most of the weight at exponent 8
    top = WeightCurve(exponent=4.0).weights(scores)
    assert top[1] > top[2] > top[3]


def test_curve_is_deterministic_whatever_the_order() -> None:
    rng = random.Random(3)
    scores = {uid: rng.random() for uid in range(64)}
    curve = WeightCurve(exponent=5.0, burn=0.1)
    expected = curve.weights(scores)
    for _ in range(5):
        items = list(scores.items())
        rng.shuffle(items)
        assert curve.weights(dict(items)) == expected
    assert list(expected) == sorted(expected)


def test_ties_share_equally_and_zero_scores_get_nothing() -> None:
    w = WeightCurve(exponent=3.0).weights({4: 0.5, 7: 0.5, 9: 0.0, 11: -1.0})
    assert w == {4: 0.5, 7: 0.5}


def test_burn_goes_to_the_burn_uid() -> None:
    w = WeightCurve(exponent=1.0, burn=0.25).weights({0: 0.0, 1: 0.3, 2: 0.1})
    assert w == {0: pytest.approx(0.25), 1: pytest.approx(0.5625), 2: pytest.approx(0.1875)}
    assert WeightCurve(burn=0.25).weights({1: 0.0}) == {0: 1.0}
    assert WeightCurve().weights({1: 0.0, 2: 0.0}) == {}


def test_curve_refuses_out_of_range_parameters() -> None:
    with pytest.raises(ValidationError, match="exponent"):
        WeightCurve(exponent=0.5)
    with pytest.raises(ValidationError, match="burn"):
        WeightCurve(burn=1.5)


def test_ema_folds_rounds_with_alpha() -> None:
    book = ScoreBook()
    first = book.update(3, "hk-a", 1.0, alpha=0.5, episodes=8)
    assert first.ema == 0.5 and first.rounds == 1 and first.episodes == 8
    second = book.update(3, "hk-a", 0.0, alpha=0.5, episodes=8)
    assert second.ema == 0.25 and second.rounds == 2 and second.episodes == 16
    assert book.update(3, "hk-a", 7.0, alpha=0.5).ema == 0.625  # scores clip to [0, 1]


def test_ema_resets_when_the_uid_changes_hotkey() -> None:
    book = ScoreBook()
    book.update(2, "old", 1.0, alpha=0.5)
    book.update(5, "stays", 0.8, alpha=0.5)
    reset = book.observe({2: "new", 5: "stays"})
    assert reset == [2]
    assert book.miners[2].hotkey == "new" and book.miners[2].ema == 0.0
    assert book.miners[2].rounds == 0
    assert book.miners[5].ema == 0.4
    # The newcomer earns from zero, not from the predecessor's standing.
    assert book.update(2, "new", 1.0, alpha=0.5).ema == 0.5


def test_update_under_a_new_hotkey_also_starts_from_zero() -> None:
    book = ScoreBook()
    book.update(1, "a", 1.0, alpha=0.2)
    assert book.update(1, "b", 0.0, alpha=0.2).ema == 0.0


def test_deregistered_uids_are_forgotten() -> None:
    book = ScoreBook()
    book.update(1, "a", 1.0, alpha=0.2)
    book.update(2, "b", 1.0, alpha=0.2)
    book.observe({2: "b"})
    assert list(book.miners) == [2]
    assert book.emas([1, 2]) == {1: 0.0, 2: 0.2}


def test_book_round_trips_through_json() -> None:
    book = ScoreBook()
    book.update(9, "hk", 0.37, alpha=0.1, episodes=3)
    again = ScoreBook.model_validate_json(book.model_dump_json())
    assert again == book and again.miners[9].ema == book.miners[9].ema
