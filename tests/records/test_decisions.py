"""The judge checks decisions and claims against what the validator knows: real episodes of the
careful shopper and the bluffer (opens products like a shopper, recommends the cheapest,
claims every requirement holds) on generated tasks of every intent, judged and scored in a
round as validators do."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step
from shopbench.agents.registry import make_policy
from shopbench.chat import ChatMessage
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge, load_rubric
from shopbench.outcome.constraints import Regrader, price_bound, slot_from_grade
from shopbench.records.trajectory import ToolLogEntry, Trajectory
from shopbench.records.verdict import Verdict
from shopbench.scoring.combine import Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.decision_rules import (
    DecisionConfig,
    decision_report,
    penalise_decisions,
)
from shopbench.scoring.round import score_round
from shopbench.scoring.template_penalty import TemplateConfig, penalise
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.intent_registry import intent_names
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode

V1_GATES = [
    "real_output", "no_judge_directed_text", "grounded_queries", "searched_first",
    "viewed_recommended", "reasoning_matches_calls", "cites_observed_specifics",
    "compared_candidates",
]  # fmt: skip


@pytest.fixture(scope="module")
def env(catalog: Any) -> ShoppingEnv:
    return ShoppingEnv(catalog)


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    """Four generated tasks of each intent."""
    intents = list(intent_names())
    return build_tasks(BuildConfig(catalog=catalog_dir, intents=intents, n=4, seed=11)).tasks


def _play(env: ShoppingEnv, tasks: list[Task], policy: Any) -> list[Trajectory]:
    async def go() -> list[Trajectory]:
        return [await run_episode(env, t, policy, key=bytes([i]) * 32)
                for i, t in enumerate(tasks)]

    return asyncio.run(go())


@pytest.fixture(scope="module")
def careful(env: ShoppingEnv, tasks: list[Task]) -> list[Trajectory]:
    return _play(env, tasks, make_policy("careful", seed=1))


@pytest.fixture(scope="module")
def bluffer(env: ShoppingEnv, tasks: list[Task]) -> list[Trajectory]:
    return _play(env, tasks, make_policy("bluffer", seed=1))


def test_a_graded_slot_rebuilt_grades_the_recommendation_as_the_grader_did(
    env: ShoppingEnv, careful: list[Trajectory], bluffer: list[Trajectory]
) -> None:
    regraded = 0
    for t in careful + bluffer:
        for grade, cid in zip(t.outcome.slots, t.recommended_ids, strict=False):
            if grade.product_id is None or cid is None:
                continue
            regrader = Regrader(grade)
            assert regrader.ok
            [product] = env.catalog.get([cid])
            assert product is not None
            assert regrader.constraints(product) == grade.constraints
            regraded += 1
    assert regraded >= 20
    assert price_bound("<= 500") is not None and price_bound("75..95").lo == 75  # type: ignore[union-attr]
    assert price_bound("about 500") is None
    knowledge = next(t for t in careful if t.intent == "knowledge" and t.recommended)
    assert slot_from_grade(knowledge.outcome.slots[0]) is None  # graded on its key attribute


def test_honest_picks_follow_the_constraints_and_their_claims_hold(
    careful: list[Trajectory],
) -> None:
    judge = RubricJudge()
    verdicts = [judge.judge(t) for t in careful]
    for t, v in zip(careful, verdicts, strict=True):
        decision = v.criterion("decision_follows_constraints")
        claims = v.criterion("claims_supported")
        assert decision is not None and decision.passed, decision
        assert claims is not None and claims.passed, claims.evidence
        if t.success:
            assert v.signals["claims_false"] == 0
    assert sum(v.signals["decision_points"] for v in verdicts) >= 8
    report = decision_report("careful", verdicts)
    assert report.factor == 1.0 and report.margin < 0
    assert all(f.follows_rule <= f.follows_constraints for f in report.rules)


def test_the_bluffer_passes_the_v1_rubric_and_v2_catches_it(bluffer: list[Trajectory]) -> None:
    v1 = RubricJudge(load_rubric(_packaged("rubric_v1.toml")))
    v2 = RubricJudge()
    lucky = [t for t in bluffer if t.success]
    assert lucky, "the bluffer needs a lucky success on these tasks"
    # What a reader of the text sees: every gate of the old rubric passes.
    for t in lucky:
        old = v1.judge(t)
        assert list(old.gates) == V1_GATES and all(old.gates.values()), old.rationale
        assert old.score == 0.9
    # What the validator knows: claims that its own grader and observations contradict.
    verdicts = [v2.judge(t) for t in bluffer]
    false = [v for v in verdicts if v.stopped_at == "claims_supported"]
    assert false and all(v.score == 0.3 for v in false)
    c = false[0].criterion("claims_supported")
    assert c is not None and "false claim" in c.evidence and "shown to the agent" in c.evidence
    # One lucky episode alone looks fine; the round shows the picks follow the price.
    for t, v in zip(bluffer, verdicts, strict=True):
        if t.success:
            assert v.score == 0.9, v.rationale
    scored = score_round("bluffer", bluffer, [Judgement(rubric=v) for v in verdicts],
                         ConsensusConfig())
    assert scored.decisions.rule == "cheapest_opened" and scored.decisions.factor == 0.5
    assert scored.decisions.margin >= 0.5
    for t, v in zip(scored.trajectories, scored.verdicts, strict=True):
        assert v.decision_factor == 0.5 and v.unpenalised_score is not None
        if t.success:
            assert v.score <= 0.5 and t.judge is not None and t.judge.score == v.score


def test_the_decision_penalty_composes_with_the_template_penalty(
    bluffer: list[Trajectory],
) -> None:
    v = RubricJudge().judge(bluffer[0])
    both = penalise_decisions(penalise(v, 0.8), 0.5)
    assert both.score == pytest.approx(v.score * 0.4)
    again = penalise(both, 0.8)  # re-applying either factor does not compound
    assert again.score == both.score and again.decision_factor == 0.5
    assert penalise_decisions(again, 1.0).score == pytest.approx(v.score * 0.8)
    with pytest.raises(ValueError, match="decision factor"):
        penalise_decisions(v, 1.5)
    cfg = DecisionConfig(min_disagreements=2, low=0.0, high=0.5, min_factor=0.4)
    assert (cfg.factor(-1.0), cfg.factor(0.25), cfg.factor(0.9)) == (1.0, 0.7, 0.4)
    with pytest.raises(ValueError, match="must be above"):
        DecisionConfig(low=0.5, high=0.5)
    # Fewer disagreements than the minimum: no rule is named, nothing is charged.
    quiet = decision_report("m", [v], DecisionConfig(min_disagreements=10_000))
    assert quiet.rule is None and quiet.factor == 1.0
    # With the template penalty switched off, the decision check still halves the bluffer.
    off = ConsensusConfig(template=TemplateConfig(min_factor=1.0))
    verdicts = [Judgement(rubric=RubricJudge().judge(t)) for t in bluffer]
    scored = score_round("bluffer", bluffer, verdicts, off)
    assert scored.template.factor == 1.0 and scored.decisions.factor == 0.5


class _Blind(ScriptedPolicy):
    """Searches the request's first words, recommends the cheapest hit without opening it,
    and claims every requirement holds."""

    name = "blind"

    def script(self, ctx: Context) -> Script:
        words = " ".join(ctx.query.split()[:6])
        results = yield Step(calls=[("find_product", {"q": words, "page": 1})],
                             reasoning=f"Searching for {words}.")
        hits = list(results[0].hits) if results else []
        if hits:
            pick = min(hits, key=lambda h: h.price)
            yield Step(
                calls=[("recommend_product", {"product_ids": pick.product_id})],
                reasoning=f"{pick.product_id} meets every requirement of the request.",
            )
        yield Step(calls=[("terminate", {"status": "success"})], reasoning="Done.")


def test_claims_about_details_never_opened_are_unsupported_not_false(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    judge = RubricJudge()
    kinds: set[str] = set()
    for t in _play(env, tasks, _Blind()):
        ev = judge.evidence(t)
        if ev.decisions is None:
            continue
        misses = [m for s in ev.decisions.slots for m in s.misses]
        for c in ev.decisions.claims:
            kinds.add(c.verdict)
            # Price and services show in the listing it picked from; the rest it never saw.
            if any(m.kind in ("price", "service") for m in misses):
                assert c.verdict == "false"
            elif misses:
                assert c.verdict == "unsupported" and "never opened" in c.why
            else:
                assert c.verdict == "true"
        v = judge.judge_evidence(ev)
        # From rubric v4, a claim of success with a slot left empty is false as well.
        short = bool(ev.decisions.empty) and any(
            c.kind in ("status", "all") for c in ev.decisions.claims
        )
        assert v.gates["claims_supported"] == (
            all(c.verdict != "false" for c in ev.decisions.claims) and not short
        )
        assert v.signals["claims_unsupported"] == sum(
            c.verdict == "unsupported" for c in ev.decisions.claims
        )
    assert {"false", "unsupported"} <= kinds


def _say(t: Trajectory, text: str, status: str) -> Trajectory:
    """`t` with every assistant turn from the recommendation on saying `text`, and its
    terminate call (and the environment's answer to it) with `status`."""
    first = next(i for i, m in enumerate(t.messages) if m.role == "assistant" and any(
        c.function.name == "recommend_product" for c in m.tool_calls or []))
    messages: list[ChatMessage] = []
    log: list[ToolLogEntry] = list(t.tool_log)
    answer = f"The interaction has been completed with status: {status}"
    for i, m in enumerate(t.messages):
        if i >= first and m.role == "assistant":
            m = m.model_copy(update={"reasoning_content": text, "content": None})
        if m.role == "tool" and (m.content or "").startswith("The interaction has been"):
            m = m.model_copy(update={"content": answer})
        messages.append(m)
    for j, e in enumerate(log):
        if e.name == "terminate":
            log[j] = e.model_copy(update={
                "arguments": {"status": status},
                "result_digest": hashlib.sha256(answer.encode()).hexdigest(),
            })
    return t.model_copy(update={"messages": messages, "tool_log": log})


def test_a_denial_is_no_claim_and_an_assertion_is(bluffer: list[Trajectory]) -> None:
    judge = RubricJudge()
    t = next(t for t in bluffer if judge.judge(t).stopped_at == "claims_supported")
    denied = judge.judge(_say(t, "It does not meet every requirement, but it is the closest "
                                 "I found.", "failure"))
    assert denied.gates["claims_supported"] and denied.signals["claims"] == 0
    asserted = judge.judge(_say(t, "I checked: it meets every requirement.", "failure"))
    c = asserted.criterion("claims_supported")
    assert c is not None and not c.passed and "'meets every requirement'" in c.evidence


def _packaged(name: str) -> str:
    from importlib import resources

    return str(resources.files("shopbench.judging.rubric").joinpath("data", name))


def test_verdicts_record_the_evidence_and_the_rubric_files_stay_loadable(
    bluffer: list[Trajectory],
) -> None:
    v = RubricJudge().judge(bluffer[0])
    again = Verdict.model_validate_json(v.model_dump_json())
    assert again == v and again.criterion("decision_follows_constraints") is not None
    for key in ("decision_points", "claims_false", "rule_cheapest_opened_disagree"):
        assert key in v.signals
    old = load_rubric(_packaged("rubric_v1.toml"))
    assert old.rubric.version == "1" and load_rubric().rubric.version == "4"
    assert [c.name for c in load_rubric().criteria][:9] == [
        "real_output", "no_judge_directed_text", "grounded_queries", "searched_first",
        "viewed_recommended", "claims_supported", "reasoning_matches_calls",
        "asked_before_assuming", "decision_follows_constraints",
    ]
