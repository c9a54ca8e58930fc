"""The validator's loop: sync, pick miners, draw tasks, play a round, score, set weights, save.

Each round:

1. read the metagraph (on a chain error: keep the last one — scoring never waits on the
   chain) and reset the EMA of every uid whose hotkey changed;
2. move the catalog rotation (a due rebuild runs in the background) and publish the
   catalog commitment when there is something new to commit or reveal;
3. pick the miners — every serving uid but our own, or a secret sample of them — and draw
   one task list from the epoch's bank: every miner plays the same tasks;
4. play, judge, score and archive them (:func:`template.base.round.play_round`);
5. fold each miner's round score into its EMA;
6. on the block cadence, turn the EMAs into weights through the release's curve and set
   them through the ``ChainClient`` (an unreachable or refusing chain is retried with
   backoff in later rounds);
7. save the state atomically.

Between rounds, and only there, the loop looks for the restart-request file
(:mod:`template.base.restart`): when one was written after this process loaded its code, the
validator saves its state, removes the file and returns, and the neuron exits with status 0
for its process manager to start it again on the new code.

The miners a round plays are chosen in :mod:`template.base.sampling`; the neuron's process
(the clock, the wallet, the metrics port, the signals) is :mod:`template.base.validator_process`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shopbench.archive.remote import RemoteTarget, ShardUploader, UploadConfig
from shopbench.archive.signing import Signer
from shopbench.archive.sink import ArchiveSink
from shopbench.archive.store import ArchiveStore
from shopbench.env.env import ShoppingEnv
from shopbench.env.keys import EpisodeKeys
from shopbench.judging.judge import Judge
from shopbench.judging.registry import make_judge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.combine import LLMSampling
from shopbench.scoring.copies import credited_score
from shopbench.scoring.round import RoundJudge
from shopbench.tasks.bank import TaskBank, derived_seed
from template.base.config import ValidatorConfig
from template.base.metrics import MinerGauges, ValidatorMetrics
from template.base.neuron import Backoff, NeuronError, missing_subnet
from template.base.restart import RestartRequest, read_restart_request, take_restart_request
from template.base.rotation import CatalogRotator, RotationConfig
from template.base.round import RoundContext, RoundLimits, RoundResult, play_round
from template.base.sampling import sample, serving
from template.base.state import STATE_FILE, ValidatorState, load_state, save_state
from template.errors import ChainClientError, SubnetNotFound
from template.metagraph import MetagraphView
from template.signing import HotkeySigner
from template.transport import ClientConfig, MinerClient, MinerEndpoint

log = logging.getLogger("template.validator")
BLOCK_TIME_S = 12.0
"""Seconds per block, to estimate the head while the chain cannot be read."""
CODE_LOADED_AT = time.time()
"""When this process loaded the validator's code: a restart request older than this asked
for code the process already runs."""


class Validator:
    """A validator over a ``ChainClient``; restores its state from ``FULL_PATH/state.json``.

    `wallet` signs the requests and the trajectories (a ``bittensor.Wallet`` or any
    wallet-shaped object). The optional arguments replace the defaults for the arena and
    tests: the archive `sink`, the `metrics`, the catalog builder and seed source of the
    rotation, observers of episodes, of acknowledged trajectories and of saved rounds, and
    the `clock` of the chain backoff.
    """

    def __init__(
        self,
        config: ValidatorConfig,
        chain: Any,
        wallet: Any,
        *,
        sink: ArchiveSink | None = None,
        metrics: ValidatorMetrics | None = None,
        rotation_options: dict[str, Any] | None = None,
        on_episode: Callable[[int, Trajectory | None], None] | None = None,
        on_archived: Callable[[Sequence[Trajectory]], None] | None = None,
        on_round: Callable[[RoundResult], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.chain = chain
        self.wallet = wallet
        self.hotkey: str = wallet.hotkey.ss58_address
        self.signer: Signer = HotkeySigner.from_wallet(wallet)
        self.sink = sink or ArchiveStore(config.archive_dir, signer=self.signer)
        self.metrics = metrics or ValidatorMetrics()
        self.uploader = _uploader(config, self.sink, self.metrics)
        self.on_episode = on_episode
        self.on_archived = on_archived
        self.on_round = on_round
        self.in_flight: RoundInFlight | None = None
        self.state_path = config.state_dir / STATE_FILE
        self.state = load_state(self.state_path, self.hotkey, config.netuid) or ValidatorState(
            hotkey=self.hotkey, netuid=config.netuid
        )
        n = config.neuron
        self.rotator = CatalogRotator(
            self.state.rotation,
            RotationConfig(
                root=config.state_dir / "catalogs", products=n.catalog_products,
                every_epochs=n.catalog_rotation_epochs, workers=n.catalog_workers,
            ),
            **(rotation_options or {}),
        )  # fmt: skip
        self.judge = make_judge(config.consensus.judge, config.consensus.rubric)
        self.round_judge = _round_judge(config, self.judge)
        self.weights_backoff = Backoff(n.chain_retry_s, n.chain_retry_max_s, clock)
        self.metagraph: MetagraphView | None = None
        self.block: int | None = None
        self._clock = clock
        self._block_read: tuple[int, float] | None = None  # (block, clock) of the last read
        self._first_block: int | None = None  # the first head this process read
        self.env: ShoppingEnv | None = None
        self.bank: TaskBank | None = None
        self._keys: EpisodeKeys | None = None
        self._client: MinerClient | None = None
        self._generation: int | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def epoch_of(self, block: int | None) -> int:
        """The rotation epoch of `block` (0 before any block is known)."""
        return (block or 0) // self.config.neuron.epoch_blocks

    async def start(self) -> None:
        """Read the chain, make sure the catalog is there, open the environment, commit."""
        await self.sync(required=True)
        self.rotator.begin(self.epoch_of(self.block))
        self.save()  # the secret seed is on disk before the (long) first build
        await self.rotator.ensure_current(self.epoch_of(self.block))
        self._open_catalog()
        await self.rotator.publish(self.chain)
        self.save()
        if self.uploader is not None:
            self.uploader.start()  # publishes in the background; never holds a round
        if self.round_judge.llm is not None:
            for check in await self.round_judge.llm.check_endpoints():
                if check.ok:
                    log.info("LLM judge endpoint: %s", check.reason)
                else:
                    log.error("LLM judge endpoint refused, the rubric judges alone: %s",
                              check.reason)

    def _open_catalog(self) -> None:
        gen = self.state.rotation.current
        assert gen is not None, "ensure_current runs first"
        if self._generation == gen.index and self.env is not None:
            return
        self.env = ShoppingEnv.open(gen.directory)
        self.bank = TaskBank(
            self.config.state_dir / "banks", Path(gen.directory), gen.index, gen.seed,
            self.config.neuron.intents, self.config.neuron.bank_per_intent,
        )  # fmt: skip
        self._generation = gen.index
        log.info("catalog generation %d open", gen.index, extra={"generation": gen.index})

    def client(self) -> MinerClient:
        """The miner client (made on first use, inside the running event loop)."""
        if self._client is None:
            n = self.config.neuron
            self._client = MinerClient(
                self.wallet,
                ClientConfig(turn_deadline_s=n.turn_timeout_s, max_concurrency=n.concurrency),
            )
        return self._client

    async def close(self) -> None:
        """Close the miner connections, the sink and the chain."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self.uploader is not None:
            await self.uploader.close()
        await self.sink.close()
        await self.chain.close()

    def save(self) -> None:
        """Save the state atomically."""
        save_state(self.state, self.state_path)

    # -- chain ----------------------------------------------------------------------------

    async def sync(self, required: bool = False) -> MetagraphView | None:
        """Read the metagraph; on a chain error keep the last one (unless `required` and
        there is none yet: then wait and retry until the chain answers)."""
        delay = self.config.neuron.chain_retry_s
        while True:
            try:
                graph = await self.chain.metagraph()
            except ChainClientError as e:
                if isinstance(e, SubnetNotFound) and required and self.metagraph is None:
                    raise missing_subnet(e, self.config.subtensor) from None  # no retry helps
                self.metrics.chain_errors.labels("metagraph").inc()
                if not required or self.metagraph is not None:
                    log.warning("metagraph not read (%s); using the last one", e)
                    self._estimate_block()
                    return self.metagraph
                log.warning("chain unreachable at start (%s); retrying in %.0f s", e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.config.neuron.chain_retry_max_s)
                continue
            break
        if graph.by_hotkey(self.hotkey) is None:
            message = (
                f"hotkey {self.hotkey} is not registered on netuid {self.config.netuid} "
                "(register it with `btcli subnets register`)"
            )
            if required:
                raise NeuronError(message)
            log.error("%s; scoring goes on, but weights will be refused", message)
        self.metagraph = graph
        self.block = graph.block
        self._block_read = (graph.block, self._clock())
        if self._first_block is None:
            self._first_block = graph.block
        reset = self.state.scores.observe({n.uid: n.hotkey for n in graph.neurons})
        for uid in reset:
            log.info("uid %d changed hotkey: its EMA starts again", uid, extra={"uid": uid})
        return graph

    def _estimate_block(self) -> None:
        """Move the head on by the time passed since the last read: weights fall due (and
        are tried, and backed off) by time while the chain cannot be read."""
        if self._block_read is not None:
            block, at = self._block_read
            self.block = block + int((self._clock() - at) / BLOCK_TIME_S)

    async def maybe_set_weights(self) -> bool:
        """Set weights when the cadence and the backoff allow; True when they were set."""
        block = self.block
        if block is None or self.metagraph is None:
            return False
        last = self.state.last_weight_block
        if last is not None and block - last < self.config.neuron.weights_interval_blocks:
            return False
        if not self.weights_backoff.ready():
            return False
        consensus = self.config.consensus
        uids = [n.uid for n in self.metagraph.neurons if n.hotkey != self.hotkey]
        weights = consensus.curve.weights(self.state.scores.emas(uids))
        if not weights:
            log.info("no miner has a score yet: no weights set")
            return False
        try:
            receipt = await self.chain.set_weights(weights, version_key=consensus.spec_version)
        except ChainClientError as e:
            wait = self.weights_backoff.failed()
            self.metrics.weights_set.labels("error").inc()
            self.metrics.chain_errors.labels("set_weights").inc()
            log.warning("weights not set (%s); next try in %.0f s or later", e, wait)
            return False
        self.weights_backoff.succeeded()
        self.state.last_weight_block = receipt.block if receipt.block is not None else block
        self.state.last_weights = weights
        self.metrics.weights_set.labels("ok").inc()
        log.info(
            "weights set (%s) for %d uids at block %s", receipt.mode, len(weights),
            self.state.last_weight_block, extra={"block": self.state.last_weight_block},
        )  # fmt: skip
        return True

    # -- rounds ---------------------------------------------------------------------------

    def pick(self) -> list[MinerEndpoint]:
        """The miners of the next round."""
        if self.metagraph is None:
            return []
        gen = self.state.rotation.current
        secret = derived_seed(gen.seed, "shopbench/miners") if gen is not None else 0
        return sample(
            serving(self.metagraph, self.hotkey), self.config.neuron.sample_size,
            secret, self.state.round,
        )  # fmt: skip

    def _episode_keys(self) -> EpisodeKeys | None:
        """The current catalog generation's episode keys (derived from its seed, so they are
        checkable once it is revealed); None before any catalog serves."""
        gen = self.state.rotation.current
        if gen is None:
            return None
        if self._keys is None or (self._keys.seed, self._keys.generation) != (gen.seed, gen.index):
            self._keys = EpisodeKeys(gen.seed, gen.index)
        return self._keys

    async def run_round(self) -> RoundResult:
        """Play one round (see the module docstring) and save the state."""
        await self.sync()
        epoch = self.epoch_of(self.block)
        if await self.rotator.step(epoch):
            self._open_catalog()
        await self.rotator.publish(self.chain)
        assert self.env is not None and self.bank is not None, "start() runs first"
        n = self.config.neuron
        tasks = await asyncio.to_thread(self.bank.draw, epoch, self.state.round, n.tasks_per_round)
        miners = self.pick()
        gen = self.state.rotation.current
        secret = derived_seed(gen.seed, "shopbench/llm-sample") if gen is not None else 0
        picked = self.round_judge.pick(
            [t.id for t in tasks], f"{secret}:{self.state.round}".encode()
        )
        flight = RoundInFlight(index=self.state.round, episodes=len(miners) * len(tasks))

        def played(uid: int, t: Trajectory | None) -> None:
            flight.played += 1
            if self.on_episode is not None:
                self.on_episode(uid, t)

        ctx = RoundContext(
            env=self.env, client=self.client(), judge=self.judge,
            consensus=self.config.consensus, signer=self.signer, sink=self.sink,
            metrics=self.metrics,
            limits=RoundLimits(
                turn_timeout_s=n.turn_timeout_s, episode_timeout_s=n.episode_timeout_s,
                round_timeout_s=n.round_timeout_s, concurrency=n.concurrency,
            ),
            on_episode=played, on_archived=self.on_archived,
            round_judge=self.round_judge, llm_picked=picked, keys=self._episode_keys(),
        )  # fmt: skip
        log.info(
            "round %d: %d miners x %d tasks (epoch %d)", self.state.round, len(miners),
            len(tasks), epoch, extra={"round": self.state.round, "epoch": epoch},
        )  # fmt: skip
        self.in_flight = flight
        try:
            result = await play_round(ctx, self.state.round, self.block, epoch, miners, tasks)
        finally:
            self.in_flight = None
        if self.uploader is not None:
            self.uploader.notify()
        result = self._score_copies(result)
        alpha = self.config.consensus.ema_alpha
        for m in result.miners:
            score = m.score if m.credited is None else m.credited
            self.state.scores.update(m.uid, m.hotkey, score, alpha, m.episodes)
        self.state.round += 1
        await self.maybe_set_weights()
        self.save()
        self._meter_round()
        if self.on_round is not None:
            self.on_round(result)
        log.info(
            "round %d done in %.1f s: %d trajectories archived", result.index,
            result.duration_s, result.archived,
            extra={"round": result.index, "archived": result.archived},
        )  # fmt: skip
        return result

    def _meter_round(self) -> None:
        """After a saved round: the head and the blocks since weights were set, and each
        miner's score, EMA and weight (the uids the metagraph no longer holds dropped)."""
        m = self.metrics
        m.last_round.set(time.time())
        if self.block is not None:
            m.block.set(self.block)
            since = self.state.last_weight_block
            if since is None:
                since = self._first_block if self._first_block is not None else self.block
            m.blocks_since_weights.set(max(0, self.block - since))
        present = (
            {n.uid for n in self.metagraph.neurons if n.hotkey != self.hotkey}
            if self.metagraph is not None else set(self.state.scores.miners)
        )  # fmt: skip
        book, weights = self.state.scores.miners, self.state.last_weights
        m.set_miners({
            uid: MinerGauges(
                score=book[uid].last if uid in book else None,
                ema=book[uid].ema if uid in book else 0.0,
                weight=weights.get(uid, 0.0) if weights else None,
            )
            for uid in sorted(present & (set(book) | set(weights)))
        })  # fmt: skip

    def _score_copies(self, result: RoundResult) -> RoundResult:
        """Remember each miner's decisions and mark those that follow another miner's
        (:mod:`shopbench.scoring.copies`): the tasks on which they did go into the EMA as 0,
        the rest as they scored."""
        rules = self.config.consensus.copies
        book = self.state.copies
        if self.metagraph is not None:
            book.observe({n.uid: n.hotkey for n in self.metagraph.neurons})
        for m in result.miners:
            book.record(m.uid, m.hotkey, result.index, m.decisions, rules.window_rounds)
        registered = {
            n.uid: n.registered_at
            for n in (self.metagraph.neurons if self.metagraph is not None else [])
            if n.registered_at is not None
        }
        groups = book.groups(rules, registered)
        miners = []
        for m in result.miners:
            group = groups.get(m.uid)
            if group is not None:
                copied = book.copied_tasks(m.uid, group.of_uid, result.index)
                credited = credited_score(m.decisions, m.tasks, copied)
                self.metrics.copies.inc()
                log.info(
                    "uid %d follows uid %d (the same decisions on %d of %d shared tasks; "
                    "decided by %s): its %d tasks of this round with uid %d's decisions count "
                    "0, its round score %.4f -> %.4f", m.uid, group.of_uid, group.same,
                    group.shared, group.by, len(copied), group.of_uid, m.score, credited,
                    extra={"uid": m.uid, "copy_of": group.of_uid},
                )  # fmt: skip
                m = m.model_copy(update={
                    "copy_of": group.of_uid, "copied_tasks": len(copied), "credited": credited,
                })  # fmt: skip
            miners.append(m)
        return result.model_copy(update={"miners": miners})

    def stopping_line(self, signal_name: str) -> str:
        """What stopping now leaves behind, in one line for the log: the round in flight, how
        many of its episodes were played (none of them scored: the round is abandoned, and
        the next start plays round N again), and which round's state is saved."""
        saved = (f"the state after round {self.state.round - 1} is saved"
                 if self.state.round else "no round was finished")  # fmt: skip
        flight = self.in_flight
        if flight is None:
            return f"{signal_name}: stopping between rounds; nothing is left unscored; {saved}"
        return (
            f"{signal_name}: stopping in round {flight.index}: {flight.played} of its "
            f"{flight.episodes} episodes played, none of them scored (the round is abandoned "
            f"and played again at the next start); {saved}"
        )

    def restart_requested(self) -> RestartRequest | None:
        """The restart request waiting in ``--neuron.restart_file``, taken (the state saved
        first, then the file removed), or None. A request written before this process loaded
        its code asked for the code it runs: it is removed and None returned. Called between
        rounds only: a round in flight is always finished first."""
        path = self.config.restart_path
        request = read_restart_request(path)
        if request is None:
            return None
        if request.at < CODE_LOADED_AT:
            take_restart_request(path)
            log.info("restart request %s (%s) predates this start: already on that code",
                     path, request.reason)  # fmt: skip
            return None
        self.save()
        take_restart_request(path)
        saved = (f"the state after round {self.state.round - 1} is saved"
                 if self.state.round else "no round was played yet")  # fmt: skip
        log.info(
            "restart requested by %s (%s): stopping between rounds; %s; exiting for the "
            "process manager to start the new code", request.by, request.reason, saved,
            extra={"round": self.state.round, "restart": request.reason},
        )  # fmt: skip
        return request

    async def run(
        self, rounds: int | None = None, stop: asyncio.Event | None = None
    ) -> RestartRequest | None:
        """Start, then play rounds: `rounds` of them, or until `stop` is set, or until a
        restart is requested between two rounds (that request is returned, the state saved
        and the request file removed; otherwise None)."""
        stop = stop or asyncio.Event()
        await self.start()
        done = 0
        while (rounds is None or done < rounds) and not stop.is_set():
            request = self.restart_requested()
            if request is not None:
                return request
            began = time.monotonic()
            await self.run_round()
            done += 1
            wait = self.config.neuron.min_round_interval_s - (time.monotonic() - began)
            if wait > 0 and (rounds is None or done < rounds):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
        return None


@dataclass
class RoundInFlight:
    """The round being played: its index, its episodes, and how many have been played."""

    index: int
    episodes: int
    played: int = 0


def _round_judge(config: ValidatorConfig, rubric: Judge) -> RoundJudge:
    """The rubric, with the LLM judge on a sample when judge servers are configured."""
    section = config.neuron.llm_judge
    llm = None
    if section.urls:
        from shopbench.judging.llm.build import make_llm_judge

        release = config.consensus.llm_judge
        llm = make_llm_judge(
            ",".join(f"openai:{release.model}@{url}" for url in section.urls),
            release=release, quorum=section.quorum,
            cache_dir=section.cache_dir or config.state_dir / "judge-cache",
        )  # fmt: skip
    sampling = LLMSampling(rate=section.sample_rate, round_deadline_s=section.deadline_s)
    return RoundJudge(rubric, llm, sampling, config.consensus.combine)


def _uploader(
    config: ValidatorConfig, sink: ArchiveSink, metrics: ValidatorMetrics
) -> ShardUploader | None:
    """The uploader of the store's sealed public shards to ``archive_url``, if one is set."""
    n = config.neuron
    if n.archive_url is None or not isinstance(sink, ArchiveStore):
        return None
    options = {"endpoint_url": n.archive_endpoint_url} if n.archive_endpoint_url else {}
    return ShardUploader(
        sink.root, RemoteTarget(url=n.archive_url, storage_options=options),
        is_public=sink.is_public, config=UploadConfig(interval_s=n.archive_upload_interval_s),
        on_pass=metrics.observe_upload,
    )  # fmt: skip
