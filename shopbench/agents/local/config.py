"""How a local model plays: :class:`HFPolicyConfig`, and the checks of a model directory.

Nothing here imports torch or transformers, so a spec can be checked (``hf:PATH`` names a
directory with a config, weights and a chat template) before anything heavy is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.errors import LocalModelError
from shopbench.agents.local.grammar import Decoding

HF_PREFIX = "hf:"
"""The prefix of a local-weights policy spec: ``hf:PATH`` with PATH a model directory."""
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
"""The files of a model directory that hold its weights."""


class HFPolicyConfig(BaseModel):
    """How a local model directory is loaded, prompted and decoded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path = Field(description="model directory (config.json, weights, tokenizer)")
    max_new_tokens: int = Field(default=512, ge=1, description="tokens generated per turn")
    temperature: float = Field(
        default=0.0, ge=0, description="sampling temperature; 0 decodes greedily"
    )
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus sampling mass")
    seed: int = Field(default=0, description="seed of the sampled decoding")
    max_batch: int = Field(
        default=8, ge=1, description="turns of concurrent episodes generated in one call"
    )
    batch_wait_ms: float = Field(
        default=20.0, ge=0,
        description="how long the first pending turn waits for others to join its batch",
    )  # fmt: skip
    engine: Literal["transformers", "onnxruntime-genai"] = Field(
        default="transformers",
        description="the runtime that computes the logits: transformers (torch), or "
        "onnxruntime-genai over the folder `shopbench distill export-onnx` writes (float32, "
        "CPU; about 2x the tokens/s of transformers on SmolLM2; dtype, prefix_cache, "
        "kv_cache_tokens and buffered_cache are the transformers engine's)",
    )  # fmt: skip
    onnx_dir: Path | None = Field(
        default=None,
        description="the onnxruntime-genai folder of engine onnxruntime-genai (None: the "
        "model directory's `onnx` folder, where `shopbench distill export-onnx` writes by "
        "default)",
    )  # fmt: skip
    dtype: Literal["float32", "bfloat16", "float16", "int8"] = Field(
        default="float32",
        description="dtype the weights are loaded in; int8: float32, every linear layer's "
        "weights then quantized to int8 (dynamic quantization, CPU), for use only where its "
        "greedy output equals float32's (shopbench bench hf-engines says)",
    )  # fmt: skip
    prefix_cache: bool = Field(
        default=True,
        description="process the prompt opening every turn shares (system prompt, tool "
        "schemas) once and reuse it",
    )
    kv_cache_tokens: int = Field(
        default=0, ge=0,
        description="tokens of earlier turns' keys and values kept across turns (0: off): a "
        "turn whose prompt continues a kept one prefills only its new tokens (an append-only "
        "view, such as compact without a history window, continues every turn's); about 46 KB "
        "a token for SmolLM2-135M in float32",
    )  # fmt: skip
    buffered_cache: bool = Field(
        default=True,
        description="with kept keys and values, write each generated token's into room set "
        "aside for the call instead of copying the cache at every step: the same tokens, "
        "1.33x the episodes/s on SmolLM2 (shopbench bench hf-engines compares them)",
    )  # fmt: skip
    threads: int | None = Field(
        default=None, ge=1, description="torch CPU threads; None leaves torch's setting"
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="extra arguments of the chat template, e.g. {\"enable_thinking\": false}",
    )
    decoding: Decoding = Field(
        default="free",
        description="free: the model's own tokens; constrained: a tool call, once the model "
        "opens one, is decoded under a grammar of the tool schemas (names, argument names "
        "and forms) with product ids limited to those the episode has shown, rebuilt each "
        "turn (shopbench.agents.local.grammar); grounded: constrained, and a price's bounds "
        "held to numbers the customer wrote",
    )  # fmt: skip
    example: Path | None = Field(
        default=None,
        description="a JSON file of one episode's messages (user, assistant and tool, in the "
        "view the model reads) shown after the system prompt and before every task: the "
        "model prompted with a worked episode instead of tuned on many",
    )  # fmt: skip
    view: str | None = Field(
        default=None, description="observation view id the model reads (None: the one its "
        "directory records, else full); one that differs from the recorded one is refused",
    )  # fmt: skip

    @property
    def sampled(self) -> bool:
        """Whether turns are sampled (temperature above 0) rather than decoded greedily."""
        return self.temperature > 0


def model_path(spec: str) -> Path:
    """The directory of ``hf:PATH``; LocalModelError when the spec has no path."""
    body = spec.strip()[len(HF_PREFIX) :] if spec.strip().startswith(HF_PREFIX) else spec
    if not body.strip():
        raise LocalModelError("hf: needs a model directory, e.g. hf:runs/tuned/final")
    return Path(body.strip()).expanduser()


def check_model_dir(path: Path) -> None:
    """Raise LocalModelError unless `path` is a model directory a policy can play: a
    ``config.json``, weights (safetensors or a PyTorch bin) and a tokenizer with a chat
    template (in ``tokenizer_config.json`` or ``chat_template.jinja``)."""
    if not path.is_dir():
        raise LocalModelError(f"{path}: no such model directory")
    if not (path / "config.json").is_file():
        raise LocalModelError(f"{path}: no config.json; not a transformers model directory")
    if not any(any(path.glob(p)) for p in WEIGHT_PATTERNS):
        raise LocalModelError(
            f"{path}: no weights (*.safetensors or pytorch_model*.bin); save the model with "
            "save_pretrained"
        )
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
        raise LocalModelError(f"{path}: no tokenizer (tokenizer.json, tokenizer_config.json)")
    if not _has_chat_template(path):
        raise LocalModelError(
            f"{path}: the tokenizer has no chat template (chat_template.jinja or "
            "tokenizer_config.json's chat_template); the policy renders turns with it"
        )


def _has_chat_template(path: Path) -> bool:
    if (path / "chat_template.jinja").is_file() or (path / "chat_template.json").is_file():
        return True
    config = path / "tokenizer_config.json"
    if not config.is_file():
        return False
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise LocalModelError(f"{config}: unreadable ({e})") from None
    return bool(isinstance(data, dict) and data.get("chat_template"))
