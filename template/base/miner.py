"""The miner: a shopping agent served to validators over signed HTTP.

The agent is either a model behind an OpenAI-compatible URL (``--agent.base_url``,
``--agent.model``: e.g. ``vllm serve Qwen/Qwen3-4B``) or a named reference policy
(``--agent.policy careful``). The miner serves the transport's app (``POST /step``,
``GET /card``, ``GET /health``) plus ``GET /metrics``, publishes its address on chain with
``serve`` when it starts, and re-reads the metagraph every ``sync_interval_s`` so that only
registered validators with a permit and enough stake are served.

In local mode (``--local --local.allow HOTKEY[,HOTKEY]``) there is no chain at all:
signatures are still verified, and the allow-list replaces the metagraph check, so a miner
can test its agent (against the local arena, say) before it registers.

With ``--neuron.episode_log PATH`` the miner appends one JSON line per episode it played
(:mod:`template.base.episode_log`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from typing import Any

from fastapi import FastAPI, Response

import shopbench
from shopbench.agents.base import Policy
from shopbench.agents.options import PolicyOptions
from template.base.config import AgentConfig, MinerConfig, card_model_name
from template.base.episode_log import EpisodeLog
from template.base.metrics import CONTENT_TYPE_LATEST, MeteredPolicy, MinerMetrics
from template.base.neuron import NeuronError, missing_subnet
from template.base.ports import bind_error
from template.errors import ChainClientError, SubnetNotFound
from template.protocol import AgentCard
from template.serve import bind
from template.transport import CallerGate, MinerAppConfig, StandingConfig, create_miner_app

log = logging.getLogger("template.miner")
UNSPECIFIED_HOSTS = frozenset({"0.0.0.0", "::", ""})


def make_agent(config: AgentConfig) -> tuple[Policy, AgentCard]:
    """The policy `config` names and the agent card that describes it.

    A model (a server, or hf:PATH) gets the options set (:meth:`AgentConfig.policy_options`)
    and keeps its own defaults for the rest; a model server's request timeout is
    ``--agent.request_timeout_s``'s unless the options file sets one. A reference policy
    takes no model options (``--agent.seed`` is its own seed): PolicyOptionsError when
    some are set."""
    from shopbench.agents.local.config import HF_PREFIX
    from shopbench.agents.options import check_applies
    from shopbench.agents.registry import check_spec, make_policy

    spec = config.spec()
    check_spec(spec)
    options = config.policy_options()
    check_applies(options.without("seed"), [spec])
    if config.policy is not None and config.policy.startswith(HF_PREFIX):
        policy = make_policy(
            spec, seed=config.seed, **options.options(spec, defaults=False)
        )
        card = AgentCard(
            model=card_model_name(config.policy, config.model), revision=config.revision
        )
    elif config.policy is not None:
        policy = make_policy(spec, seed=config.seed)
        card = AgentCard(model=f"reference/{config.policy}", revision=shopbench.__version__)
    else:
        if options.request_timeout_s is None:
            options = options.over(PolicyOptions(request_timeout_s=config.request_timeout_s))
        policy = make_policy(spec, **options.options(spec, defaults=False))
        card = AgentCard(model=config.model or "unknown", revision=config.revision)
    if config.policy is None or config.policy.startswith(HF_PREFIX):
        given = options.model_dump(mode="json", exclude_unset=True, exclude_none=True)
        log.info(
            "model options", extra={"event": "model_options", "model": card.model,
                                    "options": given},
        )  # fmt: skip
    return policy, card


def _episode_log(config: MinerConfig) -> EpisodeLog | None:
    """The log ``--neuron.episode_log`` names, its file created now (its folder too), so a
    path that cannot be written stops the miner at start; None without one."""
    n = config.neuron
    if n.episode_log is None:
        return None
    path = n.episode_log.expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.open("a", encoding="utf-8").close()
    except OSError as e:
        why = e.strerror or e
        raise NeuronError(f"--neuron.episode_log {path}: cannot write ({why})") from None
    return EpisodeLog(path, idle_s=n.episode_log_idle_s)


class Miner:
    """One miner: its app, its caller gate and, outside local mode, its chain client."""

    def __init__(
        self,
        config: MinerConfig,
        hotkey: str,
        policy: Policy,
        card: AgentCard,
        chain: Any | None = None,
        metrics: MinerMetrics | None = None,
    ) -> None:
        if chain is None and not config.local.enabled:
            raise NeuronError("a miner outside --local mode needs a chain client")
        self.config = config
        self.hotkey = hotkey
        self.chain = chain
        self.card = card
        self.metrics = metrics or MinerMetrics()
        if config.local.enabled:
            self.gate = CallerGate.allow(config.local.allow)
        else:
            n = config.neuron
            self.gate = CallerGate(
                StandingConfig(
                    min_stake=n.min_stake, require_validator_permit=n.require_validator_permit
                )
            )
        self.policy = MeteredPolicy(policy, self.metrics)
        self.episode_log = _episode_log(config)
        self.app = self._app()
        self.port: int | None = None

    def _app(self) -> FastAPI:
        n = self.config.neuron
        app = create_miner_app(
            self.policy, self.card, self.hotkey, self.gate,
            MinerAppConfig(max_active=n.max_active, max_waiting=n.max_waiting),
            observer=self.episode_log,
        )  # fmt: skip
        self.metrics.watch_refusals(app.state.rejections)

        @app.get("/metrics")
        async def metrics() -> Response:
            return Response(self.metrics.render(), media_type=CONTENT_TYPE_LATEST)

        return app

    def published_address(self, bound_port: int) -> tuple[str, int]:
        """The ``(ip, port)`` to publish on chain; NeuronError when no address is known."""
        axon = self.config.axon
        ip = axon.external_ip or axon.ip
        if ip in UNSPECIFIED_HOSTS:
            raise NeuronError(
                f"--axon.ip {axon.ip} binds every interface; give --axon.external_ip, the "
                "address validators reach this miner at"
            )
        return ip, axon.external_port or bound_port

    async def sync(self) -> None:
        """Read the metagraph into the caller gate (a chain error keeps the last one)."""
        if self.chain is None:
            return
        try:
            graph = await self.chain.metagraph()
        except ChainClientError as e:
            log.warning("metagraph not read (%s); the last one still decides", e)
            return
        self.gate.update(graph)

    async def _keep_synced(self) -> None:
        while True:
            await asyncio.sleep(self.config.neuron.sync_interval_s)
            await self.sync()

    async def _keep_logging(self, episodes: EpisodeLog) -> None:
        """Write the episodes gone quiet, also while no request comes to do it."""
        while True:
            await asyncio.sleep(min(episodes.idle_s, 60.0))
            episodes.sweep()

    async def announce(self, bound_port: int) -> None:
        """Check registration, read the metagraph and publish the address (not in local mode)."""
        if self.chain is None:
            return
        try:
            graph = await self.chain.metagraph()
        except SubnetNotFound as e:
            raise missing_subnet(e, self.config.subtensor) from None
        if graph.by_hotkey(self.hotkey) is None:
            raise NeuronError(
                f"hotkey {self.hotkey} is not registered on netuid {self.config.netuid} "
                "(register it with `btcli subnets register`, or test with --local)"
            )
        self.gate.update(graph)
        ip, port = self.published_address(bound_port)
        await self.chain.serve(ip, port)
        log.info("published %s:%d on chain", ip, port, extra={"ip": ip, "port": port})

    async def serve(self) -> None:
        """Bind, announce, and serve until SIGINT/SIGTERM."""
        import uvicorn

        axon = self.config.axon
        try:
            sock = bind(axon.ip, axon.port)
        except OSError as e:
            raise bind_error("--axon.port", axon.ip, axon.port, e) from None
        self.port = int(sock.getsockname()[1])
        try:
            await self.announce(self.port)
        except BaseException:
            sock.close()
            raise
        server = uvicorn.Server(
            uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        )
        stopping = _StopSignals(server)
        syncing = asyncio.create_task(self._keep_synced())
        sweeping = (
            asyncio.create_task(self._keep_logging(self.episode_log))
            if self.episode_log is not None
            else None
        )
        log.info(
            "serving", extra={
                "event": "serving", "host": axon.ip, "port": self.port, "hotkey": self.hotkey,
                "local": self.config.local.enabled, "model": self.card.model,
            },
        )  # fmt: skip
        try:
            with stopping:
                await server.serve(sockets=[sock])
        finally:
            for task in (syncing, sweeping):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            written = self.episode_log.close() if self.episode_log is not None else 0
            sock.close()
            if self.chain is not None:
                await self.chain.close()
            log.info(
                "stopped%s: %d turns served; %d open episodes written as ended 'stopped'",
                f" on {stopping.name}" if stopping.name else "", self.app.state.served, written,
                extra={"event": "stopped", "signal": stopping.name,
                       "served": self.app.state.served, "episodes_stopped": written},
            )  # fmt: skip


class _StopSignals:
    """SIGINT and SIGTERM stop `server` and are remembered, for the stop line.

    uvicorn catches both while it serves and, once it has stopped, raises the caught signal
    again to the handler it found: with the default one, SIGTERM would end the process before
    the miner writes its open episodes and its stop line. This handler is the one uvicorn
    finds, so the signal stops the server and the miner then finishes in order. Outside the
    main thread (a miner served by a test) signals are left alone.
    """

    def __init__(self, server: Any) -> None:
        self.server = server
        self.name: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        self.name = self.name or signal.Signals(signum).name
        self.server.should_exit = True

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


async def run_miner(config: MinerConfig) -> None:
    """The miner neuron: check the clock, load the wallet and agent, serve."""
    from template.base.neuron import load_wallet, make_chain, startup_clock_check

    startup_clock_check(config.neuron.clock)
    wallet = load_wallet(config.wallet)
    assert config.agent is not None, "MinerConfig requires an agent"
    policy, card = make_agent(config.agent)
    chain = None
    if not config.local.enabled:
        assert config.netuid is not None, "MinerConfig requires a netuid outside local mode"
        chain = make_chain(wallet, config.subtensor, config.netuid)
    miner = Miner(config, wallet.hotkey.ss58_address, policy, card, chain)
    await miner.serve()
