"""Prometheus metrics of both neurons, each in its own registry.

The validator exposes episodes, turns, failures by reason, judge latency, miner latency,
weights set and chain errors on its own ``/metrics`` port; the miner adds ``/metrics`` to
its app (turns served, agent latency, agent failures, and the app's refusals by reason).
A registry per neuron object keeps tests and the arena (many neurons, one process) apart.
"""

from __future__ import annotations

import time
from collections import Counter as TallyCounter
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from shopbench.agents.base import Policy
from shopbench.chat import AssistantMessage, ChatMessage

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_JUDGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30)


class ValidatorMetrics:
    """The validator's counters, histograms and gauges."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry()
        p = "shopbench_validator_"
        self.rounds = Counter(p + "rounds", "Rounds completed", registry=r)
        self.episodes = Counter(
            p + "episodes", "Episodes played, by outcome", ["outcome"], registry=r
        )
        self.turns = Counter(p + "turns", "Assistant turns played", registry=r)
        self.failures = Counter(
            p + "failures", "Turn and episode failures, by reason", ["reason"], registry=r
        )
        self.judge_seconds = Histogram(
            p + "judge_seconds", "Time to judge one trajectory", buckets=_JUDGE_BUCKETS,
            registry=r,
        )  # fmt: skip
        self.miner_latency = Histogram(
            p + "miner_latency_seconds", "Time a miner took to answer one turn",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.weights_set = Counter(
            p + "weights_set", "Weight settings, by result (ok, error)", ["result"], registry=r
        )
        self.chain_errors = Counter(
            p + "chain_errors", "Chain calls that failed, by call", ["call"], registry=r
        )
        self.round_seconds = Gauge(p + "round_seconds", "Duration of the last round", registry=r)
        self.miners = Gauge(p + "miners", "Miners played in the last round", registry=r)
        self.archived = Counter(p + "archived", "Trajectories acknowledged by the sink", registry=r)
        self.copies = Counter(
            p + "copies",
            "Miner rounds scored 0 as a copy of an earlier-registered miner's decisions",
            registry=r,
        )

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "0.0.0.0") -> Any:
        """Serve ``/metrics`` on `host`:`port` in a daemon thread; returns the server."""
        server, _thread = start_http_server(port, host, registry=self.registry)
        return server


class _Refusals(Collector):
    """The miner app's refusals (``app.state.rejections``), read at scrape time."""

    def __init__(self, tally: Mapping[str, int]) -> None:
        self._tally = tally

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "shopbench_miner_rejections", "Requests refused before the agent, by reason",
            labels=["reason"],
        )  # fmt: skip
        for reason, n in sorted(dict(self._tally).items()):
            family.add_metric([reason], n)
        yield family


class MinerMetrics:
    """The miner's counters and histograms."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry()
        p = "shopbench_miner_"
        self.turns = Counter(p + "turns", "Turns the agent answered", registry=r)
        self.episodes = Counter(p + "episodes", "Episodes begun (turn-1 requests)", registry=r)
        self.agent_seconds = Histogram(
            p + "agent_seconds", "Time the agent took per turn", buckets=_LATENCY_BUCKETS,
            registry=r,
        )  # fmt: skip
        self.failures = Counter(
            p + "agent_failures", "Turns the agent failed, by error", ["error"], registry=r
        )

    def watch_refusals(self, tally: TallyCounter[str]) -> None:
        """Export `tally` (the app's refusal counts) as ``shopbench_miner_rejections``."""
        self.registry.register(_Refusals(tally))

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


class MeteredPolicy:
    """A policy whose turns are counted and timed in :class:`MinerMetrics`."""

    def __init__(self, policy: Policy, metrics: MinerMetrics) -> None:
        self.policy = policy
        self.metrics = metrics
        self.name = policy.name

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        """The wrapped policy's turn, metered; its exceptions pass through unchanged."""
        if not any(m.role == "assistant" for m in messages):
            self.metrics.episodes.inc()
        started = time.perf_counter()
        try:
            reply = await self.policy.act(messages, tools)
        except BaseException as e:
            self.metrics.failures.labels(type(e).__name__).inc()
            raise
        finally:
            self.metrics.agent_seconds.observe(time.perf_counter() - started)
        self.metrics.turns.inc()
        return reply


__all__ = [
    "CONTENT_TYPE_LATEST",
    "MeteredPolicy",
    "MinerMetrics",
    "ValidatorMetrics",
]
