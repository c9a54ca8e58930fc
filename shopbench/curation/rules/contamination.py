"""``contamination``: a query that overlaps a test set's is dropped, and counted either way.

The test sets load once, before any work (:attr:`Rule.prepare`); what the overlap means and
its parameters are :mod:`shopbench.curation.contamination`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from shopbench.curation.contamination import ContaminationParams, TestSet
from shopbench.curation.registry import Episode, Rule


def load_test_sets(p: ContaminationParams) -> list[TestSet]:
    """The rule's test sets (none when it is off)."""
    return [TestSet.load(path, p) for path in p.test_sets] if p.enabled else []


def overlap(ep: Episode, p: ContaminationParams) -> Mapping[str, Any]:
    """The test sets the episode's query overlaps (``contaminated_by``) and the reason
    naming the worst overlap (``r_contamination``), both in one pass over the sets."""
    contaminated = []
    worst: tuple[float, str] = (0.0, "")
    for ts in ep.state.get("contamination", ()):
        match = ts.match(ep.t.query)
        if match is not None:
            contaminated.append(ts.name)
            share = max(match.contained, match.covered)
            worst = max(worst, (share, f"{ts.name} ({match.reason()})"))
    reason = f"query overlaps test set {worst[1]}" if contaminated else None
    return {"r_contamination": reason, "contaminated_by": contaminated}


CONTAMINATION = Rule(
    name="contamination", params=ContaminationParams, prepare=load_test_sets,
    features=overlap, reason_column="r_contamination",
    columns={"contaminated_by": pa.list_(pa.string())},
)  # fmt: skip
