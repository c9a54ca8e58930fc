"""Absurd `shopbench verify` inputs end in one line naming the flag and exit status 2,
before any archive is read or catalog built."""

from __future__ import annotations

from pathlib import Path

import pytest

from shopbench.cli import main


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--products", "1099511627776"], "--products must be between 1 and 9,000,000,000"),
        (["--products", "50", "--chunk-size", "99999999999"], "--chunk-size must be between"),
        (["--products", "50", "--workers", "100000"], "--workers must be between 1 and 256"),
        (["--products", "50", "--bank-per-intent", "1099511627776"], "'--bank-per-intent'"),
    ],
)
def test_an_absurd_input_is_one_line_and_exit_2(
    flags: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["verify", "--archive", str(tmp_path), "--seed", "1", "--quiet", *flags])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and "pydantic" not in err
    assert not list(tmp_path.iterdir())  # nothing built
