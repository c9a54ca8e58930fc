"""The archive's query filters: what they accept, and the error for what they do not."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from shopbench.archive.errors import FilterError
from shopbench.archive.filters import BIGINT_MAX, MAX_LIMIT, TIME_MAX, TIME_MIN, TraceFilter


def test_cli_text_becomes_typed_filters() -> None:
    f = TraceFilter.parse({
        "intent": "product, shop", "miner_uid": "3,4", "success": "true", "score_min": "0.5",
        "since": "1700000000", "until": "2025-01-02", "termination": "terminated",
        "cluster": None,
    })  # fmt: skip
    assert f.intent == ["product", "shop"] and f.miner_uid == [3, 4]
    assert f.success is True and f.score_min == 0.5 and f.cluster is None
    assert f.since == datetime.fromtimestamp(1_700_000_000, tz=UTC)
    assert f.until == datetime(2025, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"intent": "product,shoes"}, ["--intent", "'shoes'", "'product'", "'knowledge'"]),
        ({"termination": "crashed"}, ["--termination", "'crashed'", "'turn_limit'"]),
        ({"success": "maybe"}, ["--success", "true, false"]),
        ({"score_min": "high"}, ["--score-min", "'high'", "number"]),
        ({"since": "yesterday"}, ["--since", "ISO 8601", "unix seconds"]),
        ({"miner_uid": "1,a"}, ["--miner-uid", "'a'", "integer"]),
        ({"block_min": "10", "block_max": "5"}, ["--block-min 10", "--block-max 5"]),
        ({"limit": "0"}, ["--limit"]),
        ({"episode_id": "0e99b903,a b"}, ["--episode-id", "'a b'", "pattern"]),
        ({"colour": "red"}, ["--colour", "--intent", "--score-min"]),
    ],
)
def test_a_malformed_filter_is_named_with_what_it_accepts(
    values: dict[str, str], names: list[str]
) -> None:
    with pytest.raises(FilterError) as e:
        TraceFilter.parse(values)
    for name in names:
        assert name in str(e.value)


FLOAT_FILTERS = (
    "score_min", "score_max", "rule_score_min", "rule_score_max", "judge_score_min",
    "judge_score_max", "slow_turn_ms", "since", "until",
)  # fmt: skip
NON_FINITE = ("nan", "NaN", "inf", "-inf", "+Infinity", "-Infinity", "1e999", math.nan)


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("name", FLOAT_FILTERS)
def test_every_float_filter_refuses_a_non_finite_number(name: str, value: object) -> None:
    with pytest.raises(FilterError) as e:
        TraceFilter.parse({name: value})
    assert e.value.filter == name and "finite" in str(e.value)
    assert str(e.value).startswith(f"filter --{name.replace('_', '-')}: ")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("score_min", "-0.1"), ("score_max", "1.01"), ("rule_score_min", "-1"),
        ("rule_score_max", "2"), ("judge_score_min", "1.5"), ("judge_score_max", "-0.5"),
        ("slow_turn_ms", "-1"),
        ("since", "1e18"), ("since", "-1"), ("until", "253402300800"),
        ("since", "1969-12-31T23:59:59Z"), ("until", "9999-12-31T23:00:00-05:00"),
        ("since", "0001-01-01T00:00:00+01:00"),
        ("block_min", str(2**63)), ("block_max", "-1"), ("epoch_min", str(2**64)),
        ("epoch_max", str(2**63)), ("miner_uid", f"1,{2**63}"), ("miner_uid", "-1"),
        ("limit", str(2**31)), ("limit", str(2**63)),
    ],
)  # fmt: skip
def test_a_value_the_archive_cannot_hold_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(FilterError) as e:
        TraceFilter.parse({name: value})
    assert e.value.filter == name
    assert f"--{name.replace('_', '-')}" in str(e.value) and "refused" in str(e.value)
    if name in ("since", "until"):
        assert "1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z" in str(e.value)


def test_the_edges_of_each_range_are_accepted_and_times_come_back_in_utc() -> None:
    f = TraceFilter.parse({
        "score_min": "0", "score_max": "1", "judge_score_max": "1", "slow_turn_ms": "0",
        "since": "0", "until": "253402300799", "block_max": str(2**63 - 1),
        "miner_uid": f"0,{2**63 - 1}", "limit": str(2**31 - 1),
    })  # fmt: skip
    assert f.since == TIME_MIN and f.until == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert f.limit == MAX_LIMIT and f.miner_uid == [0, BIGINT_MAX]
    late = TraceFilter.parse({"until": "9999-12-31T18:59:59.999999-05:00"}).until
    assert late == TIME_MAX and late.utcoffset() == timedelta(0)


def test_the_cache_key_tells_every_two_filters_apart() -> None:
    raws: list[dict[str, str]] = [
        {}, {"score_min": "0"}, {"score_max": "0"}, {"score_min": "0.1"},
        {"rule_score_min": "0"}, {"slow_turn_ms": "0"}, {"miner_uid": "1,2"},
        {"miner_uid": "12"}, {"miner_uid": "2,1"}, {"cluster": "a,b"}, {"cluster": "a"},
        {"agent": "null"}, {"text": "null"}, {"text": "a,b"}, {"success": "false"},
        {"success": "true"}, {"since": "0"}, {"until": "0"}, {"block_min": "0"},
        {"epoch_min": "0"}, {"limit": "1"}, {"intent": "shop"}, {"termination": "terminated"},
    ]  # fmt: skip
    keys = [TraceFilter.parse(r).key() for r in raws]
    assert len(set(keys)) == len(keys)
    same_instant = ("2025-01-01T05:00:00+05:00", "2025-01-01T00:00:00Z", "1735689600")
    assert len({TraceFilter.parse({"since": s}).key() for s in same_instant}) == 1


def test_a_filter_copied_past_validation_gets_no_cache_key() -> None:
    unchecked = TraceFilter().model_copy(update={"score_min": math.nan})
    with pytest.raises(ValidationError):
        unchecked.key()
