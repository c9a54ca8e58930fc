"""`shopbench distill train` on a tiny random Qwen3 (CPU, one thread): the loss falls, eval
loss is logged, checkpoints resume, a saved model reloads to the same logits, a LoRA adapter
merges to the same outputs; every bad input is one line and exit 2 before training starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from support.distill_data import curated_set, play
from transformers import AutoModelForCausalLM, AutoTokenizer

from shopbench.cli import main
from shopbench.curation.curated import CuratedEpisode
from shopbench.distill.config import load_train_config
from shopbench.distill.dataset import BuildConfig, build_sft
from shopbench.distill.split import split_of
from shopbench.distill.tiny_model import TinyModelConfig, tiny_qwen3
from shopbench.distill.trainer import REPORT, train

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

FAST = """\
learning_rate: 1.0e-3
warmup_ratio: 0.0
max_steps: 6
gradient_accumulation_steps: 1
logging_steps: 1
eval_steps: 3
save_steps: 3
max_length: 1400
overlong: cut
"""


@pytest.fixture(scope="module")
def sft(env: Any, catalog: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three episodes' SFT dataset, clusters c0 and c1 trained and c2 held out."""
    work = tmp_path_factory.mktemp("sft")
    episodes = [CuratedEpisode(trajectory=t) for t in play(env, catalog, 3)]
    curated = curated_set(work / "cur", episodes)
    seed = next(
        s for s in range(200)
        if [split_of(f"c{i}", seed=s, validation_fraction=0.3) for i in range(3)]
        == ["train", "train", "validation"]
    )  # fmt: skip
    build_sft(curated, work / "sft", BuildConfig(seed=seed, validation_fraction=0.3))
    return work / "sft"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model", TinyModelConfig.trainable(0))


def _config(tmp_path: Path, text: str = FAST, name: str = "train.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _train(*args: str) -> int:
    try:
        main(["distill", "train", *args])
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def _logits(model: Any, tokenizer: Any) -> torch.Tensor:
    ids = tokenizer("I'm looking for a Dexel power strip with COD.", return_tensors="pt")
    with torch.no_grad():
        return model(**ids).logits


def test_training_lowers_the_loss_and_resumes_from_its_checkpoint(
    sft: Path, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["--model", str(tiny), "--data", str(sft), "--out", str(out)]
    assert _train(*args, "--config", str(_config(tmp_path))) == 0
    report = json.loads((out / REPORT).read_text())
    losses = [p["loss"] for p in report["train_loss"]]
    assert report["steps"] == 6 and len(losses) == 6 and losses[-1] < losses[0]
    assert [p["step"] for p in report["eval_loss"]] == [3, 6]
    assert report["samples"] == {"train": 2, "validation": 1}
    assert report["lengths"]["max_length"] == 1400 and report["lengths"]["source"] == "config"
    assert sum(report["lengths"]["cut"].values()) == 3  # every episode is longer here
    assert report["trained_tokens"] < report["tokens"] and report["device"] == "cpu"
    assert report["seen_tokens"] == 3 * report["tokens"]  # two rows a pass, six steps
    assert sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*")) == [
        "checkpoint-3", "checkpoint-6",
    ]  # fmt: skip
    assert "6 steps on cpu: train loss" in capsys.readouterr().out

    assert _train(*args, "--config", str(_config(tmp_path)), "--max-steps", "8", "--resume") == 0
    resumed = json.loads((out / REPORT).read_text())
    assert resumed["steps"] == 8
    assert [p["step"] for p in resumed["train_loss"]] == list(range(1, 9))
    assert [p["loss"] for p in resumed["train_loss"]][:6] == losses
    # The tokens seen count on from the checkpoint, not from the resumed start.
    assert resumed["seen_tokens"] == 4 * resumed["tokens"]


def test_a_saved_model_reloads_to_the_same_logits(sft: Path, tiny: Path, tmp_path: Path) -> None:
    done = train(str(tiny), sft, tmp_path / "run", load_train_config(_config(tmp_path)))
    tok = AutoTokenizer.from_pretrained(done.report.model_dir)
    reloaded = AutoModelForCausalLM.from_pretrained(done.report.model_dir).eval()
    base = AutoModelForCausalLM.from_pretrained(str(tiny)).eval()
    assert torch.equal(_logits(done.model, tok), _logits(reloaded, tok))
    assert not torch.equal(_logits(base, tok), _logits(reloaded, tok))


def test_a_lora_adapter_merges_to_the_same_outputs(sft: Path, tiny: Path, tmp_path: Path) -> None:
    from peft import PeftModel

    config = load_train_config(_config(tmp_path), lora=True, lora_r=8, learning_rate=1e-2)
    done = train(str(tiny), sft, tmp_path / "run", config)
    report = done.report
    assert report.lora and report.train_loss[-1].loss < report.train_loss[0].loss
    assert (Path(report.model_dir) / "adapter_config.json").is_file()
    tok = AutoTokenizer.from_pretrained(report.model_dir)
    base = AutoModelForCausalLM.from_pretrained(str(tiny)).eval()
    before = _logits(base, tok)
    adapted = PeftModel.from_pretrained(base, report.model_dir).eval()
    merged = AutoModelForCausalLM.from_pretrained(report.merged_dir).eval()
    with_adapter = _logits(adapted, tok)
    assert torch.allclose(with_adapter, _logits(merged, tok), atol=1e-5)
    assert torch.allclose(with_adapter, _logits(done.model, tok), atol=1e-5)
    assert not torch.allclose(before, with_adapter, atol=1e-3)


def _no_template(tiny: Path, tmp_path: Path) -> Path:
    tok = AutoTokenizer.from_pretrained(str(tiny))
    tok.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    model = tmp_path / "unmarked"
    AutoModelForCausalLM.from_pretrained(str(tiny)).save_pretrained(model)
    tok.save_pretrained(model)
    return model


def _no_tool_tokens(tmp_path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from shopbench.distill.qwen_tokenizer import qwen3_chat_template

    words = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "user", "assistant", "hi"]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="hi"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token="hi", chat_template=qwen3_chat_template(),
    )  # fmt: skip
    tok.save_pretrained(tmp_path / "words")
    return tiny_qwen3(tmp_path / "no-tools", TinyModelConfig.trainable(), tmp_path / "words")


def test_bad_inputs_fail_before_training(
    sft: Path, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["--model", str(tiny), "--config", str(_config(tmp_path, "lora_rank: 8\n", "k.yaml"))],
         "unknown key 'lora_rank'"),
        (["--model", str(tiny), "--config", str(_config(tmp_path, "overlong: trim\n", "v.yaml"))],
         "overlong: Input should be 'drop' or 'cut'"),
        (["--model", str(tiny), "--max-length", "64"],
         "none of 2 train samples fits max_length 64"),
        (["--model", str(_no_template(tiny, tmp_path))], "neither one TRL knows"),
        (["--model", str(_no_tool_tokens(tmp_path))], "lacks the tool-call and reasoning tokens"),
        (["--model", str(tmp_path / "absent")], "cannot load the model"),
    ]  # fmt: skip
    capsys.readouterr()  # the progress of writing the two odd models above
    for i, (args, message) in enumerate(cases):
        out = tmp_path / f"run{i}"
        assert _train("--data", str(sft), "--out", str(out), *args) == 2, message
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, repr(err)
        assert not (out / "checkpoints").exists()
    out = tmp_path / "resume"
    assert _train("--model", str(tiny), "--data", str(sft), "--out", str(out), "--resume") == 2
    assert "no checkpoint to resume from" in capsys.readouterr().err


def test_the_shipped_configs_load_by_name(tmp_path: Path) -> None:
    from shopbench.distill.errors import TrainConfigError

    full, lora = load_train_config("qwen3-4b-full"), load_train_config("qwen3-4b-lora")
    assert (full.lora, full.learning_rate, full.gradient_accumulation_steps) == (False, 1e-5, 8)
    assert (lora.lora, lora.lora_r, lora.lora_alpha, lora.learning_rate) == (True, 32, 32, 1e-4)
    assert lora.lora_target_modules == "all-linear" and lora.max_length == 16384
    small = load_train_config("smollm2-lora")
    assert small.lora_modules_to_save == ["embed_tokens", "lm_head"]
    assert (small.learning_rate, small.max_steps, small.max_length) == (1e-3, 60, 2048)
    with pytest.raises(TrainConfigError, match="no such config file"):
        load_train_config(tmp_path / "nope.yaml")
    with pytest.raises(TrainConfigError, match="not YAML"):
        load_train_config(_config(tmp_path, "lora: [true\n", "broken.yaml"))


def test_prepare_names_the_models_it_knows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["distill", "prepare", "qwen9", "--out", str(tmp_path / "m")])
    assert stopped.value.code == 2
    assert "'qwen9' is not a model to prepare (allowed: tiny, smollm2)" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_packing_puts_both_train_rows_in_one_sequence(
    sft: Path, tiny: Path, tmp_path: Path
) -> None:
    config = load_train_config(_config(tmp_path), packing=True, max_length=12288, max_steps=2)
    report = train(str(tiny), sft, tmp_path / "run", config).report
    assert report.samples["train"] == 2 and report.tokens <= 12288
    # One packed sequence holds the whole train split, so every step sees all of its tokens.
    assert report.steps == 2 and report.seen_tokens == 2 * report.tokens


def test_lora_trains_the_modules_it_saves_and_merges_them(
    sft: Path, tiny: Path, tmp_path: Path
) -> None:
    config = load_train_config(
        _config(tmp_path), lora=True, lora_r=8, learning_rate=1e-2,
        lora_modules_to_save=["embed_tokens", "lm_head"],
    )  # fmt: skip
    report = train(str(tiny), sft, tmp_path / "run", config).report
    tok = AutoTokenizer.from_pretrained(report.merged_dir)
    base = AutoModelForCausalLM.from_pretrained(str(tiny)).eval()
    before = base.get_input_embeddings().weight.detach().clone()
    merged = AutoModelForCausalLM.from_pretrained(report.merged_dir).eval()
    call = tok.convert_tokens_to_ids("<tool_call>")  # written in every trained step
    assert not torch.allclose(merged.get_input_embeddings().weight[call], before[call])
    from peft import PeftModel

    adapted = PeftModel.from_pretrained(base, report.model_dir).eval()
    assert torch.allclose(_logits(adapted, tok), _logits(merged, tok), atol=1e-5)


def test_saved_modules_need_lora(
    sft: Path, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--model", str(tiny), "--data", str(sft), "--out", str(tmp_path / "run")]
    full = _config(tmp_path, FAST + "lora_modules_to_save: [embed_tokens]\n", "f.yaml")
    assert _train(*args, "--config", str(full)) == 2
    assert "lora_modules_to_save is for a LoRA run" in capsys.readouterr().err
    assert not (tmp_path / "run" / REPORT).exists()


def test_added_format_tokens_start_from_the_pieces_they_were_spelled_with(
    tmp_path: Path,
) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from shopbench.agents.format.tokens import FORMAT_TOKENS
    from shopbench.distill.models import add_format_tokens

    words = ["<|im_end|>", "hi", "<", ">", "</", "think", "tool_call", "tool_response"]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="hi"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", unk_token="hi")
    tok.save_pretrained(tmp_path / "words")
    model = AutoModelForCausalLM.from_pretrained(
        tiny_qwen3(tmp_path / "m", TinyModelConfig.trainable(), tmp_path / "words")
    )
    tok = AutoTokenizer.from_pretrained(tmp_path / "words")
    pieces = tok.encode("<tool_call>", add_special_tokens=False)
    assert pieces == [words.index(w) for w in ("<", "tool_call", ">")]
    assert add_format_tokens(tok, model) == list(FORMAT_TOKENS)
    rows = model.get_input_embeddings().weight
    assert rows.shape[0] == len(tok)
    added = rows[tok.convert_tokens_to_ids("<tool_call>")]
    assert torch.allclose(added, rows[pieces].mean(dim=0))
    assert not torch.allclose(added, rows[: len(words)].mean(dim=0), atol=1e-4)
