"""`shopbench arena`: a local chain, miner processes, the real validator, a leaderboard."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from shopbench.archive.jsonl import read_trajectories
from shopbench.archive.manifest import verify_manifest
from shopbench.archive.shards import iter_manifests
from shopbench.archive.signing import verify_trajectory
from shopbench.archive.store import load_embargo, read_store
from shopbench.arena.config import AddedMiner
from shopbench.arena.errors import ArenaError
from shopbench.catalog.layout import seed_hash
from shopbench.commands import arena as arena_command
from template.arena.run import validator_hotkey
from template.base.neuron import write_local_wallet
from template.signing import HotkeyVerifier

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

ROOT = Path(__file__).resolve().parents[2]


def cli() -> typer.Typer:
    app = typer.Typer()
    bench = typer.Typer()
    app.add_typer(bench, name="bench")
    arena_command.register(app, bench)
    return app


@pytest.fixture(scope="module")
def added_miner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A local-mode miner started by hand, allowing the arena validator: (URL, hotkey)."""
    tmp = tmp_path_factory.mktemp("added")
    wallet = write_local_wallet(tmp / "wallets", "my-miner")
    log = tmp / "miner.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "neurons" / "miner.py"), "--local", "--local.allow",
             validator_hotkey(), "--wallet.path", str(tmp / "wallets"), "--wallet.name",
             "my-miner", "--axon.ip", "127.0.0.1", "--axon.port", "0", "--agent.policy",
             "careful", "--neuron.clock.ntp_servers", ""],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip
    port = None
    for _ in range(600):
        lines = [x for x in log.read_text().splitlines() if '"serving"' in x]
        if lines:
            port = json.loads(lines[0])["port"]
            break
        assert proc.poll() is None, log.read_text()
        time.sleep(0.1)
    assert port is not None, log.read_text()
    yield f"http://127.0.0.1:{port}", wallet.hotkey.ss58_address
    proc.terminate()
    proc.wait(10)


def test_the_arena_runs_a_subnet_and_ranks_careful_above_guessers(
    added_miner: tuple[str, str], catalog_dir: Path, tmp_path: Path
) -> None:
    url, hotkey = added_miner
    out = tmp_path / "arena"
    result = CliRunner().invoke(
        cli(),
        ["arena", "--catalog", str(catalog_dir), "--seed", "7", "--miners", "3",
         "--policies", "careful,guesser,random", "--rounds", "2", "--tasks", "4",
         "--out", str(out), "--add-miner", f"{url}={hotkey}"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "leaderboard" in result.output
    report = json.loads((out / "arena.json").read_text())
    rows = report["miners"]
    assert [set(r) for r in rows] == [
        {"uid", "hotkey", "policy", "model", "episodes", "asr", "process_score", "ema",
         "weight", "copy_of"}
    ] * 4
    by_policy = {r["policy"]: r for r in rows}
    assert set(by_policy) == {"careful", "guesser", "random", "external:reference/careful"}
    assert all(r["episodes"] == 8 for r in rows)
    # The careful miners lead; the guesser and the random agent trail.
    assert {rows[0]["policy"], rows[1]["policy"]} == {"careful", "external:reference/careful"}
    assert {rows[2]["policy"], rows[3]["policy"]} == {"guesser", "random"}
    assert by_policy["careful"]["asr"] > 0.5 and by_policy["guesser"]["asr"] == 0.0
    assert sum(r["weight"] for r in rows) == pytest.approx(1.0, abs=1e-3)
    assert rows[0]["weight"] > rows[-1]["weight"]
    assert by_policy["external:reference/careful"]["hotkey"] == hotkey
    trajectories = list(read_trajectories(out / "trajectories.jsonl"))
    assert len(trajectories) == 2 * 4 * 4
    assert all(verify_trajectory(t, HotkeyVerifier()) for t in trajectories)
    assert {t.miner_hotkey for t in trajectories} == {r["hotkey"] for r in rows}
    # Each record names the model its miner's agent card named, under the signature.
    models = {r["hotkey"]: r["model"] for r in rows}
    assert set(models.values()) == {"reference/careful", "reference/guesser", "reference/random"}
    assert all(t.agent_model == models[t.miner_hotkey] for t in trajectories)
    # The JSONL is an export of the arena's store, whose shards the validator signed.
    stored = list(read_store(out / "archive"))
    assert sorted(t.episode_id for t in stored) == sorted(t.episode_id for t in trajectories)
    assert load_embargo(out / "archive").lifted  # a public seed: nothing embargoed
    manifests = [m for _, m in iter_manifests(out / "archive")]
    hotkey = report["validator"]["hotkey"]
    assert manifests and all(verify_manifest(m, HotkeyVerifier(), hotkey) for m in manifests)  # type: ignore[arg-type]
    assert [r["index"] for r in report["rounds"]] == [0, 1]
    # The validator committed its catalog's seed hash on the chain.
    assert report["catalog"]["commitment"] == f"sb1 c0:{seed_hash(7)}"
    # Each miner ran as its own process and logged as one.
    assert len(list((out / "logs").glob("miner-uid*.log"))) == 3
    # A second run into the same folder is refused before anything starts or is touched;
    # with --force it replaces the earlier run.
    kept = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    again = ["arena", "--catalog", str(catalog_dir), "--seed", "7", "--miners", "1",
             "--policies", "careful", "--rounds", "1", "--tasks", "1", "--out", str(out)]
    refused = CliRunner().invoke(cli(), again)
    assert isinstance(refused.exception, ArenaError)
    said = str(refused.exception)
    assert f"--out {out} holds an earlier run (archive/, trajectories.jsonl, " in said
    assert "--force" in said
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    forced = CliRunner().invoke(cli(), [*again, "--force", "--quiet"])
    assert forced.exit_code == 0, forced.output
    assert len(list(read_trajectories(out / "trajectories.jsonl"))) == 1


def test_print_hotkey_names_the_validator_a_local_miner_must_allow() -> None:
    result = CliRunner().invoke(cli(), ["arena", "--print-hotkey"])
    assert result.exit_code == 0
    assert result.output.strip() == validator_hotkey()


def test_bad_arena_options_are_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ArenaError, match="expected URL=HOTKEY"):
        AddedMiner.parse("http://127.0.0.1:8091")
    with pytest.raises(ArenaError, match="http://HOST:PORT"):
        AddedMiner.parse("ftp://x=" + "5" * 48)
    result = CliRunner().invoke(cli(), ["arena", "--policies", "careful,offline",
                                        "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2  # a usage error naming the flag
    assert "--policies" in result.output and "unknown policy 'offline'" in result.output
    no_time = CliRunner().invoke(cli(), ["arena", "--round-timeout", "0", "--out", str(tmp_path)])
    assert no_time.exit_code == 2 and "--round-timeout" in no_time.output
    wrong_seed = CliRunner().invoke(
        cli(), ["arena", "--catalog", str(tmp_path), "--out", str(tmp_path / "o"), "--miners", "0"]
    )
    assert isinstance(wrong_seed.exception, ArenaError)


def _commands(markdown: str) -> list[str]:
    """The command lines of a document's bash blocks, continuations joined."""
    lines: list[str] = []
    for block in markdown.split("```bash")[1:]:
        text = block.split("```")[0].replace("\\\n", " ")
        for line in text.splitlines():
            line = line.split("#")[0].strip()
            # A command substitution is a command of its own.
            lines += re.findall(r"\$\(([^)]*)\)", line)
            if rest := re.sub(r"\$\([^)]*\)", "", line).strip():
                lines.append(rest)
    return lines


def test_the_docs_use_only_real_flags() -> None:
    from shopbench.settings import settings
    from template.base.config import MinerConfig, ValidatorConfig

    root = typer.main.get_command(cli())
    assert isinstance(root, typer.core.TyperGroup)
    bench = root.commands["bench"]
    assert isinstance(bench, typer.core.TyperGroup)

    def click_flags(command: object) -> set[str]:
        return {o for p in command.params for o in p.opts}  # type: ignore[attr-defined]

    known = {
        "neurons/miner.py": {o.flag for o in settings(MinerConfig)} | {"--config", "--help"},
        "neurons/validator.py": {
            o.flag for o in settings(ValidatorConfig, frozenset({"consensus"}))
        } | {"--config", "--help"},
        "shopbench arena": click_flags(root.commands["arena"]),
        "shopbench bench validator": click_flags(bench.commands["validator"]),
    }
    checked = 0
    for doc in ("miner.md", "validator.md"):
        for line in _commands((ROOT / "docs" / doc).read_text()):
            for command, flags in known.items():
                if command in line:
                    for token in line.split():
                        if token.startswith("--"):
                            assert token.split("=")[0] in flags, f"{doc}: {command} {token}"
                            checked += 1
    assert checked > 20


def test_the_arena_alone_may_override_consensus_parameters() -> None:
    from shopbench.scoring.consensus import ConsensusConfig

    base = ConsensusConfig()
    changed = arena_command._consensus(base, 2.0, 0.25, 0.5)
    assert changed.curve.exponent == 2.0 and changed.curve.burn == 0.25
    assert changed.ema_alpha == 0.5 and changed.score == base.score
    assert arena_command._consensus(base, None, None, None) == base
    with pytest.raises(ArenaError, match="curve.burn"):
        arena_command._consensus(base, None, 2.0, None)


def test_the_serve_hint_runs_from_this_terminal_as_it_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from shopbench.commands.archive import serve_hint

    here = Path(sys.executable).parent / "shopbench"
    monkeypatch.setenv("PATH", str(here.parent))  # the environment activated
    assert serve_hint(Path("arena/archive")).startswith(
        "browse it: shopbench traces serve --root arena/archive"
    )
    monkeypatch.setenv("PATH", str(tmp_path))  # not activated: the path of the one running
    monkeypatch.chdir(tmp_path)
    assert serve_hint(Path("a")).startswith(f"browse it: {here} traces serve --root a")


def test_a_miner_process_is_given_absolute_paths_whatever_the_arena_was_run_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The miners run from the repository root: an hf: model and its options file named
    relative to where the arena was started reach them as absolute paths."""
    from template.arena.miners import MinerProcess

    monkeypatch.chdir(tmp_path)
    (tmp_path / "opts.json").write_text("{}\n")
    miner = MinerProcess(
        2, "hf:runs/tuned", tmp_path / "wallets", "m", validator_hotkey(),
        tmp_path / "logs" / "miner.log", policy_config=Path("opts.json"),
    )  # fmt: skip
    try:
        args = list(miner.process.args)  # type: ignore[arg-type]
    finally:
        miner.stop(grace_s=1.0)
    assert args[args.index("--agent.policy") + 1] == f"hf:{tmp_path / 'runs' / 'tuned'}"
    assert args[args.index("--agent.policy_config") + 1] == str(tmp_path / "opts.json")
    assert miner.policy == "hf:runs/tuned"  # the leaderboard names it as it was given


def test_the_validator_bench_refuses_an_unknown_intent_before_it_starts_anything() -> None:
    result = CliRunner().invoke(cli(), ["bench", "validator", "--intent", "nonsense"])
    assert result.exit_code == 2
    assert "--intent" in result.output and "unknown intent 'nonsense'" in result.output
