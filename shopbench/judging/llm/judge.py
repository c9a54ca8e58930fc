"""The LLM judge: a second opinion on a trajectory from any OpenAI-compatible endpoint.

One judgement: read the record leniently, build its view (tool log, framed transcript), look
the (trajectory hash, judge version) up in the cache, render the versioned prompt within the
token budget, check each endpoint serves the pinned model (``/v1/models``, remembered for a
while), ask every usable endpoint at temperature 0 for a JSON-schema judgement of each rubric
criterion (reason first), score each answer with the rubric's rule, and take the median.

:meth:`LLMJudge.assess` raises :class:`~shopbench.judging.errors.JudgeUnavailable` when
no verdict can be had in time; :meth:`LLMJudge.ajudge` and :meth:`LLMJudge.judge` (the
:class:`~shopbench.judging.judge.Judge` protocol) never do: they answer with the rubric's
verdict and record the fallback in it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shopbench.judging.errors import Failure, JudgeSpecError, JudgeUnavailable
from shopbench.judging.judge import Judge
from shopbench.judging.llm.cache import MemoryCache, VerdictCache, cache_key
from shopbench.judging.llm.client import JudgeClient, Sleep
from shopbench.judging.llm.config import Endpoint, LLMJudgeConfig
from shopbench.judging.llm.ensemble import Member, median_verdict, score_judgement
from shopbench.judging.llm.facts import facts_text
from shopbench.judging.llm.fallback import fallback_verdict
from shopbench.judging.llm.identity import IdentityCheck, check_identity, served_models
from shopbench.judging.llm.render import Prompt, Renderer
from shopbench.judging.llm.reply import read_completion, read_reply, response_format
from shopbench.judging.llm.view import build_view
from shopbench.judging.record import read_record
from shopbench.judging.rubric.judge import Rubric, RubricJudge, load_rubric
from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict

log = logging.getLogger("shopbench.judging.llm")

_FORMAT_WORDS = ("response_format", "json_schema", "guided", "structured", "grammar")


def _intent(trajectory: Trajectory | Mapping[str, Any]) -> str:
    if isinstance(trajectory, Trajectory):
        return str(trajectory.intent)
    value = trajectory.get("intent") if isinstance(trajectory, Mapping) else None
    return value if isinstance(value, str) else "unknown"


class LLMJudge:
    """The LLM judge (see the module docstring). Reusable across event loops; call
    :meth:`aclose` from the loop that used it last."""

    id = "llm"

    def __init__(
        self,
        config: LLMJudgeConfig,
        *,
        rubric: Rubric | None = None,
        cache: VerdictCache | None = None,
        sleep: Sleep | None = None,
        fallback: Judge | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        release = config.release
        self.config = config
        self.rubric = rubric or load_rubric()
        if not config.override and self.rubric.rubric.version != release.rubric_version:
            raise JudgeSpecError(
                f"the release's LLM judge reads rubric version {release.rubric_version!r}; "
                f"the rubric given is version {self.rubric.rubric.version!r}"
            )
        self.renderer = Renderer(release, self.rubric)
        self.version = release.judge_version
        models = sorted({e.model for e in config.endpoints})
        pinned = f"@{release.revision[:12]}" if release.revision and not config.override else ""
        self.judge_id = (
            f"llm-judge/{self.version}+{'|'.join(models)}{pinned}+prompt/"
            f"{release.prompt_version}+rubric/{self.rubric.rubric.version}"
        )
        self.cache_version = f"{self.judge_id}#{release.fingerprint()}"
        self._names = [c.name for c in self.rubric.criteria]
        self._format = response_format(self._names)
        self._client = JudgeClient(config, sleep)
        self._cache: VerdictCache = cache if cache is not None else MemoryCache()
        self._fallback = fallback
        self._facts: RubricJudge | None = None
        self._clock = clock
        self._identity: dict[str, tuple[float, IdentityCheck]] = {}
        self._sems: dict[str, asyncio.Semaphore] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._state_loop: asyncio.AbstractEventLoop | None = None

    # -- the Judge protocol -------------------------------------------------------------------

    def judge(self, trajectory: Trajectory | Mapping[str, Any]) -> Verdict:
        """The verdict on one trajectory, blocking; the rubric's, with the fallback recorded,
        when the LLM cannot answer. Works inside a running event loop too (on a thread)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._judge_closing(trajectory))
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self._judge_closing(trajectory)).result()

    async def _judge_closing(self, trajectory: Trajectory | Mapping[str, Any]) -> Verdict:
        try:
            return await self.ajudge(trajectory)
        finally:
            await self.aclose()  # the loop ends with this call; its pool must not outlive it

    async def ajudge(self, trajectory: Trajectory | Mapping[str, Any]) -> Verdict:
        """Like :meth:`judge`, in the caller's event loop."""
        try:
            return await self.assess(trajectory)
        except JudgeUnavailable as e:
            log.warning("LLM judge fell back to the rubric (%s): %s", e.kind, e)
            return fallback_verdict(self.fallback_judge().judge(trajectory), e, self.judge_id)

    async def ajudge_many(
        self, trajectories: Sequence[Trajectory | Mapping[str, Any]], concurrency: int = 8
    ) -> list[Verdict]:
        """:meth:`ajudge` over many trajectories, at most `concurrency` at once, in order."""
        gate = asyncio.Semaphore(concurrency)

        async def one(t: Trajectory | Mapping[str, Any]) -> Verdict:
            async with gate:
                return await self.ajudge(t)

        return list(await asyncio.gather(*(one(t) for t in trajectories)))

    def facts_judge(self) -> RubricJudge:
        """The rubric judge whose evidence gives the prompt its validator facts."""
        if self._facts is None:
            self._facts = RubricJudge(self.rubric)
        return self._facts

    def fallback_judge(self) -> Judge:
        """The judge whose verdict stands in when the LLM cannot answer (the rubric)."""
        if self._fallback is None:
            from shopbench.judging.rubric.judge import RubricJudge

            self._fallback = RubricJudge(self.rubric)
        return self._fallback

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.aclose()

    # -- one judgement ------------------------------------------------------------------------

    async def assess(self, trajectory: Trajectory | Mapping[str, Any]) -> Verdict:
        """The LLM verdict on one trajectory, from the cache when it has one.

        Raises :class:`JudgeUnavailable` (with its kind) when fewer endpoints than the
        quorum answered within the deadline, when no endpoint serves the judge model, or
        when the trajectory does not fit the prompt budget.
        """
        record = read_record(trajectory)
        view = build_view(record, _intent(trajectory))
        key = cache_key(view.content_hash, self.cache_version)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        evidence = self.facts_judge().evidence(trajectory)
        facts = facts_text(evidence.decisions, record.outcome, evidence.recommend_turn)
        prompt = self.renderer.render(view, record.notes, facts)
        try:
            verdict = await asyncio.wait_for(self._ensemble(prompt), self.config.deadline_s)
        except TimeoutError:
            raise JudgeUnavailable(
                "deadline", f"no verdict within the judge's {self.config.deadline_s:g} s deadline"
            ) from None
        self._cache.put(key, verdict)
        return verdict

    async def check_endpoints(self) -> list[IdentityCheck]:
        """Check every endpoint's identity now (also refreshing the remembered checks); an
        endpoint that cannot be reached is reported as not ok with the reason."""
        out = []
        for e in self.config.endpoints:
            try:
                out.append(await self._identity_of(e, fresh=True))
            except JudgeUnavailable as failure:
                out.append(IdentityCheck(endpoint=str(e), ok=False, reason=str(failure)))
        return out

    async def _identity_of(self, endpoint: Endpoint, fresh: bool = False) -> IdentityCheck:
        key = str(endpoint)
        # Judgements starting together wait for one check instead of each asking.
        async with self._loop_state()[1].setdefault(key, asyncio.Lock()):
            known = self._identity.get(key)
            if (known is not None and not fresh
                    and self._clock() - known[0] < self.config.identity_ttl_s):
                return known[1]
            return await self._check(endpoint)

    async def _check(self, endpoint: Endpoint) -> IdentityCheck:
        key = str(endpoint)
        now = self._clock()
        body = await self._client.models(endpoint)
        try:
            served = served_models(body)
        except ValueError as e:
            raise JudgeUnavailable("bad_reply", f"{endpoint.models_url}: {e}") from None
        release = self.config.release
        check = check_identity(
            key, served, endpoint.model,
            None if self.config.override else (release.revision or None),
            release.context_tokens,
        )
        if not check.ok:
            log.error("LLM judge endpoint refused, its judgements fall back to the rubric: %s",
                      check.reason)
        elif release.revision and check.revision is None and not self.config.override:
            log.warning("LLM judge endpoint accepted without a revision check: %s", check.reason)
        self._identity[key] = (now, check)
        return check

    def _loop_state(self) -> tuple[dict[str, asyncio.Semaphore], dict[str, asyncio.Lock]]:
        """The per-endpoint semaphores and identity locks of the running loop (asyncio
        primitives belong to one loop; a new loop gets new ones)."""
        loop = asyncio.get_running_loop()
        if self._state_loop is not loop:
            self._sems, self._locks, self._state_loop = {}, {}, loop
        return self._sems, self._locks

    def _sem(self, endpoint: Endpoint) -> asyncio.Semaphore:
        sems = self._loop_state()[0]
        return sems.setdefault(str(endpoint), asyncio.Semaphore(self.config.concurrency))

    async def _ensemble(self, prompt: Prompt) -> Verdict:
        members = await asyncio.gather(*(self._member(e, prompt) for e in self.config.endpoints))
        return median_verdict(members, self.config.quorum)

    def _body(self, endpoint: Endpoint, prompt: Prompt, structured: bool) -> dict[str, Any]:
        release = self.config.release
        body: dict[str, Any] = {
            "model": endpoint.model,
            "messages": prompt.messages(),
            "temperature": 0.0,
            "top_p": 1.0,
            "seed": release.seed,
            "max_tokens": release.max_reply_tokens,
            "n": 1,
            "stream": False,
            **self.config.extra_body,
        }
        if structured:
            body["response_format"] = self._format
        return body

    async def _member(self, endpoint: Endpoint, prompt: Prompt) -> Member:
        try:
            return Member(str(endpoint), verdict=await self._ask(endpoint, prompt))
        except JudgeUnavailable as e:
            return Member(str(endpoint), failure=e)

    async def _ask(self, endpoint: Endpoint, prompt: Prompt) -> Verdict:
        check = await self._identity_of(endpoint)
        if not check.ok:
            raise JudgeUnavailable("model_mismatch", check.reason)
        structured = self.config.structured == "json_schema"
        notes = list(prompt.notes)
        async with self._sem(endpoint):
            try:
                data = await self._client.chat(endpoint, self._body(endpoint, prompt, structured))
            except Failure as e:
                refused_format = (
                    structured and e.status == 400
                    and any(w in e.body.lower() for w in _FORMAT_WORDS)
                )
                if not refused_format:
                    raise
                notes.append("the server refused structured output; asked again without it")
                data = await self._client.chat(endpoint, self._body(endpoint, prompt, False))
        completion = read_completion(data, endpoint.chat_url)
        try:
            judgement = read_reply(completion.text, self._names)
        except JudgeUnavailable as e:
            if completion.finish_reason == "length":
                raise JudgeUnavailable(
                    "truncated",
                    f"{endpoint.chat_url}: the reply stopped at the "
                    f"{self.config.release.max_reply_tokens}-token limit before its judgement "
                    "was complete",
                ) from None
            raise JudgeUnavailable("bad_reply", f"{endpoint.chat_url}: {e}") from None
        verdict = score_judgement(
            self.rubric, judgement, judge_id=self.judge_id, judge_version=self.version,
            notes=notes,
        )
        tokens = self.renderer.tokens(prompt.system, prompt.user)
        return verdict.model_copy(update={"signals": {"prompt_tokens_estimate": float(tokens)}})
