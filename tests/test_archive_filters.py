"""The archive's query filters: what they accept, and the error for what they do not."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shopbench.archive.filters import FilterError, TraceFilter


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
