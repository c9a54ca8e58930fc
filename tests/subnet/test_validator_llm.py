"""A validator round with the LLM judge on a sample of episodes, against a real HTTP server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.fake_openai import FakeJudgeServer, running
from test_validator import Subnet, honest, make_validator, one_round  # noqa: F401

from shopbench.archive.store import read_store
from template.base.config import LLMJudgeSection
from template.signing import LocalWallet


@pytest.mark.parametrize("served", ["Qwen/Qwen3-32B", "other/model"])
def test_validator_llm(honest: Any, catalog_dir: Path, tmp_path: Path, served: str,  # noqa: F811
                       caplog: pytest.LogCaptureFixture) -> None:
    subnet = Subnet()
    for p, s in honest.items():
        subnet.add_miner(LocalWallet.derive(f"test-miner-{p}"), s.url)
    with running(FakeJudgeServer()) as fake:
        fake.reset(served)
        v = make_validator(subnet, tmp_path, catalog_dir,
                           llm_judge=LLMJudgeSection(urls=[fake.url], sample_rate=0.5))

        result = one_round(v)
    archived = list(read_store(tmp_path / "archive"))
    sampled = {t.task_id for t in archived if t.judge.signals.get("llm_sampled")}
    assert sampled <= set(result.task_ids)
    assert len(sampled) == 2
    for t in archived:
        s = t.judge.signals
        if t.task_id in sampled:
            if served == "other/model":
                assert s["llm_fallback"] == 1.0 and "model_mismatch" in t.judge.notes[-1]
            else:
                assert s["llm_fallback"] == 0.0 and "llm_score" in s
    metrics = v.metrics.render().decode()
    if served == "other/model":
        assert fake.requests == [] and any("refused" in r.getMessage() for r in caplog.records)
        # 2 sampled tasks x 3 miners fell back, each counted by its kind.
        assert 'shopbench_validator_judge_fallbacks_total{kind="model_mismatch"} 6.0' in metrics
        assert "shopbench_validator_llm_judged_total 0.0" in metrics
    else:
        assert len(fake.requests) == 2 * 3
        assert "shopbench_validator_llm_judged_total 6.0" in metrics
        assert 'shopbench_validator_judge_fallbacks_total{kind="model_mismatch"} 0.0' in metrics
