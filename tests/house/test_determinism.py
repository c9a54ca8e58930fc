"""Same seed, same bytes: what the reference policies write does not depend on the hash seed."""

from __future__ import annotations

import os
import subprocess
import sys

from shopbench.agents.reference.query_reading import requested_pairs

REQUEST = (
    "I'm looking for shampoo: salon quality shampoo — where the formulation hair color is "
    "shampoo, with concerns hair care color protection, where the color family is beige, "
    "bottle size: 400 ml, and in country origin hb philippines."
)
KEYS = {
    "formulation_hair_color", "concerns_hair_care", "color_family", "color", "bottle_size",
    "country_origin_hb", "material",
}
_PRINT = f"""
from shopbench.agents.reference.query_reading import requested_pairs
print(list(requested_pairs({REQUEST!r}, set({sorted(KEYS)!r}))))
"""


def test_requested_pairs_come_in_the_order_the_request_states_them() -> None:
    pairs = requested_pairs(REQUEST, KEYS)
    assert list(pairs) == [
        "formulation_hair_color", "concerns_hair_care", "color_family", "bottle_size",
        "country_origin_hb",
    ]
    assert pairs["color_family"] == "beige"  # "color" inside "color family" does not count


def test_requested_pairs_do_not_depend_on_the_hash_seed() -> None:
    seen = set()
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", _PRINT], capture_output=True, text=True, env=env, timeout=60
        )
        assert run.returncode == 0, run.stderr
        seen.add(run.stdout)
    assert len(seen) == 1
