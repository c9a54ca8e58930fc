"""Field-by-field differences between what a record holds and what a replay produced."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from shopbench.chat import clip

SHORT = 80
"""Characters a value is cut to in a report."""
ABSENT = "(absent)"


def short(value: Any, limit: int = SHORT) -> str:
    """`value` as compact JSON (a string as itself), cut to `limit` characters."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError):
            text = repr(value)
    return clip(text, limit)


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python; a record's bool and a replay's int are not the same value.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def differences(expected: Any, got: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """(field path, expected, got) for every leaf where the two JSON values differ: objects
    key by key (a missing key is :data:`ABSENT`), lists element by element."""
    if type(expected) is type(got) and expected == got:
        return  # the common case, without the walk (both sides are dumps of one model)
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in [*expected, *(k for k in got if k not in expected)]:
            a, b = expected.get(key, ABSENT), got.get(key, ABSENT)
            yield from differences(a, b, f"{path}.{key}" if path else str(key))
        return
    if isinstance(expected, list) and isinstance(got, list):
        for i in range(max(len(expected), len(got))):
            a = expected[i] if i < len(expected) else ABSENT
            b = got[i] if i < len(got) else ABSENT
            yield from differences(a, b, f"{path}[{i}]")
        return
    if not _same(expected, got):
        yield path, expected, got
