"""The episode score formula (SN15's success term plus a small partial credit) and the
scoring of one miner's round, as validators and calibration run it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pydantic import ValidationError

from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.combine import Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.round import score_round
from shopbench.scoring.score import DEFAULT_FORMULA, ScoreFormula
from shopbench.scoring.template_penalty import TemplateConfig


def test_success_follows_sn15() -> None:
    f = DEFAULT_FORMULA
    assert f.score(True, 0.0) == 0.3
    assert f.score(True, 0.4) == pytest.approx(0.65)
    assert f.score(True, 0.8) == 1.0
    assert f.score(True, 1.0) == 1.0  # capped
    assert f.score(True, 0.9, rule=0.0) == 1.0  # a success ignores the rule score


def test_failure_gets_a_small_partial_credit_ordered_by_rule_and_process() -> None:
    f = DEFAULT_FORMULA
    assert f.score(False, 0.8, rule=1.0) == pytest.approx(0.1)
    assert f.score(False, 0.8, rule=0.5) == pytest.approx(0.05)
    assert f.score(False, 0.0, rule=0.5) == pytest.approx(0.015)
    assert f.score(False, 0.9, rule=0.0) == 0.0
    near, far = f.score(False, 0.9, rule=0.75), f.score(False, 0.9, rule=0.25)
    careful, careless = f.score(False, 0.9, rule=0.5), f.score(False, 0.1, rule=0.5)
    assert near > far and careful > careless


def test_every_success_outranks_every_failure() -> None:
    grid = [i / 10 for i in range(11)]
    worst_success = min(DEFAULT_FORMULA.score(True, q) for q in grid)
    best_failure = max(DEFAULT_FORMULA.score(False, q, r) for q, r in itertools.product(grid, grid))
    assert worst_success > best_failure


def test_out_of_range_inputs_are_clipped_and_bad_formulas_rejected() -> None:
    f = DEFAULT_FORMULA
    assert f.score(True, -1.0) == 0.3 and f.score(True, 7.0) == 1.0
    assert f.score(False, 1.0, rule=3.0) == pytest.approx(0.1)
    with pytest.raises(ValidationError, match="must be below floor"):
        ScoreFormula(partial=0.3)
    with pytest.raises(ValidationError):
        ScoreFormula(q_full=0.0)
    assert ScoreFormula(floor=0.2, slope=0.8, q_full=1.0).score(True, 0.5) == pytest.approx(0.6)


# -- one miner's round, scored as validators score it -------------------------------------


@pytest.fixture(scope="module")
def played(catalog: Any) -> dict[str, list[Trajectory]]:
    from support.judge_agents import Careful, Narrator, make_tasks, play

    env = ShoppingEnv(catalog)
    tasks = make_tasks(catalog, 4)
    return {"careful": play(env, tasks, Careful(0)), "narrator": play(env, tasks, Narrator(0))}


def test_a_round_is_combined_then_penalised_then_scored_by_the_consensus(
    played: dict[str, list[Trajectory]],
) -> None:
    rubric = RubricJudge()
    consensus = ConsensusConfig()
    for name, trajectories in played.items():
        bases = [rubric.judge(t) for t in trajectories]
        # The LLM read the first two episodes and thinks less of them than the rubric.
        llm = [b.model_copy(update={"score": 0.0, "judge_id": "llm"}) for b in bases]
        judged = [Judgement(rubric=b, llm=m if i < 2 else None)
                  for i, (b, m) in enumerate(zip(bases, llm, strict=True))]  # fmt: skip
        scored = score_round(name, trajectories, judged, consensus)
        factor = scored.template.factor
        assert scored.template.episodes == 4
        for i, (t, v, b) in enumerate(zip(scored.trajectories, scored.verdicts, bases,
                                          strict=True)):  # fmt: skip
            before = consensus.combine.score(b.score, 0.0) if i < 2 else b.score
            assert v.unpenalised_score == before
            assert v.score == round(before * factor, 6) and v.template_factor == factor
            assert t.judge is not None and t.judge.score == v.score
            assert t.judge.model_extra["score_formula"] == consensus.score.id
            assert t.score == consensus.score.score(t.success, v.score, t.outcome.mean_rule)
        if name == "careful":
            assert factor == 1.0
        else:  # the same narration for every task
            assert factor < 1.0


def test_a_round_takes_its_parameters_from_the_consensus_and_pairs_its_inputs(
    played: dict[str, list[Trajectory]],
) -> None:
    trajectories = played["narrator"]
    judged = [Judgement(rubric=RubricJudge().judge(t)) for t in trajectories]
    lenient = ConsensusConfig(
        template=TemplateConfig(min_factor=1.0), score=ScoreFormula(id="lenient/1", floor=0.2)
    )
    scored = score_round("m", trajectories, judged, lenient)
    assert scored.template.factor == 1.0
    assert [v.score for v in scored.verdicts] == [j.rubric.score for j in judged]
    assert {t.judge.model_extra["score_formula"] for t in scored.trajectories} == {"lenient/1"}
    with pytest.raises(ValueError, match="one judgement per trajectory: 4 trajectories, 3"):
        score_round("m", trajectories, judged[:3], lenient)
