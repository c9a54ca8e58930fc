"""Try a checkout before the validator restarts into it: ``python -m template.deploy.trial``.

Run by the updater in the new checkout, with the environment just installed for it. It
imports every entry script under ``neurons/`` and every module their ``main()`` imports
(the validator's whole start-up path, which the scripts import lazily), then runs
``neurons/validator.py --help``, the first thing a process manager's restart would run. Any
failure is one line on stderr and exit status 1, and the updater puts the checkout back: a
release that cannot start never gets a restart request.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

from template.deploy.entry import VALIDATOR_SCRIPT

HELP_TIMEOUT_S = 120.0


def lazy_imports(script: Path) -> list[str]:
    """The modules `script`'s ``main()`` imports, in order (SyntaxError when it does not
    parse)."""
    tree = ast.parse(script.read_text(encoding="utf-8"), filename=str(script))
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.module and not inner.level:
                    found.append(inner.module)
                elif isinstance(inner, ast.Import):
                    found += [alias.name for alias in inner.names]
    return list(dict.fromkeys(found))


def try_checkout(root: Path) -> str | None:
    """Why the checkout at `root` cannot start a validator, or None when it can."""
    validator = root / VALIDATOR_SCRIPT
    if not validator.is_file():
        return f"{VALIDATOR_SCRIPT} is missing"
    sys.path.insert(0, str(root))
    for script in sorted((root / "neurons").glob("*.py")):
        rel = script.relative_to(root).as_posix()
        try:
            spec = importlib.util.spec_from_file_location(f"_trial_{script.stem}", script)
            assert spec is not None and spec.loader is not None
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            for module in lazy_imports(script):
                importlib.import_module(module)
        except BaseException as e:  # noqa: BLE001 — whatever a broken release raises is the answer
            return f"{rel} does not import: {type(e).__name__}: {e}"
    argv = [sys.executable, VALIDATOR_SCRIPT, "--help"]
    try:
        done = subprocess.run(argv, cwd=root, capture_output=True, text=True,
                              timeout=HELP_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"`{VALIDATOR_SCRIPT} --help` ran past {HELP_TIMEOUT_S:g} s"
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-2:]
        return f"`{VALIDATOR_SCRIPT} --help` exited with status {done.returncode}: " + " | ".join(
            said
        )
    return None


def main() -> None:
    """Try the checkout in the current directory; exit 1 with the reason when it fails."""
    problem = try_checkout(Path.cwd())
    if problem is not None:
        print(problem, file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
