"""The type checker over shopbench/ and template/, a step of its own before the suite
(``scripts/test.sh`` runs it; ``.ci/run`` runs that): no file has more mypy errors than its
baseline.

``tests/data/mypy_baseline.json`` holds each file's count of mypy errors (configuration in
pyproject.toml's ``[tool.mypy]``); the strict modules listed there are held to none. A
change may lower a count (then lower the baseline: ``python scripts/typecheck.py --update``),
never raise one or add a file. Exit status 0 when every file is within its baseline, 1 when
one is not (the new errors printed), 2 when mypy could not run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "data" / "mypy_baseline.json"
_ERROR = re.compile(r"^(?P<file>[^:\s]+\.py):\d+(?::\d+)?: error: ")


class MypyDidNotRun(RuntimeError):
    """mypy is missing or crashed: no verdict on the types."""


def mypy_errors() -> tuple[Counter[str], list[str]]:
    """(errors per file, the error lines) of a mypy run over the configured files."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir",
         str(ROOT / ".mypy_cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if done.returncode not in (0, 1) or "No module named mypy" in done.stderr:
        raise MypyDidNotRun(f"mypy did not run (exit {done.returncode}): {done.stderr[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if _ERROR.match(line)]
    counts: Counter[str] = Counter()
    for line in lines:
        m = _ERROR.match(line)
        assert m is not None
        counts[m.group("file")] += 1
    return counts, lines


def worse_than_baseline(counts: Counter[str], baseline: dict[str, int]) -> dict[str, int]:
    """The files whose error count is above their baseline (a new file's baseline is 0)."""
    return {f: n for f, n in counts.items() if n > baseline.get(f, 0)}


def main(argv: list[str]) -> int:
    if argv not in ([], ["--update"]):
        print("usage: python scripts/typecheck.py [--update]", file=sys.stderr)
        return 2
    try:
        counts, lines = mypy_errors()
    except MypyDidNotRun as e:
        print(e, file=sys.stderr)
        return 2
    if argv == ["--update"]:
        BASELINE.write_text(json.dumps(dict(sorted(counts.items())), indent=1) + "\n")
        print(f"baseline written: {sum(counts.values())} errors in {len(counts)} files")
        return 0
    worse = worse_than_baseline(counts, json.loads(BASELINE.read_text()))
    if worse:
        shown = [line for line in lines if line.split(":", 1)[0] in worse][:40]
        print(f"new type errors in {len(worse)} file(s) (count > baseline): {worse}",
              *shown, sep="\n", file=sys.stderr)  # fmt: skip
        return 1
    print(f"types: {sum(counts.values())} errors in {len(counts)} files, none above the "
          "baseline")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
