"""Prometheus metrics of both neurons, each in its own registry.

The validator exposes episodes, turns, failures by reason, judge latency, miner latency,
weights set and chain errors on its own ``/metrics`` port, and what an operator alerts on
(``deploy/prometheus/alerts.yml``): blocks since weights were set, each miner's score, EMA
and weight by uid, LLM-judge fallbacks by kind, and archive uploads; the miner adds ``/metrics`` to
its app (turns served, agent latency, agent failures, and the app's refusals by reason).
A registry per neuron object keeps tests and the arena (many neurons, one process) apart.
"""

from __future__ import annotations

import contextlib
import time
import typing
from collections import Counter as TallyCounter
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

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
from shopbench.archive.remote import UploadReport
from shopbench.chat import AssistantMessage, ChatMessage
from shopbench.records.verdict import LLMFailureKind

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
        for result in ("ok", "error"):
            self.weights_set.labels(result)
        for call in ("metagraph", "set_weights"):
            self.chain_errors.labels(call)
        self.round_seconds = Gauge(p + "round_seconds", "Duration of the last round", registry=r)
        self.miners = Gauge(p + "miners", "Miners played in the last round", registry=r)
        self.archived = Counter(p + "archived", "Trajectories acknowledged by the sink", registry=r)
        self.copies = Counter(
            p + "copies",
            "Miner rounds scored 0 as a copy of an earlier-registered miner's decisions",
            registry=r,
        )
        # What an operator alerts on (deploy/prometheus/alerts.yml).
        self.last_round = Gauge(
            p + "last_round_timestamp_seconds", "Unix time the last round was saved", registry=r
        )
        self.block = Gauge(p + "block", "The chain head as of the last round", registry=r)
        self.blocks_since_weights = Gauge(
            p + "blocks_since_weights", "Blocks since weights were last set (since this process "
            "first read the chain, when it has set none)", registry=r,
        )  # fmt: skip
        self.miner_score = Gauge(
            p + "miner_score", "Each miner's last round score, as folded into its EMA (0 for a "
            "copy)", ["uid"], registry=r,
        )  # fmt: skip
        self.miner_ema = Gauge(p + "miner_ema", "Each miner's score EMA", ["uid"], registry=r)
        self.miner_weight = Gauge(
            p + "miner_weight", "Each miner's weight in the last weights set", ["uid"], registry=r
        )
        self._miner_uids: set[str] = set()
        self.llm_judged = Counter(
            p + "llm_judged", "Sampled episodes the LLM judge read (its verdict combined)",
            registry=r,
        )  # fmt: skip
        self.judge_fallbacks = Counter(
            p + "judge_fallbacks", "Sampled episodes the rubric judged alone because the LLM "
            "judge failed, by the kind of failure", ["kind"], registry=r,
        )  # fmt: skip
        for kind in typing.get_args(LLMFailureKind):
            self.judge_fallbacks.labels(kind)  # every kind is a series from the start
        self.uploaded_shards = Counter(
            p + "uploaded_shards", "Archive shards published to --neuron.archive_url", registry=r
        )
        self.uploaded_episodes = Counter(
            p + "uploaded_episodes", "Archived episodes published to --neuron.archive_url",
            registry=r,
        )  # fmt: skip
        self.upload_failures = Counter(
            p + "upload_failures", "Failed uploads of a shard or a head (retried on the next "
            "pass), and passes that failed as a whole", registry=r,
        )  # fmt: skip
        self.upload_failing = Gauge(
            p + "upload_failing_shards", "Shards whose last upload failed", registry=r
        )
        self.last_upload = Gauge(
            p + "last_upload_timestamp_seconds", "Unix time of the last upload pass in which "
            "nothing failed", registry=r,
        )  # fmt: skip

    def set_miners(self, miners: Mapping[int, MinerGauges]) -> None:
        """Set each miner's score, EMA and weight gauges; the uids not in `miners` (those
        that left the subnet) lose their series."""
        labels = {str(uid): g for uid, g in miners.items()}
        for uid in self._miner_uids - labels.keys():
            for gauge in (self.miner_score, self.miner_ema, self.miner_weight):
                with contextlib.suppress(KeyError):
                    gauge.remove(uid)
        for uid, g in labels.items():
            self.miner_ema.labels(uid).set(g.ema)
            for gauge, value in ((self.miner_score, g.score), (self.miner_weight, g.weight)):
                if value is not None:
                    gauge.labels(uid).set(value)
                else:
                    with contextlib.suppress(KeyError):
                        gauge.remove(uid)
        self._miner_uids = set(labels)

    def observe_upload(self, report: UploadReport) -> None:
        """Count what one upload pass published and what failed in it."""
        self.uploaded_shards.inc(len(report.uploaded))
        self.uploaded_episodes.inc(report.episodes)
        self.upload_failures.inc(len(report.failed) + (report.error is not None))
        if report.error is None:
            self.upload_failing.set(len(report.failed))
            if not report.failed:
                self.last_upload.set(time.time())

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "0.0.0.0") -> Any:
        """Serve ``/metrics`` on `host`:`port` in a daemon thread; returns the server."""
        server, _thread = start_http_server(port, host, registry=self.registry)
        return server


class MinerGauges(NamedTuple):
    """One miner's gauges: its last round score (None before it played), its EMA, and its
    weight in the last weights set (None when it had none)."""

    score: float | None
    ema: float
    weight: float | None


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
    "MinerGauges",
    "MinerMetrics",
    "ValidatorMetrics",
]
