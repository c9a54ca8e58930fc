"""The neurons' logs: stderr always, and a size-rotated file when ``--logging.file`` names one."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from template.base.config import validator_config
from template.base.neuron import NeuronError, configure_logging


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the root logger's handlers and level back after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def test_the_log_file_rotates_by_size_keeping_the_backups_asked_for(
    tmp_path: Path, root_logging: None
) -> None:
    log_file = tmp_path / "logs" / "validator.log"
    config = validator_config(
        ["--netuid", "1", "--logging.file", str(log_file), "--logging.max_mb", "0.002",
         "--logging.backups", "2"],
        env={},
    )  # fmt: skip
    stderr = io.StringIO()
    configure_logging(config.logging, stderr)
    log = logging.getLogger("template.validator")
    for i in range(200):
        log.info("round %d done", i, extra={"round": i})

    files = sorted(p.name for p in log_file.parent.iterdir())
    assert files == ["validator.log", "validator.log.1", "validator.log.2"]
    limit = int(0.002 * 1024 * 1024)
    for name in files:
        assert 0 < (log_file.parent / name).stat().st_size <= limit
    # The newest lines are in the live file, older ones in .1, the oldest kept in .2; each
    # line is one JSON object, as on stderr, and stderr kept every line.
    lines = {name: (log_file.parent / name).read_text().splitlines() for name in files}
    rounds = {name: [json.loads(x)["round"] for x in lines[name]] for name in files}
    assert rounds["validator.log"][-1] == 199
    assert max(rounds["validator.log.2"]) < min(rounds["validator.log.1"])
    assert max(rounds["validator.log.1"]) < min(rounds["validator.log"])
    assert sum(len(r) for r in rounds.values()) < 200  # the oldest went with the rotation
    on_stderr = [json.loads(x)["round"] for x in stderr.getvalue().splitlines()]
    assert on_stderr == list(range(200))


def test_without_a_file_the_log_goes_to_stderr_alone(tmp_path: Path, root_logging: None) -> None:
    stderr = io.StringIO()
    configure_logging(validator_config(["--netuid", "1", "--logging.format", "text"], env={})
                      .logging, stderr)  # fmt: skip
    logging.getLogger("template.validator").warning("weights not set")
    assert "WARNING template.validator: weights not set" in stderr.getvalue()
    assert [type(h) for h in logging.getLogger().handlers] == [logging.StreamHandler]


def test_a_log_file_that_cannot_be_opened_is_named(tmp_path: Path, root_logging: None) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    config = validator_config(["--netuid", "1"], env={
        "SHOPBENCH_LOGGING_FILE": str(blocker / "validator.log")
    })
    with pytest.raises(NeuronError, match=r"--logging.file .*not-a-folder/validator.log: cannot"):
        configure_logging(config.logging, io.StringIO())
