"""docs/miner.md's worked example of a score is the release's own arithmetic: each table is
rendered here from the functions validators score with (the episode score formula, the
score book's EMA, the weight curve, under the release's consensus bundle) and must appear
in the doc exactly. When the bundle changes, this fails and prints the tables to paste."""

from __future__ import annotations

from pathlib import Path

from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.score import DEFAULT_FORMULA
from shopbench.scoring.weights import ScoreBook

DOC = Path(__file__).resolve().parents[2] / "docs" / "miner.md"

EPISODES = (  # (what happened, success, process score q, mean rule score r)
    ("solved, played well", True, 0.8, 1.0),
    ("solved, sloppily", True, 0.4, 1.0),
    ("near miss: 3 of 4 constraints met", False, 0.8, 0.75),
    ("wild miss", False, 0.4, 0.0),
)
NEWCOMER = 0.6  # the newcomer's round score, every round
INCUMBENT = 0.5  # the incumbent's EMA, held
ROUNDS = (1, 2, 5, 10, 20, 50)
FIELD = {7: 0.6, 8: 0.5, 9: 0.3}  # three miners' EMAs


def episode_table() -> str:
    rows = ["| episode | success | q | r | episode score |", "|---|---|---|---|---|"]
    scores = []
    for what, success, q, r in EPISODES:
        score = DEFAULT_FORMULA.score(success, q, r)
        scores.append(score)
        rows.append(f"| {what} | {'yes' if success else 'no'} | {q} | {r} | {score:g} |")
    rows.append(f"| **the round score** (their mean) | | | | **{sum(scores) / len(scores):g}** |")
    return "\n".join(rows)


def ema_table() -> str:
    consensus = ConsensusConfig()
    book = ScoreBook()
    rows = [
        "| rounds played | newcomer's EMA | its weight | the incumbent's weight |",
        "|---|---|---|---|",
    ]
    for n in range(1, max(ROUNDS) + 1):
        ema = book.update(1, "newcomer", NEWCOMER, consensus.ema_alpha).ema
        if n in ROUNDS:
            w = consensus.curve.weights({1: ema, 2: INCUMBENT})
            rows.append(f"| {n} | {ema:.4f} | {w.get(1, 0.0):.4f} | {w.get(2, 0.0):.4f} |")
    return "\n".join(rows)


def field_table() -> str:
    curve = ConsensusConfig().curve
    weights = curve.weights(FIELD)
    total = sum(FIELD.values())
    rows = ["| miner | EMA | share if proportional | weight (EMA⁴, normalised) |",
            "|---|---|---|---|"]  # fmt: skip
    for uid, ema in FIELD.items():
        rows.append(f"| uid {uid} | {ema} | {ema / total:.3f} | {weights[uid]:.3f} |")
    return "\n".join(rows)


def overtaking_round() -> int:
    """The first round in which the newcomer's EMA is above the incumbent's."""
    consensus = ConsensusConfig()
    book = ScoreBook()
    n = 0
    while book.update(1, "newcomer", NEWCOMER, consensus.ema_alpha).ema <= INCUMBENT:
        n += 1
    return n + 1


def test_the_doc_s_worked_example_is_what_the_release_computes() -> None:
    consensus = ConsensusConfig()
    assert (consensus.ema_alpha, consensus.curve.exponent, consensus.curve.burn) == (0.1, 4.0, 0.0)
    text = DOC.read_text(encoding="utf-8")
    for table in (episode_table(), ema_table(), field_table()):
        assert table in text, f"docs/miner.md lacks this table (the release's numbers):\n{table}"
    said = f"passes the incumbent's in round {overtaking_round()} "
    assert said in " ".join(text.split()), f"docs/miner.md should say: {said}"
