"""The deployment files start the entry commands the project declares and the tests run, with
settings the neurons take, under process managers that restart a validator that exits 0."""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from shopbench.settings import settings
from template.base.config import ValidatorConfig, ValidatorNeuronConfig, validator_config
from template.deploy.config import UpdaterConfig, updater_config
from template.deploy.entry import UPDATER_SCRIPT, VALIDATOR_SCRIPT

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VALIDATOR_VARS = {s.env for s in settings(ValidatorConfig, frozenset({"consensus"}))}
UPDATER_VARS = {s.env for s in settings(UpdaterConfig)}


def _interpolate(text: str, given: dict[str, str]) -> str:
    """Compose's ``${VAR:-default}`` and ``${VAR:?message}``: `given` values, else defaults."""

    def one(m: re.Match[str]) -> str:
        name, op, rest = m.group(1), m.group(2), m.group(3)
        if name in given:
            return given[name]
        assert op == ":-", f"compose needs ${name} set: {rest}"
        return _interpolate(rest, given)

    return re.sub(r"\$\{(\w+)(:[-?])((?:[^{}]|\$\{[^}]*\})*)\}", one, text)


def _compose(**given: str) -> dict[str, Any]:
    text = _interpolate((DEPLOY / "compose.yaml").read_text(), {"HOME": "/home/v", **given})
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_the_entry_scripts_run_and_take_the_long_running_settings() -> None:
    for script, flags in (
        (VALIDATOR_SCRIPT, ["--neuron.restart_file", "--logging.file", "--logging.max_mb",
                            "--logging.backups"]),
        (UPDATER_SCRIPT, ["--every", "--update.repo", "--update.reinstall",
                          "--neuron.restart_file", "--neuron.full_path"]),
    ):  # fmt: skip
        done = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert [f for f in flags if f not in done.stdout] == [], script


def test_the_image_runs_the_validator_with_the_subnet_extra_and_no_torch() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    joined = text.replace("\\\n", " ")
    (entry,) = re.findall(r"^ENTRYPOINT (\[.*\])$", joined, re.M)
    assert json.loads(entry) == ["python", VALIDATOR_SCRIPT]
    installs = [ln for ln in joined.splitlines() if "pip install" in ln]
    extras = {e for ln in installs for e in re.findall(r"\.\[([\w,]+)\]", ln)}
    assert extras == {"subnet"}
    assert "optional-dependencies']['subnet']" in joined  # the dependency layer: the same set
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["subnet"]
    assert [d for d in wanted if re.match(r"torch\b", d)] == []  # nothing pulls a CUDA build
    # The build context keeps environments and caches out (the image is the code only).
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests"} <= set(ignored)


def test_compose_runs_the_validator_and_an_updater_that_only_requests_restarts() -> None:
    compose = _compose(NETUID="7", WALLET_NAME="v1")
    services = compose["services"]
    validator, updater = services["validator"], services["updater"]
    for service in (validator, updater):
        assert service["restart"] == "unless-stopped"  # exit 0 for a restart: started again
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert "..:/app" in service["volumes"]  # the checkout the updater moves
    assert "entrypoint" not in validator  # the image's: python neurons/validator.py
    assert updater["entrypoint"] == ["python", UPDATER_SCRIPT]
    # The settings given are settings the neurons take, and the two agree on the request file.
    env = {k: str(v) for k, v in validator["environment"].items()}
    assert set(env) <= VALIDATOR_VARS
    v = validator_config([], env=env)
    assert (v.netuid, v.wallet.name, v.wallet.path) == (7, "v1", "/wallets")
    u = updater_config(updater["command"], env=updater["environment"])
    assert u.update.reinstall == "" and u.update.every == 300  # nothing installed in there
    assert u.restart_path == v.restart_path == Path("/data/restart-request.json")
    state = {m for s in (validator, updater) for m in s["volumes"] if m.endswith(":/data")}
    assert len(state) == 1  # one state volume: the file written is the file watched
    # Prometheus scrapes the validator's metrics port with the alert rules.
    prometheus = services["prometheus"]
    assert "./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in prometheus["volumes"]
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    (job,) = config["scrape_configs"]
    assert job["static_configs"][0]["targets"] == [f"validator:{v.neuron.metrics_port}"]
    alerts = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    assert f'up{{job="{job["job_name"]}"}}' in alerts


def _unit(name: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((DEPLOY / "systemd" / name).read_text())
    return unit


def test_systemd_restarts_the_validator_on_any_exit_and_times_the_updater() -> None:
    validator = _unit("shopbench-validator.service")["Service"]
    python, script, *rest = shlex.split(validator["ExecStart"])
    assert (script, rest) == (VALIDATOR_SCRIPT, [])
    assert python == f"{validator['WorkingDirectory']}/.venv/bin/python"
    assert validator["Restart"] == "always"  # not on-failure: a requested restart exits 0
    updater = _unit("shopbench-updater.service")["Service"]
    python_u, script_u, *rest_u = shlex.split(updater["ExecStart"])
    assert (python_u, script_u, rest_u) == (python, UPDATER_SCRIPT, [])  # one pass per start
    assert updater["Type"] == "oneshot"
    assert updater["WorkingDirectory"] == validator["WorkingDirectory"]
    assert updater["EnvironmentFile"] == validator["EnvironmentFile"]  # the same restart file
    timer = _unit("shopbench-updater.timer")
    assert timer["Timer"]["OnUnitActiveSec"] and timer["Install"]["WantedBy"] == "timers.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_reads_the_units(tmp_path: Path) -> None:
    for unit in (DEPLOY / "systemd").iterdir():
        shutil.copy(unit, tmp_path / unit.name)
    done = subprocess.run(
        ["systemd-analyze", "verify", *sorted(str(p) for p in tmp_path.iterdir())],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # The one complaint allowed: the checkout's Python is not installed on this machine.
    problems = [ln for ln in done.stderr.splitlines()
                if ln.strip() and "/opt/shopbench/.venv/bin/python is not executable" not in ln]
    assert problems == []


def _pm2_apps() -> list[dict[str, Any]]:
    """The apps pm2 reads: the config file evaluated by node, as pm2 does."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: pm2's config file cannot be evaluated")
    done = subprocess.run(
        [node, "-e", "console.log(JSON.stringify(require(process.argv[1])))",
         str(DEPLOY / "pm2" / "ecosystem.config.js")],
        capture_output=True, text=True, timeout=60, check=True,
        env={**os.environ, "NETUID": "5"},  # the file refuses to start without one
    )  # fmt: skip
    apps: list[dict[str, Any]] = json.loads(done.stdout)["apps"]
    return apps


def test_pm2_runs_both_scripts_from_the_checkout_with_its_python() -> None:
    apps = {a["name"]: a for a in _pm2_apps()}
    validator, updater = apps["shopbench-validator"], apps["shopbench-updater"]
    for app in (validator, updater):
        assert app["cwd"] == str(ROOT) and app["interpreter"] == str(ROOT / ".venv/bin/python")
        assert app["autorestart"] is True
    assert (validator["script"], validator["args"]) == (VALIDATOR_SCRIPT, [])
    assert set(validator["env"]) <= VALIDATOR_VARS
    assert validator_config([], env=validator["env"]).netuid == 5
    assert updater["script"] == UPDATER_SCRIPT
    u = updater_config(updater["args"], env=updater["env"])
    assert set(updater["env"]) <= UPDATER_VARS and u.update.every == 300
    assert u.restart_path == validator_config([], env=validator["env"]).restart_path
    # pm2's SIGINT must outwait the validator's stop (the round abandoned, the archive closed).
    assert validator["kill_timeout"] >= 30_000


def test_the_updater_defaults_to_the_validators_own_restart_file() -> None:
    assert UpdaterConfig().restart_path == validator_config(["--netuid", "1"], env={}).restart_path
    assert UpdaterConfig().neuron.full_path == ValidatorNeuronConfig().full_path
