"""The local arena: a whole subnet on one machine, with one command (``shopbench arena``).

It builds (or reuses) a catalog, writes wallets into a temporary wallet path, starts a
:class:`~template.chain.LocalChain` (the SDK's own intents over an in-memory chain),
registers the subnet owner (uid 0, the burn uid), one validator (uid 1) and the miners,
starts each miner as its own ``neurons/miner.py`` process in local mode on a loopback port
with a reference policy (plus any ``--add-miner URL=HOTKEY``, e.g. a local-mode miner in
front of a model), publishes their addresses on chain, and runs the real validator over
real signed HTTP for the given rounds. It ends with a leaderboard and writes ``arena.json``
the archive store (``archive/``, opened with the embargo lifted: the seed is public) and
the signed trajectories exported from it as ``trajectories.jsonl`` to the output directory.

Everything in the arena is public — the catalog seed and the keys derive from fixed names —
which is what makes it reproducible, and why nothing in it is worth anything.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from shopbench.agents.local.config import HF_PREFIX
from shopbench.archive.annotations.model import ANNOTATIONS_DIR
from shopbench.archive.jsonl import TRAJECTORIES_FILE
from shopbench.archive.store import ArchiveStore, EmbargoPolicy, read_store
from shopbench.arena.config import ArenaConfig, MinerRow
from shopbench.arena.errors import ArenaError
from shopbench.catalog.errors import CatalogError
from shopbench.catalog.layout import read_manifest, seed_hash
from shopbench.errors import ShopbenchError
from shopbench.records.task import INTENTS
from template.arena.miners import MinerProcess, wait_all_ready
from template.arena.view import ArenaObserver, QuietView
from template.base.config import (
    ClockConfig,
    ValidatorConfig,
    ValidatorNeuronConfig,
)
from template.base.round import RoundResult
from template.base.state import STATE_FILE
from template.signing import HotkeySigner, LocalWallet

OWNER, VALIDATOR = "arena-owner", "arena-validator"
OWNER_UID, VALIDATOR_UID = 0, 1
ARENA_JSON = "arena.json"
__all__ = ["Arena", "run_arena", "validator_hotkey"]


def validator_hotkey() -> str:
    """The arena validator's hotkey (derived from a fixed name): what a local-mode miner
    added with ``--add-miner`` must allow."""
    return LocalWallet.derive(VALIDATOR).hotkey_ss58


def _catalog(config: ArenaConfig, view: ArenaObserver) -> Path:
    """The catalog directory, built when it is not there yet."""
    directory = config.catalog_dir()
    if config.catalog is not None:
        try:
            manifest = read_manifest(directory)
        except CatalogError as e:
            raise ArenaError(f"--catalog: {e}") from None
        if manifest.seed_hash != seed_hash(config.seed):
            raise ArenaError(f"--catalog {directory} was not built from --seed {config.seed}")
        view.stage(f"catalog {directory} ({manifest.n_products} products)")
        return directory
    from shopbench.catalog.store import build_catalog

    def build() -> None:
        view.catalog_start(config.products)
        build_catalog(
            directory, config.products, config.seed, workers=config.workers,
            progress=view.catalog_advance,
        )  # fmt: skip

    try:
        build()
    except ShopbenchError as e:
        if not (directory / "manifest.json").exists():
            raise
        # A cached build this shopbench can no longer read (an older index format, say):
        # the cache is ours, so it is rebuilt rather than reported.
        view.stage(f"cached catalog {directory} unusable ({e}); rebuilding it")
        shutil.rmtree(directory)
        build()
    view.stage(f"catalog {directory} ({config.products} products, seed {config.seed})")
    return directory


ARCHIVE_DIR = "archive"
"""The arena's archive store, under the output directory."""


def _export_jsonl(root: Path, path: Path) -> None:
    """Write every trajectory of the store at `root` to `path`, one JSON object a line."""
    with path.open("w") as f:
        for t in read_store(root):
            f.write(t.model_dump_json() + "\n")


def _validator_config(config: ArenaConfig, state_dir: Path) -> ValidatorConfig:
    per_intent = -(-config.tasks_per_round // len(INTENTS))
    neuron = ValidatorNeuronConfig(
        full_path=str(state_dir), archive_dir=str(config.out / ARCHIVE_DIR),
        catalog_products=config.products,
        catalog_rotation_epochs=0, epoch_blocks=1_000_000, tasks_per_round=config.tasks_per_round,
        bank_per_intent=per_intent * config.rounds, concurrency=config.concurrency,
        turn_timeout_s=config.turn_timeout_s, episode_timeout_s=config.round_timeout_s,
        round_timeout_s=config.round_timeout_s, min_round_interval_s=0,
        weights_interval_blocks=config.blocks_per_round, metrics_port=0,
        clock=ClockConfig(ntp_servers=[]),
    )  # fmt: skip
    consensus = config.consensus
    if config.judge is not None:
        from shopbench.judging.llm.config import parse_judge_spec
        from template.base.config import LLMJudgeSection

        endpoints = parse_judge_spec(config.judge)
        pins: dict[str, object] = {"model": endpoints[0].model, "revision": ""}
        if config.judge_budget is not None:
            pins["prompt_budget_tokens"] = config.judge_budget
        consensus = consensus.model_copy(
            update={"llm_judge": consensus.llm_judge.model_copy(update=pins)}
        )
        neuron = neuron.model_copy(update={"llm_judge": LLMJudgeSection(
            urls=[e.base_url for e in endpoints], sample_rate=config.judge_rate,
        )})
    return ValidatorConfig(netuid=config.netuid, neuron=neuron, consensus=consensus)


class Arena:
    """One arena run; use :func:`run_arena`."""

    def __init__(self, config: ArenaConfig, view: ArenaObserver | None = None) -> None:
        self.config = config
        self.view = view or QuietView()
        self.policies: dict[int, str] = {}
        self.processes: list[MinerProcess] = []
        self.wallets: dict[int, Any] = {}
        self.rounds: list[RoundResult] = []
        self._wallets = Path(tempfile.mkdtemp(prefix="shopbench-arena-wallets-"))

    def _start_miners(self, vhotkey: str) -> None:
        from template.base.neuron import write_local_wallet

        cfg = self.config
        options = cfg.policy_options
        options_file = None
        if options.model_options_given():
            options_file = cfg.out / "logs" / "policy-options.json"
            options_file.parent.mkdir(parents=True, exist_ok=True)
            given = options.without("seed").model_dump(mode="json", exclude_unset=True)
            options_file.write_text(json.dumps(given, indent=2) + "\n")
        for i in range(cfg.miners):
            uid = VALIDATOR_UID + 1 + i
            policy = cfg.policies[i % len(cfg.policies)]
            name = f"arena-miner-{i + 1}"
            model = policy.startswith(HF_PREFIX)
            # Each model miner samples with its own seed: the options' seed offset by its uid.
            seed = uid + (options.seed or 0) if model else uid
            self.wallets[uid] = write_local_wallet(self._wallets, name)
            self.policies[uid] = policy
            self.processes.append(
                MinerProcess(uid, policy, self._wallets, name, vhotkey,
                             cfg.out / "logs" / f"miner-uid{uid}.log", seed=seed,
                             policy_config=options_file if model else None)
            )  # fmt: skip

    def _chain(self) -> Any:
        from template.chain import LocalChain, MemorySubstrate, SubnetParams

        cfg = self.config
        substrate = MemorySubstrate()
        owner, validator = LocalWallet.derive(OWNER), LocalWallet.derive(VALIDATOR)
        substrate.add_subnet(
            cfg.netuid, owner.hotkey_ss58, owner.coldkey_ss58,
            SubnetParams(tempo=max(10, 2 * cfg.blocks_per_round), weights_rate_limit=1),
        )  # fmt: skip
        substrate.register(cfg.netuid, owner.hotkey_ss58, owner.coldkey_ss58)
        substrate.register(
            cfg.netuid, validator.hotkey_ss58, validator.coldkey_ss58, stake=10_000,
            validator_permit=True,
        )  # fmt: skip
        return substrate, LocalChain

    async def _publish(self, substrate: Any, local_chain: type) -> None:
        """Register every miner and publish its address, signed by its own wallet."""
        import bittensor as bt

        cfg = self.config
        for proc in self.processes:
            wallet = self.wallets[proc.uid]
            uid = substrate.register(
                cfg.netuid, wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address
            )
            assert uid == proc.uid, "uids are handed out in order"
            assert proc.port is not None
            await local_chain(substrate, wallet, cfg.netuid).serve("127.0.0.1", proc.port)
        for added in cfg.add_miners:
            ip, port = added.address()
            uid = substrate.register(cfg.netuid, added.hotkey, added.hotkey)
            self.policies[uid] = "external"
            # The in-memory chain checks no signatures, so the arena can publish for a
            # hotkey whose secret it does not hold.
            public = bt.sp_core.Keypair(ss58_address=added.hotkey)
            wallet = _PublicWallet(public)
            await local_chain(substrate, wallet, cfg.netuid).serve(ip, port)

    async def run(self) -> dict[str, Any]:
        """Run the arena; the content of ``arena.json``. ArenaError, before anything starts
        or is touched, when --out holds an earlier run's results and ``force`` is not set."""
        cfg = self.config
        started = time.monotonic()
        refuse_earlier_run(cfg)
        cfg.out.mkdir(parents=True, exist_ok=True)
        validator_wallet = LocalWallet.derive(VALIDATOR)
        given = _catalog(cfg, self.view) if cfg.catalog is not None else None  # check it first
        self.view.stage(f"starting {cfg.miners} miners (logs in {cfg.out / 'logs'})")
        self._start_miners(validator_wallet.hotkey_ss58)
        # A catalog builds while the miner processes start: both take a while.
        catalog_dir = given or await asyncio.to_thread(_catalog, cfg, self.view)
        await asyncio.to_thread(wait_all_ready, self.processes)
        substrate, local_chain = self._chain()
        await self._publish(substrate, local_chain)
        self.view.stage(
            f"subnet {cfg.netuid} on a local chain: validator uid {VALIDATOR_UID}, "
            f"{len(self.processes) + len(cfg.add_miners)} miners serving"
        )
        return await self._play(substrate, local_chain, validator_wallet, catalog_dir, started)

    async def _play(
        self, substrate: Any, local_chain: type, wallet: Any, catalog_dir: Path, started: float
    ) -> dict[str, Any]:
        from template.base.validator import Validator

        cfg = self.config
        state_dir = cfg.out / "validator"
        (state_dir / STATE_FILE).unlink(missing_ok=True)  # each arena run starts fresh
        (cfg.out / TRAJECTORIES_FILE).unlink(missing_ok=True)
        shutil.rmtree(cfg.out / ARCHIVE_DIR, ignore_errors=True)
        chain = local_chain(substrate, wallet, cfg.netuid)
        # A demo on a public seed: every episode is public at once (the store says so loudly).
        store = ArchiveStore(
            cfg.out / ARCHIVE_DIR, signer=HotkeySigner.from_wallet(wallet),
            embargo=EmbargoPolicy(lifted=True),
        )  # fmt: skip
        validator = Validator(
            _validator_config(cfg, state_dir), chain, wallet, sink=store,
            on_episode=lambda uid, t: self.view.episode_done(uid, t.success if t else None),
        )  # fmt: skip
        validator.rotator.adopt(catalog_dir, cfg.seed, cfg.products, epoch=0)
        try:
            await validator.start()
            committed = (await chain.read_commitments()).get(validator.hotkey)
            for r in range(cfg.rounds):
                episodes = len(validator.pick()) * cfg.tasks_per_round
                self.view.round_start(r, cfg.rounds, episodes)
                before = validator.state.last_weight_block
                result = await validator.run_round()
                self.rounds.append(result)
                solved = sum(m.successes for m in result.miners)
                total = sum(m.tasks for m in result.miners)
                after = validator.state.last_weight_block
                weights = f"weights set at block {after}" if after != before else "no weights set"
                self.view.round_end(
                    f"round {r + 1}: {solved}/{total} episodes solved in {result.duration_s:.1f} s"
                    f"; {result.archived} trajectories archived; {weights}"
                )
                chain.advance(cfg.blocks_per_round)
            rows = await self._leaderboard(validator, substrate)
            stored = substrate.stored_weights(cfg.netuid).get(VALIDATOR_UID, {})
            burned = round(stored.get(OWNER_UID, 0) / sum(stored.values()), 6) if stored else 0.0
        finally:
            await validator.close()
        _export_jsonl(cfg.out / ARCHIVE_DIR, cfg.out / TRAJECTORIES_FILE)
        self.view.leaderboard([r.model_dump() for r in rows])
        report = {
            "miners": [r.model_dump() for r in rows],
            "validator": {"uid": VALIDATOR_UID, "hotkey": validator.hotkey},
            "burned": burned,
            "netuid": cfg.netuid,
            "catalog": {
                "directory": str(catalog_dir),
                "seed": cfg.seed,
                "commitment": committed.data if committed is not None else None,
            },
            "rounds": [r.model_dump(exclude={"miners"}) for r in self.rounds],
            "tasks_per_round": cfg.tasks_per_round,
            "archive": {"root": str(cfg.out / ARCHIVE_DIR), "embargo": "lifted"},
            "trajectories": str(cfg.out / TRAJECTORIES_FILE),
            "duration_s": round(time.monotonic() - started, 1),
        }
        (cfg.out / ARENA_JSON).write_text(json.dumps(report, indent=2) + "\n")
        return report

    async def _leaderboard(self, validator: Any, substrate: Any) -> list[MinerRow]:
        stored = substrate.stored_weights(self.config.netuid).get(VALIDATOR_UID, {})
        total = sum(stored.values())
        rows: list[MinerRow] = []
        uids = sorted({m.uid for r in self.rounds for m in r.miners})
        for uid in uids:
            mine = [m for r in self.rounds for m in r.miners if m.uid == uid]
            tasks = sum(m.tasks for m in mine)
            episodes = sum(m.episodes for m in mine)
            score = validator.state.scores.miners.get(uid)
            process = sum(m.process * m.episodes for m in mine) / episodes if episodes else 0.0
            policy = self.policies.get(uid) or "?"
            model = mine[-1].agent_model
            if policy == "external" and model is not None:
                policy = f"external:{model}"  # the model its card named in its last round
            rows.append(
                MinerRow(
                    uid=uid, hotkey=mine[-1].hotkey, policy=policy, model=model,
                    episodes=episodes,
                    asr=round(sum(m.successes for m in mine) / tasks, 4) if tasks else 0.0,
                    process_score=round(process, 4), ema=round(score.ema, 6) if score else 0.0,
                    weight=round(stored.get(uid, 0) / total, 6) if total else 0.0,
                    copy_of=mine[-1].copy_of,
                )
            )  # fmt: skip
        return sorted(rows, key=lambda r: (-r.ema, -r.weight, r.uid))

    def stop(self) -> None:
        """Stop the miner processes and remove the temporary wallets."""
        for proc in self.processes:
            proc.stop()
        shutil.rmtree(self._wallets, ignore_errors=True)
        self.view.close()


def earlier_run(out: Path) -> list[str]:
    """What an earlier arena run left in `out` that a new run would replace: its archive
    (with the people's annotations beside the records), its trajectories file and the
    validator's state, each as ``out``-relative text; empty when there is none."""
    found = []
    archive = out / ARCHIVE_DIR
    if archive.is_dir() and any(archive.iterdir()):
        notes = archive / ANNOTATIONS_DIR
        annotated = notes.is_dir() and any(notes.iterdir())
        found.append(f"{ARCHIVE_DIR}/" + (" (with annotations)" if annotated else ""))
    if (out / TRAJECTORIES_FILE).exists():
        found.append(TRAJECTORIES_FILE)
    if (out / "validator" / STATE_FILE).exists():
        found.append(f"validator/{STATE_FILE}")
    return found


def refuse_earlier_run(cfg: ArenaConfig) -> None:
    """ArenaError naming what an earlier run left in ``cfg.out``, unless ``cfg.force``."""
    found = earlier_run(cfg.out)
    if found and not cfg.force:
        raise ArenaError(
            f"--out {cfg.out} holds an earlier run ({', '.join(found)}): pass --force to "
            "replace it, or choose another --out"
        )


class _PublicWallet:
    """A wallet-shaped holder of a public key only (enough for the in-memory chain)."""

    def __init__(self, keypair: Any) -> None:
        self.name = "external"
        self.hotkey = self.coldkey = self.coldkeypub = keypair


def run_arena(config: ArenaConfig, view: ArenaObserver | None = None) -> dict[str, Any]:
    """Run a whole subnet on this machine (see the module docstring); the ``arena.json``
    content. The miner processes are stopped whatever happens."""
    arena = Arena(config, view)
    try:
        return asyncio.run(arena.run())
    finally:
        arena.stop()
