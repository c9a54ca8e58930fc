"""The house's layering holds: the import contracts in pyproject.toml, checked on the real code.

The contracts say that nothing in the domain imports the subnet layer or bittensor, that no
package inside shopbench imports a later stage of the data flow, that there is no
package-level cycle, and that agents never import graders or task gold data.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "pyproject.toml"


def _contracts() -> list[dict]:
    return tomllib.loads(CONFIG.read_text())["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    from importlinter.cli import lint_imports

    code = lint_imports(config_filename=str(CONFIG), no_cache=True)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 broken" in out


def test_every_package_of_the_domain_has_a_place_in_the_layers() -> None:
    # A new package outside the layers contract would escape the one-way rule.
    layers = next(c for c in _contracts() if c["type"] == "layers" and "containers" not in c)
    named = {m.strip() for layer in layers["layers"] for m in layer.split("|")}
    packages = {
        f"shopbench.{p.stem}"
        for p in (ROOT / "shopbench").iterdir()
        if (p / "__init__.py").exists() or (p.suffix == ".py" and p.stem != "__init__")
    }
    assert packages - named == set(), f"add these to the layers in {CONFIG.name}"
