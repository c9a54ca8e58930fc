"""The type check's rule (``scripts/typecheck.py``, run before the suite): a file may have
fewer mypy errors than its baseline, never more, and a new file none; the registries and the
layers named strict are configured so."""

from __future__ import annotations

import importlib.util
import json
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _typecheck():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_count_above_its_baseline_or_a_new_file_with_errors_is_worse() -> None:
    check = _typecheck()
    baseline = {"a.py": 2, "b.py": 1}
    assert check.worse_than_baseline(Counter({"a.py": 2, "b.py": 0}), baseline) == {}
    assert check.worse_than_baseline(Counter({"a.py": 3}), baseline) == {"a.py": 3}
    assert check.worse_than_baseline(Counter({"new.py": 1}), baseline) == {"new.py": 1}
    assert check.main(["--bogus"]) == 2


def test_the_baseline_names_only_files_that_exist_and_strict_covers_the_registries() -> None:
    baseline = json.loads((ROOT / "tests" / "data" / "mypy_baseline.json").read_text())
    assert all((ROOT / f).is_file() for f in baseline), [f for f in baseline
                                                         if not (ROOT / f).is_file()]
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = {m for o in config["overrides"] if o.get("strict") for m in o["module"]}
    assert {"shopbench.chat", "shopbench.env.*", "shopbench.trajectory.*", "shopbench.scoring.*",
            "shopbench.traces.formats", "shopbench.tasks.intent_registry",
            "shopbench.curation.registry"} <= strict  # fmt: skip
    assert not any(f.startswith(("shopbench/chat", "shopbench/env/", "shopbench/scoring/",
                                 "shopbench/trajectory/")) for f in baseline)  # fmt: skip
