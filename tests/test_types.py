"""The type checker over shopbench/ and template/: no file has more errors than its baseline.

``tests/data/mypy_baseline.json`` holds each file's count of mypy errors (configuration in
pyproject.toml's ``[tool.mypy]``); the strict modules listed there are held to none. A
change may lower a count (then lower the baseline: ``python tests/test_types.py --update``),
never raise one or add a file.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "data" / "mypy_baseline.json"
_ERROR = re.compile(r"^(?P<file>[^:\s]+\.py):\d+(?::\d+)?: error: ")


def mypy_errors() -> tuple[Counter[str], list[str]]:
    """(errors per file, the error lines) of a mypy run over the configured files."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir",
             str(ROOT / ".mypy_cache")],
            cwd=ROOT, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
    except FileNotFoundError as e:  # pragma: no cover - the dev extra installs mypy
        pytest.fail(f"mypy cannot run: {e}")
    if done.returncode not in (0, 1) or "No module named mypy" in done.stderr:
        pytest.fail(f"mypy did not run (exit {done.returncode}): {done.stderr[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if _ERROR.match(line)]
    counts: Counter[str] = Counter()
    for line in lines:
        m = _ERROR.match(line)
        assert m is not None
        counts[m.group("file")] += 1
    return counts, lines


def test_no_file_has_more_type_errors_than_its_baseline() -> None:
    baseline: dict[str, int] = json.loads(BASELINE.read_text())
    counts, lines = mypy_errors()
    worse = {f: n for f, n in counts.items() if n > baseline.get(f, 0)}
    shown = [line for line in lines if line.split(":", 1)[0] in worse][:40]
    assert not worse, (
        f"new type errors in {len(worse)} file(s) (count > baseline): {worse}\n" + "\n".join(shown)
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_types.py --update   (writes the current counts)")
    found, _ = mypy_errors()
    BASELINE.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n")
    print(f"{sum(found.values())} errors in {len(found)} files written to {BASELINE}")
