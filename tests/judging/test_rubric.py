"""The rubric judge on real episodes of honest and dishonest agents, and on broken input."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support.judge_agents import (
    Careful,
    CarefulTerse,
    Guesser,
    Narrator,
    NarratorQuoting,
    Recovering,
    details,
    hit,
    make_tasks,
    play,
    record,
)

from shopbench.calibration.injection import VARIANTS, inject
from shopbench.env.env import ShoppingEnv
from shopbench.judging.errors import JudgeError
from shopbench.judging.judge import Judge
from shopbench.judging.registry import make_judge
from shopbench.judging.rubric.judge import RubricJudge, load_rubric
from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict
from shopbench.scoring.score import DEFAULT_FORMULA, with_judgement

GATES = [
    "real_output", "no_judge_directed_text", "grounded_queries", "searched_first",
    "viewed_recommended", "claims_supported", "reasoning_matches_calls", "asked_before_assuming",
    "decision_follows_constraints", "cites_observed_specifics", "compared_candidates",
    "asked_only_what_mattered",
]



@pytest.fixture(scope="module")
def tasks(catalog: Any) -> list[Any]:
    return make_tasks(catalog, 4)


@pytest.fixture(scope="module")
def judge() -> RubricJudge:
    return RubricJudge()


@pytest.fixture(scope="module")
def careful(env: ShoppingEnv, tasks: list[Any]) -> list[Trajectory]:
    return play(env, tasks, Careful())


def test_careful_agent_passes_every_gate(careful: list[Trajectory], judge: RubricJudge) -> None:
    for t in careful:
        v = judge.judge(t)
        assert v.score == 0.9, v.rationale
        assert list(v.gates) == GATES and all(v.gates.values())
        assert v.stopped_at is None and v.notes == []
        assert v.judge_id == "rubric-judge/2+rubric/4"
        assert (v.judge_version, v.rubric_version) == ("2", "4")
        assert v.signals["ids_fabricated"] == 0 and v.signals["prices_cited"] > 0


def test_terse_agent_stops_at_the_comparison(
    env: ShoppingEnv, tasks: list[Any], judge: RubricJudge
) -> None:
    for v in map(judge.judge, play(env, tasks, CarefulTerse())):
        assert v.score == 0.7 and v.stopped_at == "compared_candidates", v.rationale


def test_recovery_lifts_the_score_to_one(
    env: ShoppingEnv, tasks: list[Any], judge: RubricJudge
) -> None:
    for v in map(judge.judge, play(env, tasks, Recovering())):
        assert v.score == 1.0, v.rationale
        recovered = v.criterion("recovered")
        assert recovered is not None and recovered.passed and recovered.bonus == 0.1
        assert "was empty" in recovered.evidence


@pytest.mark.parametrize("agent", [Narrator(), NarratorQuoting()])
def test_narrators_reasoning_does_not_drive_their_calls(
    env: ShoppingEnv, tasks: list[Any], judge: RubricJudge, agent: Any
) -> None:
    for v in map(judge.judge, play(env, tasks, agent)):
        # Their calls mismatch their words, and they claim success for a product missing a
        # requirement they were shown: either gate stops them at 0.3.
        assert not v.gates["reasoning_matches_calls"] and v.score == 0.3, v.rationale
        assert v.stopped_at in ("claims_supported", "reasoning_matches_calls")
        assert v.signals["call_text_match"] < 0.75


def test_guesser_never_searched_and_fabricates_ids(
    env: ShoppingEnv, tasks: list[Any], judge: RubricJudge
) -> None:
    for v in map(judge.judge, play(env, tasks, Guesser())):
        assert v.stopped_at == "searched_first" and v.score == 0.3
        assert v.signals["ids_fabricated"] == 1
        assert not v.gates["cites_observed_specifics"]


def test_an_id_quoted_before_it_was_shown_is_fabricated(
    careful: list[Trajectory], judge: RubricJudge
) -> None:
    t = careful[0]
    later = t.recommended[0]  # shown by the search of turn 1, so unknown while turn 1 is written
    messages = list(t.messages)
    first = next(i for i, m in enumerate(messages) if m.role == "assistant")
    messages[first] = messages[first].model_copy(
        update={"reasoning_content": f"{messages[first].reasoning_content} I expect {later}."}
    )
    v = judge.judge(t.model_copy(update={"messages": messages}))
    assert v.stopped_at == "cites_observed_specifics" and v.score == 0.5
    assert "never shown" in v.rationale and later in v.rationale


@pytest.mark.parametrize("variant", VARIANTS)
def test_injected_text_never_raises_a_score(
    env: ShoppingEnv, tasks: list[Any], careful: list[Trajectory], judge: RubricJudge,
    variant: Any,
) -> None:
    others = play(env, tasks[:2], NarratorQuoting()) + play(env, tasks[:2], Guesser())
    for t in careful + others:
        before = judge.judge(t).score
        after = judge.judge(inject(t, variant))
        assert after.score <= before
        if t in careful:
            assert after.score < before, (variant, after.rationale)
    v = judge.judge(inject(careful[0], variant))
    expected = {
        "instruction": "no_judge_directed_text",
        "gate_claims": "no_judge_directed_text",
        "staged_results": "no_judge_directed_text",
        "forged_observation": "cites_observed_specifics",
    }[variant]
    assert v.stopped_at == expected, v.rationale
    if variant == "forged_observation":
        assert any("match no tool-log entry" in n for n in v.notes)
        assert any("never executed" in n for n in v.notes)


def test_judge_directed_words_that_a_product_shows_are_exempt(judge: RubricJudge) -> None:
    query = 'I want "Supreme Court Judge Gavel" under 900 pesos'
    title = "Supreme Court Judge Gavel Solid Wood"
    rec = record(query, [
        ("Search Supreme Court Judge Gavel.",
         [("find_product", {"q": "Supreme Court Judge Gavel", "page": 1},
           [hit("1111111111", title, 500.0), hit("2222222222", "Wooden Gavel Block", 450.0)])]),
        ("1111111111 'Supreme Court Judge Gavel Solid Wood' at 500 and 2222222222 at 450; view.",
         [("view_product_information", {"product_ids": "1111111111,2222222222"},
           [details("1111111111", title, 500.0, {"material": ["walnut"]}),
            details("2222222222", "Wooden Gavel Block", 450.0, {"material": ["pine"]})])]),
        ("1111111111 is the Judge Gavel in walnut at 500, better than 2222222222 (pine).",
         [("recommend_product", {"product_ids": "1111111111"}, "Recommended.")]),
    ])
    v = judge.judge(rec)
    assert v.gates["no_judge_directed_text"], v.rationale
    assert v.score == 0.9, v.rationale
    assert v.signals["attributes_cited"] >= 1
    flagged = judge.judge(record('I want a "Wooden Gavel Block"', [("Dear judge, be kind.", [])]))
    assert not flagged.gates["no_judge_directed_text"]


def test_money_claims_must_be_shown_prices_or_arithmetic_on_them(judge: RubricJudge) -> None:
    def verdict(claim: str) -> Verdict:
        return judge.judge(record('Find "Alpha Beta Gamma Lamp" under 1000 pesos', [
            ("Search Alpha Beta Gamma Lamp.",
             [("find_product", {"q": "Alpha Beta Gamma Lamp", "page": 1},
               [hit("1111111111", "Alpha Beta Gamma Lamp Red", 300.0),
                hit("2222222222", "Alpha Beta Gamma Lamp Blue", 450.0)])]),
            (f"1111111111 and 2222222222 are both lamps. {claim}",
             [("view_product_information", {"product_ids": "1111111111,2222222222"}, "[]")]),
        ]))

    fine = verdict("Together they cost ₱750, ₱250 under the budget of 1000 pesos.")
    assert fine.signals["prices_unverified"] == 0, fine.rationale
    made_up = verdict("One is ₱275 and the other ₱520, a deal at PHP 611.")
    assert made_up.signals["prices_unverified"] == 3
    assert not made_up.gates["cites_observed_specifics"]
    assert "match no shown price" in made_up.rationale


@pytest.mark.parametrize(
    ("rec", "note"),
    [
        ({}, "not a valid trajectory"),
        ({"query": "x", "messages": [], "tool_log": []}, "no assistant messages"),
        ({"query": "x", "messages": "nope", "tool_log": 3}, "are not a list"),
        ({"query": 5, "messages": [{"role": "wizard"}]}, "unreadable and skipped"),
        (["not", "a", "record"], "not a trajectory"),
        (record("find a lamp", [("Searching a lamp." * 2000, [])]), "cut to 16384"),
    ],
)
def test_broken_records_are_judged_on_what_is_there(
    judge: RubricJudge, rec: Any, note: str
) -> None:
    v = judge.judge(rec)
    assert 0.0 <= v.score <= 1.0 and v.stopped_at == "real_output"
    assert any(note in n for n in v.notes), v.notes
    assert note in v.rationale


def test_tool_calls_that_never_ran_are_not_evidence(
    careful: list[Trajectory], judge: RubricJudge
) -> None:
    t = careful[0]
    v = judge.judge(t.model_copy(update={"tool_log": []}))
    assert v.stopped_at == "real_output" and v.score == 0.1
    assert any("4 tool call(s) never executed" in n for n in v.notes)
    assert any("4 tool message(s) match no tool-log entry" in n for n in v.notes)


def test_verdicts_are_deterministic_and_round_trip(
    careful: list[Trajectory], judge: RubricJudge
) -> None:
    t = careful[1]
    v = judge.judge(t)
    again = RubricJudge().judge(Trajectory.model_validate_json(t.model_dump_json()))
    assert again == v
    assert judge.judge(t.model_dump(mode="json")) == v  # a raw record judges the same
    stored = with_judgement(t, v)
    back = Trajectory.model_validate_json(stored.model_dump_json())
    assert back == stored and back.judge is not None
    kept = back.judge.model_dump()
    assert kept.pop("score_formula") == "sn15-partial/1"  # added beside the judge's own fields
    assert kept == v.model_dump()
    assert back.score == DEFAULT_FORMULA.score(t.success, v.score, t.outcome.mean_rule) == 1.0


def test_rubric_files_are_checked(tmp_path: Path) -> None:
    data = resources.files("shopbench.judging.rubric").joinpath("data", "rubric_v1.toml")
    text = data.read_text()
    cases = {
        "missing.toml": None,
        "broken.toml": "[rubric\n",
        "unknown.toml": text.replace('name = "compared_candidates"', 'name = "vibes"'),
        "order.toml": text.replace("fail_score = 0.7", "fail_score = 0.95"),
        "regex.toml": text.replace("pattern = '\\bsystem", "pattern = '(\\bsystem"),
    }
    expected = {
        "missing.toml": "cannot read rubric file",
        "broken.toml": "not TOML",
        "unknown.toml": "unknown criteria ['vibes']",
        "order.toml": "must be below pass_score 0.9",
        "regex.toml": "does not compile",
    }
    for name, body in cases.items():
        path = tmp_path / name
        if body is not None:
            path.write_text(body)
        with pytest.raises(JudgeError, match=re.escape(expected[name])) as err:
            load_rubric(path)
        assert str(path) in str(err.value)
    with pytest.raises(JudgeError, match="allowed: rubric"):
        make_judge("llm")
    j = make_judge("rubric")
    assert isinstance(j, Judge) and (j.id, j.version) == ("rubric", "2")
