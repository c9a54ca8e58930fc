"""Arms at equal cost: an SFT dataset cut to a budget of tokens, distinct tasks first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.distill_data import curated_set, play

from shopbench.curation.curated import CuratedEpisode
from shopbench.distill.dataset import BuildConfig, build_sft, load_sft
from shopbench.distill.errors import DistillError
from shopbench.distill.masks import encode_row
from shopbench.distill.token_budget import read_token_sample, round_robin, sample_to_tokens


def test_every_task_comes_once_before_any_comes_twice() -> None:
    counts = {"a": 3, "b": 1, "c": 1}
    rows = [{"task_id": t, "episode_id": f"{t}{k}"} for t, n in counts.items() for k in range(n)]
    order = round_robin(rows, seed=0)
    assert sorted(order) == list(range(len(rows)))
    first_three = {rows[i]["task_id"] for i in order[:3]}
    assert first_three == {"a", "b", "c"}
    assert round_robin(rows, seed=0) == order  # deterministic by seed
    assert any(round_robin(rows, seed=s) != order for s in range(1, 8))


@pytest.fixture(scope="module")
def pool(env: Any, catalog: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    played = play(env, catalog, 6)
    # Episode 0 weighs 3: three rows of one task in the pool.
    curated = curated_set(tmp_path_factory.mktemp("cur"), [
        CuratedEpisode(trajectory=played[0], weight=3.0),
        *(CuratedEpisode(trajectory=t) for t in played[1:]),
    ])  # fmt: skip
    out = tmp_path_factory.mktemp("pool") / "sft"
    build_sft(curated, out, BuildConfig(validation_fraction=0.0))
    return out


def test_a_budget_takes_distinct_tasks_first_and_never_more_tokens(
    pool: Path, tmp_path: Path, qwen3_tokenizer_dir: Path
) -> None:
    from transformers import AutoTokenizer

    from shopbench.distill.templates import training_template

    tok = AutoTokenizer.from_pretrained(str(qwen3_tokenizer_dir))
    template = training_template(tok)
    rows = load_sft(pool)["train"]
    lengths = sorted(len(encode_row(tok, template, r).input_ids) for r in rows)
    budget = sum(lengths[:4])  # room for about four of the eight rows
    report = sample_to_tokens(pool, tmp_path / "s", tokenizer=tok, template=template,
                              budget=budget, max_length=100_000, seed=0)  # fmt: skip
    assert report == read_token_sample(tmp_path / "s")
    assert 0 < report.tokens <= budget and report.pool_rows == 8 and report.pool_tasks == 6
    taken = load_sft(tmp_path / "s")["train"]
    assert len(taken) == report.rows and report.tasks == report.rows  # no task twice
    assert report.tokens == sum(len(encode_row(tok, template, r).input_ids) for r in taken)
    # The whole pool's tokens take every row, repeats last.
    whole = sample_to_tokens(pool, tmp_path / "w", tokenizer=tok, template=template,
                             budget=report.pool_tokens, max_length=100_000, seed=0)  # fmt: skip
    assert whole.rows == 8 and whole.tasks == 6
    # Rows over the trainer's max length are never taken; nothing fitting is an error.
    with pytest.raises(DistillError, match="no train row"):
        sample_to_tokens(pool, tmp_path / "x", tokenizer=tok, template=template,
                         budget=budget, max_length=lengths[0] - 1)  # fmt: skip
