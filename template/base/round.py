"""One validator round: the same tasks for every miner, played, judged, scored and archived.

Every (miner, task) episode runs through :func:`shopbench.trajectory.loop.run_episode` with a
:class:`~template.transport.RemotePolicy`: the environment and every tool call stay here,
the miner only answers turns over signed HTTP. Whatever a miner does wrong — time out,
reset the connection, send garbage, an oversized body or a flood of tool calls — costs it
that turn or episode with a recorded reason, never the round. Each episode runs within the
time left to the round, so the round ends on time whatever the miners do; an episode that
could not even start in time scores 0 (as does every other failure).

When a miner's episodes are all done they are judged (the rubric, and the LLM judge on
the round's sampled tasks), scored by :func:`shopbench.scoring.round.score_round` (the
combine rule, the miner's template penalty for the round, the consensus score formula),
signed and handed to the archive sink; the miner's round score is the mean episode score
over all the round's tasks. Each record names the model (and revision) of the agent card
the miner served in its round (``GET /card``, asked once per miner and round, after its
episodes and within the round's time), under the validator's signature; a card that does
not come, or breaks the card's limits, costs nothing but the name: the records then name
no model.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.archive.errors import SinkError
from shopbench.archive.signing import Signer, sign_trajectory
from shopbench.archive.sink import ArchiveSink
from shopbench.chat import AssistantMessage, ChatMessage
from shopbench.env.env import ShoppingEnv
from shopbench.env.episode import episode_id
from shopbench.env.keys import EpisodeKeys
from shopbench.judging.judge import Judge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.combine import Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.copies import TaskDecisions, round_decisions
from shopbench.scoring.round import RoundJudge, score_round
from shopbench.scoring.template_penalty import MinHasher
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import RunLimits, run_episode
from template.base.metrics import ValidatorMetrics
from template.errors import TransportError
from template.protocol import AgentCard
from template.transport import MinerClient, MinerEndpoint, RemotePolicy

log = logging.getLogger("template.round")
ROUND_CUT = "round_deadline"
"""The failure reason of an episode that could not start before the round's deadline."""
VALIDATOR_FAULT = "validator_error"
"""The failure reason of an episode this validator could not play (logged with its trace)."""
_TRANSPORT_KINDS = frozenset({"policy_error", "policy_timeout"})
TRANSPORT_GRACE_S = 5.0
"""Seconds the episode loop's turn timeout waits past the miner's turn deadline.

Two clocks bound a remote turn: the miner client's deadline (``RemotePolicy`` sends it as
``deadline_ms`` and the client enforces it on the request, raising ``TransportTimeout``,
reason ``timeout``) and the loop's ``turn_timeout_s``. The loop's sits this much later, so a
slow miner is always reported by the transport with its reason, never cut silently by the
loop; the grace also covers what the transport's deadline does not count, such as waiting
for a free request slot in the shared client. The loop's timeout is only the backstop."""


class RoundLimits(BaseModel):
    """How long turns, episodes and the round may take, and how many episodes run at once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_timeout_s: float = Field(gt=0)
    episode_timeout_s: float = Field(gt=0)
    round_timeout_s: float = Field(gt=0)
    concurrency: int = Field(ge=1)


class MinerRound(BaseModel):
    """One miner's round."""

    model_config = ConfigDict(frozen=True)

    uid: int
    hotkey: str
    tasks: int = Field(description="tasks in the round")
    episodes: int = Field(description="episodes played to the end (a trajectory exists)")
    successes: int
    asr: float = Field(description="successes / tasks")
    process: float = Field(description="mean process (judge) score, after the template penalty")
    score: float = Field(description="the round score: mean episode score over the tasks")
    template_factor: float
    turns: int
    failures: dict[str, int] = Field(description="failed turns and episodes, by reason")
    latency_ms_p50: float | None = Field(description="median miner answer time per turn")
    decisions: dict[str, TaskDecisions] = Field(
        default_factory=dict, description="task id → what the miner decided (copy groups)"
    )
    copy_of: int | None = Field(
        default=None,
        description="the uid whose decisions this miner follows (those tasks score 0)",
    )
    copied_tasks: int = Field(
        default=0, ge=0, description="tasks of the round on which it followed copy_of's decisions"
    )
    credited: float | None = Field(
        default=None,
        description="the round score with the copied tasks counted 0 (what the EMA takes); "
        "None: nothing copied, the score stands",
    )
    agent_model: str | None = Field(
        default=None, description="the model the miner's agent card named (None: no card)"
    )
    agent_revision: str | None = Field(default=None, description="the revision it named")


class RoundResult(BaseModel):
    """What a round did."""

    model_config = ConfigDict(frozen=True)

    index: int
    block: int | None
    epoch: int
    task_ids: list[str]
    miners: list[MinerRound]
    archived: int = Field(description="trajectories acknowledged by the sink")
    duration_s: float


@dataclass
class RoundContext:
    """What a round plays with."""

    env: ShoppingEnv
    client: MinerClient
    judge: Judge
    consensus: ConsensusConfig
    signer: Signer
    sink: ArchiveSink
    metrics: ValidatorMetrics
    limits: RoundLimits
    on_episode: Callable[[int, Trajectory | None], None] | None = None
    on_archived: Callable[[Sequence[Trajectory]], None] | None = None
    round_judge: RoundJudge | None = None  # the rubric, and the LLM on a sample
    llm_picked: frozenset[str] = frozenset()  # the round's tasks the LLM reads
    keys: EpisodeKeys | None = None  # episode keys from the catalog seed (None: random)


class _Watched:
    """A remote policy whose transport failures are kept by turn, with their reason."""

    def __init__(self, remote: RemotePolicy) -> None:
        self.remote = remote
        self.name = remote.name
        self.reasons: dict[int, str] = {}

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        turn = 1 + sum(1 for m in messages if m.role == "assistant")
        try:
            return await self.remote.act(messages, tools)
        except TransportError as e:
            self.reasons[turn] = e.reason
            raise


def _failures(trajectory: Trajectory, reasons: dict[int, str]) -> Counter[str]:
    tally: Counter[str] = Counter()
    for f in trajectory.failures:
        kind = reasons.get(f.turn, f.kind) if f.kind in _TRANSPORT_KINDS else f.kind
        tally[kind] += 1
    return tally


def _rotation_of(task: Task) -> dict[str, int]:
    """The epoch and rotation bucket a live task was drawn from (its bank records them)."""
    return {k: v for k in ("epoch", "bucket") if isinstance(v := task.meta.get(k), int)}


async def _play(
    ctx: RoundContext,
    endpoint: MinerEndpoint,
    task: Task,
    block: int | None,
    gate: asyncio.Semaphore,
    deadline: float,
) -> tuple[Trajectory | None, Counter[str], list[float]]:
    """One episode; (trajectory, failures by reason, turn latencies in ms)."""
    async with gate:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, Counter({ROUND_CUT: 1}), []
        key = (
            ctx.keys.next(block, endpoint.uid, task.id)
            if ctx.keys is not None
            else secrets.token_bytes(32)
        )
        cfg = ctx.limits
        remote = RemotePolicy(
            ctx.client, endpoint, episode_id(key), deadline_s=cfg.turn_timeout_s
        )
        policy = _Watched(remote)
        limits = RunLimits(
            turn_timeout_s=cfg.turn_timeout_s + TRANSPORT_GRACE_S,
            episode_timeout_s=min(cfg.episode_timeout_s, left),
        )
        try:
            trajectory = await run_episode(
                ctx.env, task, policy, limits, key=key,
                validator_hotkey=ctx.signer.hotkey, miner_uid=endpoint.uid,
                miner_hotkey=endpoint.hotkey, block=block,
            )  # fmt: skip
            trajectory = trajectory.model_copy(update=_rotation_of(task))
        except Exception:
            # The episode loop absorbs everything a miner does; what escapes it is a fault
            # of this validator (its environment, its catalog), which must cost one episode
            # and be seen in the logs, not end the round.
            log.exception("episode of task %s with uid %d failed", task.id, endpoint.uid)
            return None, Counter({VALIDATOR_FAULT: 1}), []
    return trajectory, _failures(trajectory, policy.reasons), [t.latency_ms for t in remote.turns]


async def _card(ctx: RoundContext, endpoint: MinerEndpoint, deadline: float) -> AgentCard | None:
    """The miner's agent card, or None (logged with the reason) when it does not come, is
    not a valid card (too long, unprintable, not JSON), or the client's card deadline or
    the round's `deadline` (monotonic) passes first."""
    left = deadline - time.monotonic()
    if left <= 0:
        log.info("%s: the round's time is up; its records name no model", endpoint)
        return None
    try:
        async with asyncio.timeout(left):
            return await ctx.client.card(endpoint)
    except TimeoutError:
        log.warning("%s: no agent card before the round's deadline", endpoint)
    except TransportError as e:
        log.warning("%s: no agent card (%s); its records name no model", endpoint, e.detail)
    return None


def _carded(trajectory: Trajectory, card: AgentCard | None) -> Trajectory:
    """`trajectory` naming the model and revision of `card` (valid record values: the card
    holds them to the record's own limits)."""
    if card is None:
        return trajectory
    return trajectory.model_copy(
        update={"agent_model": card.model, "agent_revision": card.revision or None}
    )


async def _judge(ctx: RoundContext, trajectories: list[Trajectory]) -> list[Judgement]:
    """Each episode's judgement: the rubric's verdict, and the LLM's on the sampled tasks."""
    if ctx.round_judge is not None and ctx.llm_picked:
        started = time.perf_counter()
        judged = await ctx.round_judge.assess(trajectories, ctx.llm_picked)
        for _ in trajectories:
            ctx.metrics.judge_seconds.observe((time.perf_counter() - started) / len(trajectories))
        return judged
    out: list[Judgement] = []
    for t in trajectories:
        started = time.perf_counter()
        out.append(Judgement(rubric=ctx.judge.judge(t)))
        ctx.metrics.judge_seconds.observe(time.perf_counter() - started)
        await asyncio.sleep(0)  # let the other miners' turns through between judgements
    return out


async def _judge_and_archive(
    ctx: RoundContext, uid: int, trajectories: list[Trajectory], hasher: MinHasher
) -> tuple[list[Trajectory], float, int]:
    """(scored and signed trajectories, template factor, how many the sink acknowledged)."""
    judged = await _judge(ctx, trajectories)
    result = score_round(str(uid), trajectories, judged, ctx.consensus, hasher)
    scored: list[Trajectory] = []
    for t in result.trajectories:
        scored.append(sign_trajectory(t, ctx.signer))
        await asyncio.sleep(0)  # and between signatures
    archived = 0
    try:
        archived = await ctx.sink.put(scored)
    except SinkError as e:
        log.error("archive refused uid %d's trajectories: %s", uid, e)
    else:
        ctx.metrics.archived.inc(archived)
        if ctx.on_archived is not None:
            ctx.on_archived(scored)
    return scored, result.template.factor, archived


async def _play_miner(
    ctx: RoundContext,
    endpoint: MinerEndpoint,
    tasks: Sequence[Task],
    block: int | None,
    gate: asyncio.Semaphore,
    deadline: float,
    hasher: MinHasher,
) -> tuple[MinerRound, int]:
    async def one(task: Task) -> tuple[Trajectory | None, Counter[str], list[float]]:
        out = await _play(ctx, endpoint, task, block, gate, deadline)
        if ctx.on_episode is not None:
            ctx.on_episode(endpoint.uid, out[0])
        return out

    played = await asyncio.gather(*(one(t) for t in tasks))
    # Asked after the episodes, so the request never takes a turn's place in the client.
    agent = await _card(ctx, endpoint, deadline)
    failures: Counter[str] = Counter()
    latencies: list[float] = []
    trajectories: list[Trajectory] = []
    for trajectory, tally, lat in played:
        failures.update(tally)
        latencies += lat
        if trajectory is not None:
            trajectories.append(_carded(trajectory, agent))
    scored, factor, archived = await _judge_and_archive(ctx, endpoint.uid, trajectories, hasher)
    _meter(ctx.metrics, scored, failures, latencies)
    n = len(tasks)
    result = MinerRound(
        uid=endpoint.uid,
        hotkey=endpoint.hotkey,
        tasks=n,
        episodes=len(scored),
        successes=sum(t.success for t in scored),
        asr=round(sum(t.success for t in scored) / n, 6) if n else 0.0,
        process=round(statistics.fmean(_process(t) for t in scored), 6) if scored else 0.0,
        score=round(sum(t.score or 0.0 for t in scored) / n, 6) if n else 0.0,
        template_factor=factor,
        turns=sum(t.turns for t in scored),
        failures=dict(sorted(failures.items())),
        latency_ms_p50=round(statistics.median(latencies), 3) if latencies else None,
        decisions=round_decisions(scored),
        agent_model=agent.model if agent is not None else None,
        agent_revision=(agent.revision or None) if agent is not None else None,
    )
    return result, archived


def _process(t: Trajectory) -> float:
    return t.judge.score if t.judge is not None else 0.0


def _meter(
    metrics: ValidatorMetrics, scored: list[Trajectory], failures: Counter[str], lat: list[float]
) -> None:
    for t in scored:
        metrics.episodes.labels("success" if t.success else "failure").inc()
        metrics.turns.inc(t.turns)
        parts = t.judge.parts if t.judge is not None else None
        if parts is not None and parts.fallback is not None:
            metrics.judge_fallbacks.labels(parts.fallback.kind).inc()
        elif parts is not None and parts.llm is not None:
            metrics.llm_judged.inc()
    for reason, n in failures.items():
        metrics.failures.labels(reason).inc(n)
    for ms in lat:
        metrics.miner_latency.observe(ms / 1000)


async def play_round(
    ctx: RoundContext,
    index: int,
    block: int | None,
    epoch: int,
    miners: Sequence[MinerEndpoint],
    tasks: Sequence[Task],
) -> RoundResult:
    """Play `tasks` with every miner of `miners`; judge, score, sign and archive.

    Returns within about the round timeout plus one turn, whatever the miners do.
    """
    started = time.monotonic()
    deadline = started + ctx.limits.round_timeout_s
    gate = asyncio.Semaphore(ctx.limits.concurrency)
    hasher = MinHasher(ctx.consensus.template.permutations, ctx.consensus.template.seed)
    outcomes = await asyncio.gather(
        *(_play_miner(ctx, m, tasks, block, gate, deadline, hasher) for m in miners)
    )
    duration = time.monotonic() - started
    ctx.metrics.rounds.inc()
    ctx.metrics.round_seconds.set(duration)
    ctx.metrics.miners.set(len(miners))
    return RoundResult(
        index=index,
        block=block,
        epoch=epoch,
        task_ids=[t.id for t in tasks],
        miners=[r for r, _ in outcomes],
        archived=sum(a for _, a in outcomes),
        duration_s=round(duration, 3),
    )
