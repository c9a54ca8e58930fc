"""How a shopper names a product: short, drawn from the title, the same for a seed."""

from __future__ import annotations

import random

import pytest

from shopbench.tasks.describe import (
    LITERAL,
    PhraseOdds,
    findable_phrase,
    leaf_words,
    shopper_phrase,
)
from shopbench.tasks.queries import product_phrase

HELMET = "Hot Sale Damaris Sports Lightweight Plug-in Durable Cycling Helmet"
KNIFE = "Ysolde Kitchen Durable Restaurant Grade Santoku Damascus Steel Kitchen Knife"


def phrases(title: str, n: int = 200, **kw: object) -> list[str]:
    rng = random.Random(7)
    return [shopper_phrase(title, rng, **kw) for _ in range(n)]  # type: ignore[arg-type]


def test_the_noun_always_stays_and_the_brand_only_sometimes() -> None:
    got = phrases(HELMET, brand="Damaris Sports", leaf="Bike Helmets & Lights")
    assert all(p.endswith("cycling helmet") for p in got)
    with_brand = sum(p.startswith("Damaris Sports ") for p in got) / len(got)
    assert 0.15 < with_brand < 0.45  # the default odds keep the brand 30% of the time
    assert all(len(p.split()) < len(product_phrase(HELMET).split()) for p in got)
    assert len(set(got)) > 5  # descriptions vary
    assert not any("hot" in p.lower() or "sale" in p.lower() for p in got)  # noise stays out


def test_runs_of_the_leaf_stay_together() -> None:
    words = leaf_words("Kitchen Knives")
    assert ("restaurant", "grade") in words.units  # a describing word of the leaf
    for p in phrases(KNIFE, brand="Ysolde Kitchen", leaf="Kitchen Knives"):
        assert ("restaurant" in p) == ("grade" in p)
        assert ("damascus" in p) == ("damascus steel" in p)


def test_same_seed_same_phrase_and_literal_odds_give_the_product_phrase() -> None:
    a = shopper_phrase(KNIFE, random.Random(3), brand="Ysolde Kitchen", leaf="Kitchen Knives")
    b = shopper_phrase(KNIFE, random.Random(3), brand="Ysolde Kitchen", leaf="Kitchen Knives")
    assert a == b
    assert shopper_phrase(KNIFE, random.Random(3), odds=LITERAL) == product_phrase(KNIFE)


def test_an_unknown_leaf_falls_back_to_the_last_word_and_a_dropped_answer_never_shows() -> None:
    title = "Arborea Hybrid ghost crash cymbals cymbal B20 cast bronze"
    odds = PhraseOdds(brand=1.0, modifier=0.0, min_modifiers=0)
    assert shopper_phrase(title, random.Random(1), leaf="Cymbals?", odds=odds) == "bronze"
    for p in phrases(title, drop="cast bronze", leaf="Cymbals?"):
        assert "bronze" not in p and p  # the last word left is the noun


@pytest.mark.parametrize("title", ["Retro Shades", "Polarized"])
def test_short_titles_are_kept_whole(title: str) -> None:
    assert shopper_phrase(title, random.Random(1)) == product_phrase(title)


def test_a_word_is_said_once() -> None:
    title = "Pyra Neckband Gaming Bluetooth Long Battery Life Gaming Headset"
    for p in phrases(title, brand="Pyra", leaf="Headphones"):
        words = p.split()
        assert len(words) == len(set(words)), p


def test_a_description_that_finds_nothing_says_more() -> None:
    full = product_phrase(HELMET)
    asked: list[str] = []

    def finds_only_the_full_phrase(phrase: str) -> bool:
        asked.append(phrase)
        return phrase == full

    kw = {"brand": "Damaris Sports", "leaf": "Bike Helmets & Lights"}
    got = findable_phrase(HELMET, random.Random(2), finds_only_the_full_phrase, **kw)
    assert got == full and asked[-1] == full and len(asked) >= 2
    assert len(asked[0].split()) < len(full.split())  # the drawn one came first
    # When the drawn description finds the product, it is the one kept.
    first = findable_phrase(HELMET, random.Random(2), lambda p: True, **kw)
    assert first == asked[0]
    # When nothing finds it, the fullest is returned (the generator then drops the draft).
    assert findable_phrase(HELMET, random.Random(2), lambda p: False, **kw) == full


def test_a_run_led_by_for_goes_after_the_noun() -> None:
    title = "Plexa RGB Plug and Play For Laptop Mouse"
    odds = PhraseOdds(brand=0.0, modifier=1.0, max_modifiers=5)
    assert shopper_phrase(title, random.Random(1), brand="Plexa", leaf="Mice", odds=odds) == (
        "RGB plug and play mouse for laptop"
    )


def test_no_word_ends_a_sentence_inside_a_description() -> None:
    title = "Bexley Pet Co. Odor Control Premium Cat Tree"
    odds = PhraseOdds(brand=1.0)
    got = shopper_phrase(title, random.Random(1), brand="Bexley Pet Co.", odds=odds)
    assert got.startswith("Bexley Pet Co ") and "." not in got
