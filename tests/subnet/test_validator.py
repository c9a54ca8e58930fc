"""The validator over real signed HTTP and the in-memory chain running the SDK's intents.

Miners are real miner apps (and hostile raw servers) on loopback ports; the chain is
``LocalChain`` over ``MemorySubstrate``; the catalog is the 2,000-product test catalog.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bittensor.intents.weights import normalize

from shopbench.agents.registry import make_policy
from shopbench.archive.signing import verify_trajectory
from shopbench.archive.store import read_store
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.scoring.combine import Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.round import score_round
from shopbench.settings import settings
from template.base.clock import ClockError, check_clock
from template.base.config import (
    ClockConfig,
    ValidatorConfig,
    ValidatorNeuronConfig,
    miner_config,
    validator_config,
)
from template.base.options import ConfigError
from template.base.rotation import (
    CatalogCommitment,
    CatalogRotator,
    RotationConfig,
    reveal_matches,
)
from template.base.state import RotationState
from template.base.validator import Validator
from template.chain import LocalChain, MemorySubstrate, SubnetParams
from template.protocol import AgentCard
from template.serve import BackgroundServer
from template.signing import HotkeyVerifier, LocalWallet
from template.transport import CallerGate, create_miner_app

NETUID = 3
SEED = 7  # the seed of the conftest catalog
VALIDATOR = LocalWallet.derive("test-validator")


class Subnet:
    """An in-memory subnet: owner (uid 0), validator (uid 1), then the miners, in order."""

    def __init__(self) -> None:
        self.substrate = MemorySubstrate()
        owner = LocalWallet.derive("test-owner")
        self.substrate.add_subnet(
            NETUID, owner.hotkey_ss58, owner.coldkey_ss58,
            SubnetParams(tempo=100, weights_rate_limit=1),
        )  # fmt: skip
        self.substrate.register(NETUID, owner.hotkey_ss58, owner.coldkey_ss58)
        self.substrate.register(
            NETUID, VALIDATOR.hotkey_ss58, VALIDATOR.coldkey_ss58, 10_000, validator_permit=True
        )

    def add_miner(self, wallet: LocalWallet, url: str) -> int:
        uid = self.substrate.register(NETUID, wallet.hotkey_ss58, wallet.coldkey_ss58)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        asyncio.run(LocalChain(self.substrate, wallet, NETUID).serve(host, int(port)))
        return uid

    def chain(self) -> LocalChain:
        return LocalChain(self.substrate, VALIDATOR, NETUID)


def reference_app(policy: str, name: str) -> Any:
    """A real miner app serving a reference policy to the test validator."""
    return create_miner_app(
        make_policy(policy, seed=1), AgentCard(model=f"reference/{policy}"),
        LocalWallet.derive(name).hotkey_ss58, CallerGate.allow({VALIDATOR.hotkey_ss58}),
    )  # fmt: skip


def raw_app(body: bytes, delay_s: float = 0.0) -> Callable[..., Any]:
    """A hostile miner: answers every request with `body` (after `delay_s`), no checks."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        if delay_s:
            await asyncio.sleep(delay_s)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


class ResettingServer:
    """Accepts connections and resets them (RST) without a reply."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def close(self) -> None:
        self.sock.close()


def config(tmp: Path, **neuron: Any) -> ValidatorConfig:
    settings: dict[str, Any] = {
        "full_path": str(tmp), "catalog_products": 2000, "catalog_rotation_epochs": 0,
        "intents": ["product", "shop"], "tasks_per_round": 4, "bank_per_intent": 4,
        "concurrency": 16, "turn_timeout_s": 5.0, "episode_timeout_s": 60.0,
        "round_timeout_s": 60.0, "min_round_interval_s": 0, "weights_interval_blocks": 10,
        "metrics_port": 0, "clock": ClockConfig(ntp_servers=[]),
    }  # fmt: skip
    settings.update(neuron)
    return ValidatorConfig(
        netuid=NETUID, neuron=ValidatorNeuronConfig(**settings), consensus=ConsensusConfig()
    )


def make_validator(
    subnet: Subnet, tmp: Path, catalog_dir: Path, clock: Callable[[], float] = time.monotonic,
    **neuron: Any,
) -> Validator:  # fmt: skip
    v = Validator(config(tmp, **neuron), subnet.chain(), VALIDATOR, clock=clock)
    v.rotator.adopt(catalog_dir, SEED, 2000, epoch=0)
    return v


def one_round(validator: Any) -> Any:
    """Start the validator, play one round, close it; the round's result."""

    async def go() -> Any:
        await validator.start()
        try:
            return await validator.run_round()
        finally:
            await validator.close()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def honest() -> Iterator[dict[str, BackgroundServer]]:
    """Reference miners served in this process: careful, greedy, guesser."""
    servers = {
        p: BackgroundServer(reference_app(p, f"test-miner-{p}")).start()
        for p in ("careful", "greedy", "guesser")
    }
    yield servers
    for s in servers.values():
        s.stop()


def test_every_miner_plays_the_same_tasks_and_scores_rank_the_policies(
    honest: dict[str, BackgroundServer], catalog_dir: Path, tmp_path: Path
) -> None:
    subnet = Subnet()
    uids = {p: subnet.add_miner(LocalWallet.derive(f"test-miner-{p}"), s.url)
            for p, s in honest.items()}  # fmt: skip
    validator = make_validator(subnet, tmp_path, catalog_dir)

    result = one_round(validator)
    by_uid = {m.uid: m for m in result.miners}
    assert sorted(by_uid) == sorted(uids.values())
    assert len(result.task_ids) == 4 and len(set(result.task_ids)) == 4
    archived = list(read_store(tmp_path / "archive"))
    assert len(archived) == 12 == result.archived
    tasks_of: dict[int, list[str]] = {}
    for t in archived:
        assert t.miner_uid is not None
        tasks_of.setdefault(t.miner_uid, []).append(t.task_id)
        assert t.validator_hotkey == VALIDATOR.hotkey_ss58 and t.judge is not None
        assert t.epoch == result.epoch and t.bucket is not None  # the live bank's rotation
        assert verify_trajectory(t, HotkeyVerifier())
    policy_of = {uid: p for p, uid in uids.items()}
    # Each record names the model of its miner's agent card, under the validator's signature.
    assert {(t.miner_uid, t.agent_model) for t in archived} == {
        (uid, f"reference/{policy_of[uid]}") for uid in uids.values()
    }
    assert {m.agent_model for m in result.miners} == {f"reference/{p}" for p in uids}
    for uid in uids.values():
        assert sorted(tasks_of[uid]) == sorted(result.task_ids)
        # The archived scores are score_round's, under the release's consensus bundle.
        mine = [t for t in archived if t.miner_uid == uid]
        judged = [Judgement(rubric=RubricJudge().judge(t)) for t in mine]
        again = score_round(str(uid), mine, judged, ConsensusConfig())
        assert [t.score for t in again.trajectories] == [t.score for t in mine]
        assert [t.judge for t in again.trajectories] == [t.judge for t in mine]
        assert again.template.factor == by_uid[uid].template_factor
    assert by_uid[uids["careful"]].score > by_uid[uids["greedy"]].score
    assert by_uid[uids["greedy"]].score > by_uid[uids["guesser"]].score
    assert by_uid[uids["guesser"]].asr == 0.0 and by_uid[uids["careful"]].asr > 0.5
    # The EMA moved by alpha times the round score, from zero.
    ema = validator.state.scores.miners[uids["careful"]].ema
    assert ema == pytest.approx(0.1 * by_uid[uids["careful"]].score, abs=1e-9)


def test_weights_land_through_the_sdk_intent_on_the_local_chain(
    honest: dict[str, BackgroundServer], catalog_dir: Path, tmp_path: Path
) -> None:
    subnet = Subnet()
    for p, s in honest.items():
        subnet.add_miner(LocalWallet.derive(f"test-miner-{p}"), s.url)
    validator = make_validator(subnet, tmp_path, catalog_dir)

    async def go() -> None:
        await validator.start()
        try:
            await validator.run_round()
        finally:
            await validator.close()

    asyncio.run(go())
    weights = validator.state.last_weights
    assert weights and sum(weights.values()) == pytest.approx(1.0)
    expected = validator.config.consensus.curve.weights(validator.state.scores.emas())
    assert weights == expected
    uids = sorted(weights)
    u16 = dict(zip(*normalize(uids, [weights[u] for u in uids]), strict=True))
    stored = subnet.substrate.stored_weights(NETUID)[1]
    assert stored == {u: v for u, v in u16.items() if v}
    assert validator.state.last_weight_block is not None


def test_a_uid_taken_over_by_a_new_hotkey_starts_from_zero(
    honest: dict[str, BackgroundServer], catalog_dir: Path, tmp_path: Path
) -> None:
    first = Subnet()
    uid_a = first.add_miner(LocalWallet.derive("test-miner-careful"), honest["careful"].url)
    first.add_miner(LocalWallet.derive("test-miner-greedy"), honest["greedy"].url)
    validator = make_validator(first, tmp_path, catalog_dir)
    # The same uid, now registered by another hotkey (the careful app answers for it too:
    # its allow-list is the validator, and the receiver check names the app's own hotkey,
    # so a fresh app is served for the newcomer).
    newcomer = LocalWallet.derive("test-miner-newcomer")
    with BackgroundServer(reference_app("careful", "test-miner-newcomer")) as server:
        second = Subnet()
        assert second.add_miner(newcomer, server.url) == uid_a
        second.add_miner(LocalWallet.derive("test-miner-greedy"), honest["greedy"].url)

        async def go() -> tuple[Any, Any]:
            await validator.start()
            try:
                await validator.run_round()
                before = validator.state.scores.miners[uid_a].model_copy()
                validator.chain = second.chain()
                r2 = await validator.run_round()
                return before, r2
            finally:
                await validator.close()

        before, r2 = asyncio.run(go())
    after = validator.state.scores.miners[uid_a]
    assert before.ema > 0 and before.rounds == 1
    assert after.hotkey == newcomer.hotkey_ss58 and after.rounds == 1
    score = next(m.score for m in r2.miners if m.uid == uid_a)
    assert after.ema == pytest.approx(0.1 * score, abs=1e-9)
    greedy = validator.state.scores.miners[uid_a + 1]
    assert greedy.rounds == 2


def test_hostile_miners_lose_their_episodes_with_reasons_and_the_round_completes(
    honest: dict[str, BackgroundServer], catalog_dir: Path, tmp_path: Path
) -> None:
    flood = {"message": {"role": "assistant", "tool_calls": [
        {"id": f"c{i}", "type": "function",
         "function": {"name": "find_product", "arguments": "{\"q\": \"x\"}"}}
        for i in range(20)]}}  # fmt: skip
    hostile = {
        "timeout": BackgroundServer(raw_app(b"{}", delay_s=30)).start(),
        "invalid": BackgroundServer(raw_app(b"<html>not json")).start(),
        "oversized": BackgroundServer(raw_app(b'"' + b"x" * 400_000 + b'"')).start(),
        "flood": BackgroundServer(raw_app(json.dumps(flood).encode())).start(),
    }
    resetting = ResettingServer()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there: an unreachable miner
    subnet = Subnet()
    try:
        uids = {
            "careful": subnet.add_miner(LocalWallet.derive("test-miner-careful"),
                                        honest["careful"].url),
            **{k: subnet.add_miner(LocalWallet.derive(f"test-hostile-{k}"), s.url)
               for k, s in hostile.items()},
            "reset": subnet.add_miner(LocalWallet.derive("test-hostile-reset"), resetting.url),
            "unreachable": subnet.add_miner(LocalWallet.derive("test-hostile-gone"), closed_url),
        }  # fmt: skip
        validator = make_validator(
            subnet, tmp_path, catalog_dir, turn_timeout_s=1.0, round_timeout_s=20.0
        )

        result = one_round(validator)
    finally:
        for s in hostile.values():
            s.stop(grace_s=0.1)
        resetting.close()
    by_uid = {m.uid: m for m in result.miners}
    expected = {"timeout": "timeout", "invalid": "invalid", "oversized": "oversized",
                "flood": "invalid", "reset": "connection", "unreachable": "connection"}  # fmt: skip
    for name, reason in expected.items():
        m = by_uid[uids[name]]
        assert m.failures.get(reason) == 4, (name, m.failures)
        assert m.score == 0.0 and m.successes == 0
        assert m.episodes == 4  # each failed episode is still recorded and archived
    assert by_uid[uids["careful"]].score > 0 and not by_uid[uids["careful"]].failures
    archived = list(read_store(tmp_path / "archive"))
    assert len(archived) == 4 * len(uids)
    reasons = {t.termination for t in archived if t.miner_uid == uids["timeout"]}
    assert reasons == {"policy_error"}
    metrics = validator.metrics.render().decode()
    for reason, n in (("timeout", 4), ("invalid", 8), ("oversized", 4), ("connection", 8)):
        assert f'shopbench_validator_failures_total{{reason="{reason}"}} {n}.0' in metrics
    assert 'shopbench_validator_episodes_total{outcome="failure"}' in metrics


def test_an_unreachable_chain_delays_weights_with_backoff_and_scoring_goes_on(
    honest: dict[str, BackgroundServer], catalog_dir: Path, tmp_path: Path
) -> None:
    subnet = Subnet()
    subnet.add_miner(LocalWallet.derive("test-miner-careful"), honest["careful"].url)
    now = [1000.0]
    validator = make_validator(subnet, tmp_path, catalog_dir, clock=lambda: now[0])

    async def go() -> list[Any]:
        await validator.start()
        try:
            rounds = [await validator.run_round()]
            first_block = validator.state.last_weight_block
            assert first_block is not None
            subnet.substrate.fail_next(1_000)  # the chain drops every call from here on
            now[0] += 13 * 12.0  # about 13 blocks later: weights are due again
            rounds.append(await validator.run_round())  # tried, failed: backing off
            assert validator.state.last_weight_block == first_block
            rounds.append(await validator.run_round())  # within the backoff: not tried
            subnet.substrate.fail_next(0)
            subnet.substrate.advance(20)
            rounds.append(await validator.run_round())  # the chain is back; backoff holds
            assert validator.state.last_weight_block == first_block
            now[0] += validator.config.neuron.chain_retry_s + 1
            rounds.append(await validator.run_round())
            assert validator.state.last_weight_block > first_block
            return rounds
        finally:
            await validator.close()

    rounds = asyncio.run(go())
    assert [r.index for r in rounds] == [0, 1, 2, 3, 4]
    assert all(r.miners and r.miners[0].episodes == 4 for r in rounds)
    metrics = validator.metrics.render().decode()
    assert 'shopbench_validator_weights_set_total{result="error"} 1.0' in metrics
    assert 'shopbench_validator_weights_set_total{result="ok"} 2.0' in metrics
    assert validator.state.round == 5


def test_catalog_rotation_commits_the_hash_then_reveals_the_seed(tmp_path: Path) -> None:
    subnet = Subnet()
    chain = subnet.chain()
    seeds = iter([111, 222])
    state = RotationState()
    rotator = CatalogRotator(
        state, RotationConfig(root=tmp_path / "catalogs", products=200, every_epochs=2, workers=1),
        new_seed=lambda: next(seeds),
    )  # fmt: skip

    async def go() -> tuple[Any, ...]:
        gen0 = await rotator.ensure_current(epoch=5)
        c0 = await rotator.publish(chain)
        on_chain = (await chain.read_commitments())[VALIDATOR.hotkey_ss58].data
        assert await rotator.publish(chain) is None  # nothing new to say
        assert not await rotator.step(6)  # not due until epoch 7
        assert not await rotator.step(7)  # due: the build starts in the background
        while rotator.building:
            await asyncio.sleep(0.02)
        switched = await rotator.step(8)
        c1 = await rotator.publish(chain)
        return gen0, c0, on_chain, switched, c1

    gen0, c0, on_chain, switched, c1 = asyncio.run(go())
    assert c0 is not None and c1 is not None and switched
    assert CatalogCommitment.parse(on_chain) == c0
    assert c0.generation == 0 and c0.revealed_seed is None
    assert c1.generation == 1 and c1.revealed_generation == 0 and c1.revealed_seed == 111
    assert reveal_matches(c0, c1)
    assert state.current is not None and state.current.seed == 222
    assert state.current.started_epoch == 8
    assert not Path(gen0.directory).exists()  # retired, and rebuildable from its seed
    from shopbench.catalog.store import build_catalog

    rebuilt = build_catalog(tmp_path / "rebuilt", 200, c1.revealed_seed, workers=1)
    assert rebuilt.manifest.seed_hash == c0.seed_hash
    assert len(c1.text().encode()) <= 128


def test_commitments_that_are_not_ours_do_not_parse() -> None:
    for text in ("", "sb1 c0:abc", "sb2 c1:" + "0" * 64, "hello"):
        with pytest.raises(ValueError, match="not a catalog commitment"):
            CatalogCommitment.parse(text)


# -- configuration ------------------------------------------------------------------------


def test_flags_beat_environment_beats_file(tmp_path: Path) -> None:
    file = tmp_path / "validator.toml"
    file.write_text("netuid = 5\n[neuron]\nconcurrency = 8\nsample_size = 3\n"
                    "[wallet]\nname = 'from-file'\n")  # fmt: skip
    env = {"SHOPBENCH_NEURON_CONCURRENCY": "16", "SHOPBENCH_WALLET_HOTKEY": "hk-env"}
    cfg = validator_config(["--config", str(file), "--neuron.concurrency", "32"], env=env)
    assert cfg.netuid == 5 and cfg.neuron.sample_size == 3
    assert cfg.neuron.concurrency == 32
    assert cfg.wallet.name == "from-file" and cfg.wallet.hotkey == "hk-env"
    assert validator_config(["--config", str(file)], env=env).neuron.concurrency == 16


def test_bad_values_name_their_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--neuron\.concurrency: .*greater than or equal to 1"):
        validator_config(["--netuid", "1", "--neuron.concurrency", "0"], env={})
    with pytest.raises(ConfigError, match=r"^SHOPBENCH_NETUID: .*integer"):
        validator_config([], env={"SHOPBENCH_NETUID": "three"})
    with pytest.raises(ConfigError, match=r"^--netuid: Field required"):
        validator_config([], env={})
    bad = tmp_path / "bad.json"
    bad.write_text('{"netuid": 1, "neuron": {"sampel_size": 3}}')
    with pytest.raises(ConfigError, match=r"bad\.json.*neuron\.sampel_size"):
        validator_config(["--config", str(bad)], env={})


def test_consensus_parameters_are_not_operator_settings(tmp_path: Path) -> None:
    settable = settings(ValidatorConfig, frozenset({"consensus"}))
    assert not any(o.path[0] == "consensus" for o in settable)
    with pytest.raises(SystemExit):
        validator_config(["--netuid", "1", "--consensus.ema_alpha", "0.5"], env={})
    with pytest.raises(ConfigError, match="SHOPBENCH_CONSENSUS_EMA_ALPHA.*fixed by the release"):
        validator_config(["--netuid", "1"], env={"SHOPBENCH_CONSENSUS_EMA_ALPHA": "0.5"})
    file = tmp_path / "v.toml"
    file.write_text("netuid = 1\n[consensus.curve]\nexponent = 9\n")
    with pytest.raises(ConfigError, match="consensus.curve.exponent is a consensus parameter"):
        validator_config(["--config", str(file)], env={})


def test_every_setting_has_help_and_a_variable() -> None:
    from template.base.config import MinerConfig

    for model, fixed in ((ValidatorConfig, frozenset({"consensus"})), (MinerConfig, frozenset())):
        for opt in settings(model, fixed):
            assert opt.info.description, f"{opt.flag} has no help text"
            assert opt.env.startswith("SHOPBENCH_")
    flags = {o.flag for o in settings(ValidatorConfig, frozenset({"consensus"}))}
    assert {"--netuid", "--subtensor.network", "--wallet.name", "--wallet.hotkey",
            "--wallet.path", "--neuron.concurrency"} <= flags  # fmt: skip
    miner_flags = {o.flag for o in settings(MinerConfig)}
    assert {"--axon.port", "--agent.base_url", "--agent.model", "--agent.policy", "--local",
            "--local.allow"} <= miner_flags  # fmt: skip
    cfg = miner_config(["--local", "--local.allow", "a,b", "--agent.policy", "careful"], env={})
    assert cfg.local.allow == ["a", "b"]


# -- the start-up clock check -------------------------------------------------------------


class FakeNtp:
    """An SNTP server on loopback whose clock is `skew_s` ahead of this machine's."""

    def __init__(self, skew_s: float) -> None:
        self.skew_s = skew_s
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                _, peer = self.sock.recvfrom(512)
            except OSError:
                return
            now = time.time() + self.skew_s + 2_208_988_800
            stamp = struct.pack("!II", int(now), int((now % 1) * 2**32))
            reply = bytes([0x1C]) + bytes(31) + stamp + stamp  # mode 4: server
            self.sock.sendto(reply, peer)

    def close(self) -> None:
        self.sock.close()


def test_a_skewed_clock_refuses_to_start_and_a_good_one_passes() -> None:
    fast, good = FakeNtp(skew_s=-30.0), FakeNtp(skew_s=0.0)
    try:
        with pytest.raises(ClockError, match=r"30\.\d s ahead of .*max_offset_s"):
            check_clock([fast.address], max_offset_s=2.0, timeout_s=2.0)
        report = check_clock([good.address], max_offset_s=2.0, timeout_s=2.0)
        assert report.offset_s is not None and abs(report.offset_s) < 0.5
    finally:
        fast.close()
        good.close()


def test_an_unanswered_clock_check_warns_and_starts(caplog: pytest.LogCaptureFixture) -> None:
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    try:
        report = check_clock([f"127.0.0.1:{silent.getsockname()[1]}"], 2.0, timeout_s=0.2)
    finally:
        silent.close()
    assert report.offset_s is None and report.errors
    assert "clock not verified" in caplog.text


def test_a_round_ends_on_time_and_cuts_what_could_not_start(
    catalog_dir: Path, tmp_path: Path
) -> None:
    hanging = BackgroundServer(raw_app(b"{}", delay_s=30)).start()
    subnet = Subnet()
    uid = subnet.add_miner(LocalWallet.derive("test-hostile-timeout"), hanging.url)
    validator = make_validator(
        subnet, tmp_path, catalog_dir, turn_timeout_s=1.0, round_timeout_s=1.5, concurrency=1
    )

    try:
        result = one_round(validator)
    finally:
        hanging.stop(grace_s=0.1)
    (m,) = result.miners
    assert m.uid == uid and m.tasks == 4 and m.score == 0.0
    assert m.failures.get("timeout", 0) >= 1  # the first episode waited out its turn
    assert m.failures.get("round_deadline", 0) >= 1  # the last could not start in time
    assert sum(m.failures.values()) == 4
    assert m.episodes == 4 - m.failures["round_deadline"]


def test_the_validator_entry_point_reports_a_missing_wallet_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, str(root / "neurons" / "validator.py"), "--netuid", "1",
         "--wallet.path", str(tmp_path), "--wallet.name", "nobody",
         "--neuron.full_path", str(tmp_path / "v"), "--neuron.clock.ntp_servers", ""],
        capture_output=True, text=True, cwd=root, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: --wallet.name nobody --wallet.hotkey default: no hotkey")


def test_validator_metrics_are_served_over_http() -> None:
    import httpx

    from template.base.metrics import ValidatorMetrics

    metrics = ValidatorMetrics()
    metrics.turns.inc(3)
    server = metrics.serve(0, "127.0.0.1")
    try:
        text = httpx.get(f"http://127.0.0.1:{server.server_port}/metrics").text
    finally:
        server.shutdown()
    assert "shopbench_validator_turns_total 3.0" in text


def recording(app: Any, seen: list[str]) -> Callable[..., Any]:
    """`app` behind a tap that keeps the ``episode_id`` of every ``POST /step`` body."""

    async def tapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/step":
            await app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        seen.append(json.loads(body)["episode_id"])
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return tapped


def with_card(app: Any, card: bytes) -> Callable[..., Any]:
    """`app` answering ``GET /card`` with `card` (unsigned, unchecked), every other request
    as itself: a miner that plays well and lies on its card."""
    lying = raw_app(card)

    async def served(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/card":
            await lying(scope, receive, send)
        else:
            await app(scope, receive, send)

    return served


def test_a_hostile_agent_card_costs_only_its_name_and_a_shown_one_is_kept_as_text(
    catalog_dir: Path, tmp_path: Path
) -> None:
    cards = {
        "bidi": {"model": "qwen\u202egnp.exe"},
        "long": {"model": "m" * 10_000},
        "newline": {"model": "a\nINFO forged log line"},
        "not-json": "<html>",
        "markup": {"model": "<script>alert(1)</script>[bold]x[/bold]", "revision": "r\"1"},
    }
    servers = {
        k: BackgroundServer(with_card(
            reference_app("careful", f"test-card-{k}"),
            (v if isinstance(v, str) else json.dumps(v)).encode(),
        )).start()
        for k, v in cards.items()
    }  # fmt: skip
    subnet = Subnet()
    try:
        uids = {k: subnet.add_miner(LocalWallet.derive(f"test-card-{k}"), s.url)
                for k, s in servers.items()}  # fmt: skip
        result = one_round(make_validator(subnet, tmp_path, catalog_dir))
    finally:
        for s in servers.values():
            s.stop(grace_s=0.1)
    by_uid = {m.uid: m for m in result.miners}
    archived = list(read_store(tmp_path / "archive"))
    assert len(archived) == 4 * len(cards)
    for name, uid in uids.items():
        mine = [t for t in archived if t.miner_uid == uid]
        assert by_uid[uid].episodes == 4 and by_uid[uid].score > 0, name  # played as ever
        assert all(verify_trajectory(t, HotkeyVerifier()) for t in mine)
        want = "<script>alert(1)</script>[bold]x[/bold]" if name == "markup" else None
        assert {t.agent_model for t in mine} == {want} and by_uid[uid].agent_model == want, name
    assert {t.agent_revision for t in archived if t.agent_model} == {'r"1'}


def test_the_episode_id_sent_to_the_miner_is_the_archived_one(
    catalog_dir: Path, tmp_path: Path
) -> None:
    seen: list[str] = []
    app = recording(reference_app("careful", "test-miner-recorded"), seen)
    with BackgroundServer(app) as server:
        subnet = Subnet()
        subnet.add_miner(LocalWallet.derive("test-miner-recorded"), server.url)
        result = one_round(make_validator(subnet, tmp_path, catalog_dir))
    archived = list(read_store(tmp_path / "archive"))
    assert len(archived) == result.archived == 4
    ids = {t.episode_id for t in archived}
    assert len(ids) == 4  # one fresh key per episode
    assert set(seen) == ids  # every turn of every episode named its archived id
    assert len(seen) == sum(t.turns for t in archived)


def test_the_validator_publishes_its_sealed_public_shards_and_keeps_the_live_bucket(
    honest: dict[str, BackgroundServer], catalog_dir: Path, tmp_path: Path
) -> None:
    from shopbench.archive.manifest import SHARD_GLOB, manifest_path
    from shopbench.archive.shards import write_shard
    from template.signing import HotkeySigner

    subnet = Subnet()
    subnet.add_miner(LocalWallet.derive("test-miner-careful"), honest["careful"].url)
    one_round(make_validator(subnet, tmp_path / "first", catalog_dir))
    earlier = next(iter(read_store(tmp_path / "first" / "archive")))
    # A shard sealed by an earlier run, of no live bucket: public.
    sealed = write_shard(
        [earlier.model_copy(update={"episode_id": "earlier", "epoch": None, "bucket": None})],
        tmp_path / "v" / "archive", signer=HotkeySigner.from_wallet(VALIDATOR),
    )  # fmt: skip
    dest = tmp_path / "bucket"
    validator = make_validator(
        subnet, tmp_path / "v", catalog_dir, archive_url=f"file://{dest}",
        archive_upload_interval_s=0.05,
    )  # fmt: skip
    result = one_round(validator)
    assert result.archived == 4
    root = tmp_path / "v" / "archive"
    assert (dest / sealed.path).read_bytes() == (root / sealed.path).read_bytes()
    assert (dest / manifest_path(sealed.path)).read_bytes() == sealed.to_bytes()
    # This round's episodes are of the bucket still being asked: sealed locally, never sent.
    assert len(list(root.glob(SHARD_GLOB))) > 1
    assert sorted(p.relative_to(dest) for p in dest.glob(SHARD_GLOB)) == [Path(sealed.path)]
    metrics = validator.metrics.render().decode()
    assert "shopbench_validator_uploaded_shards_total 1.0" in metrics
    assert "shopbench_validator_uploaded_episodes_total 1.0" in metrics
    assert "shopbench_validator_upload_failures_total 0.0" in metrics


def test_stopping_says_the_round_in_flight_and_what_it_leaves_unscored(
    honest: dict[str, BackgroundServer], catalog_dir: Path, tmp_path: Path
) -> None:
    subnet = Subnet()
    for p, server in honest.items():
        subnet.add_miner(LocalWallet.derive(f"test-miner-{p}"), server.url)
    said: list[str] = []
    validator = make_validator(subnet, tmp_path, catalog_dir, tasks_per_round=2)
    assert validator.stopping_line("SIGTERM") == (
        "SIGTERM: stopping between rounds; nothing is left unscored; no round was finished"
    )
    validator.on_episode = lambda uid, t: said.append(validator.stopping_line("SIGTERM"))
    one_round(validator)
    assert said[0].startswith("SIGTERM: stopping in round 0: 1 of its 6 episodes played, none")
    assert said[-1].startswith("SIGTERM: stopping in round 0: 6 of its 6 episodes played")
    assert validator.stopping_line("SIGINT") == (
        "SIGINT: stopping between rounds; nothing is left unscored; the state after round 0 "
        "is saved"
    )
