"""The garbage collector's view of a curation run.

A run allocates millions of short-lived objects (a record's rows, dicts, models) beside
tens of thousands of long-lived ones made before the first record is read (the imported
modules, the config, the test sets' n-grams, the truth labels, DuckDB's and Arrow's
wrappers). Every full collection the allocations trigger walks the long-lived ones again,
which cost a run a tenth of its time and more as they grow. Frozen once the run is set
up, they are out of every collection's way; they are unfrozen when the run ends, so a
process that curates and goes on collects them as before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def settled_heap() -> Iterator[None]:
    """Collect once, freeze what survives for the block, unfreeze after it."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
