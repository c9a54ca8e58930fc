"""A local model played with onnxruntime-genai: the same ``generate`` contract as the
transformers engine, about twice its tokens a second on a CPU.

The model directory stays the source: its tokenizer renders the prompt and reads the reply
(:class:`~shopbench.agents.local.text.EngineText`, the transformers engine's own rules), and
its weights are exported once to an onnxruntime-genai folder (:func:`export_onnx`, ``shopbench
distill export-onnx``). A batch's prompts are right-padded, the layout onnxruntime-genai's
grouped-query attention reads, and decoded together; the configured stop ids end a row. A
batch whose rows are all greedy and free runs onnxruntime-genai's own argmax; a batch with a
constrained or a sampled row reads each step's logits, applies the same logits processors as
the transformers engine (the row's llguidance grammar, the row's seeded draw) and hands them
back, so the argmax takes the token they leave. Nothing is kept across calls: each turn
prefills its whole prompt, which on multi-turn episodes is most of this engine's time
(``shopbench bench hf-engines`` reports the split: prefill, logits processors, decoding).

onnxruntime-genai is imported when an engine is made, not before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

from shopbench.agents.errors import LocalModelError
from shopbench.agents.local.config import check_model_dir
from shopbench.agents.local.request import EngineStats, GenRequest, GenResult
from shopbench.agents.local.text import EngineText, StepClock

ONNX_FOLDER = "onnx"
"""The folder inside a model directory the export writes to by default, and the engine reads."""
GENAI_CONFIG = "genai_config.json"
"""The file that makes a folder an onnxruntime-genai model."""
_INSTALL = "pip install 'shopbench[onnx]'"
Precision = Literal["fp32", "int8", "int4"]
"""The export's weights: float32 (the same greedy tokens as transformers), or every linear
layer's weights quantized to 8 or 4 bits in blocks of 32 (onnxruntime's MatMulNBits), its
activations quantized to int8 for the product (accuracy level 4, the fastest on a CPU)."""


def onnx_folder(
    model: Path, onnx_dir: Path | None = None, precision: Precision = "fp32"
) -> Path:
    """The onnxruntime-genai folder of `model`: `onnx_dir`, else the model's ``onnx`` folder;
    a quantized export's is that folder's name with ``-int8`` or ``-int4`` added (``onnx-int4``
    beside ``onnx``)."""
    folder = onnx_dir if onnx_dir is not None else model / ONNX_FOLDER
    return folder if precision == "fp32" else folder.with_name(f"{folder.name}-{precision}")


def export_onnx(model: Path, out: Path | None = None, precision: Precision = "fp32") -> Path:
    """Write the onnxruntime-genai folder (CPU, `precision`) of the model directory `model` to
    `out` (default: the model's ``onnx`` folder, ``onnx-int4`` for int4) with
    onnxruntime-genai's model builder, which reads the local files only; return the folder.
    LocalModelError when the builder fails or is not installed. A quantized export plays
    other tokens than float32's: compare its outcomes (``shopbench bench hf-engines``) first."""
    check_model_dir(model)
    out = out if out is not None else onnx_folder(model, None, precision)
    try:
        import onnxruntime_genai.models.builder  # noqa: F401  (checks it and its onnx deps)
    except ImportError as e:
        raise LocalModelError(
            f"the onnx export needs onnxruntime-genai and onnx ({_INSTALL}): {e}"
        ) from None
    with tempfile.TemporaryDirectory(prefix="shopbench-onnx-") as cache:
        command = [
            sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(model),
            "-o", str(out), "-p", precision, "-e", "cpu", "-c", cache,
        ]  # fmt: skip
        if precision != "fp32":
            command += ["--extra_options", "accuracy_level=4", "block_size=32"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # the builder must not reach a hub
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0 or not (out / GENAI_CONFIG).is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise LocalModelError(f"{model}: the onnx export failed: " + " | ".join(tail))
    return out


class ORTEngine(EngineText):
    """A model directory's tokenizer with its onnxruntime-genai export: batched generation."""

    def __init__(
        self, path: Path, *, onnx_dir: Path | None = None, threads: int | None = None
    ) -> None:
        check_model_dir(path)
        folder = onnx_folder(path, onnx_dir)
        if not (folder / GENAI_CONFIG).is_file():
            raise LocalModelError(
                f"{folder}: no onnxruntime-genai model ({GENAI_CONFIG}); write it with "
                f"`shopbench distill export-onnx --model {path}`"
            )
        try:
            import onnxruntime_genai as og
        except ImportError:
            raise LocalModelError(
                f"engine onnxruntime-genai needs it installed ({_INSTALL})"
            ) from None
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path))
        except (OSError, ValueError) as e:
            raise LocalModelError(f"{path}: cannot load the tokenizer ({e})") from None
        self._load_text(path, tokenizer, _configured_eos(path))
        genai = json.loads((folder / GENAI_CONFIG).read_text(encoding="utf-8"))["model"]
        self.onnx_dir = folder
        self.max_positions = int(genai.get("context_length") or 1 << 30)
        self._pad = int(genai.get("pad_token_id", self.pad_id))
        # The export records the model's eos only: every id the transformers engine stops at
        # ends a row here too, and a batch is done when each row has ended.
        overlay: dict[str, Any] = {"model": {"eos_token_id": sorted(self.stop_ids)}}
        if threads is not None:
            options = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
            overlay["model"]["decoder"] = {"session_options": options}
        config = og.Config(str(folder))
        config.overlay(json.dumps(overlay))
        try:
            self.model = og.Model(config)
        except RuntimeError as e:
            raise LocalModelError(f"{folder}: onnxruntime-genai cannot load it ({e})") from None
        self._og = og
        self._lock = threading.Lock()
        self.stats = EngineStats()

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Generate every request in one batch; results in the requests' order."""
        if not requests:
            return []
        import numpy as np

        with self._lock:
            start = time.perf_counter()
            width = max(len(r.prompt) for r in requests)
            budget = min(max(r.max_new_tokens for r in requests), self.max_positions - width)
            if budget < 1:
                raise LocalModelError(
                    f"a prompt of {width} tokens leaves no room in {self.max_positions}"
                )
            ids = np.full((len(requests), width), self._pad, dtype=np.int32)
            for i, r in enumerate(requests):
                ids[i, : len(r.prompt)] = r.prompt
            params = self._og.GeneratorParams(self.model)
            params.set_search_options(
                max_length=width + budget, batch_size=len(requests), do_sample=False
            )
            clock = StepClock(self._processors(requests))
            try:
                generator = self._og.Generator(self.model, params)
                generator.append_tokens(ids)  # the prefill: the first step's logits
                clock.first = time.perf_counter()
                tokens = self._decode(generator, requests, width, budget, clock)
            except RuntimeError as e:
                raise LocalModelError(f"{self.onnx_dir}: onnxruntime-genai failed ({e})") from None
            clock.record(self.stats, start, len(requests) * width)
            results = [self._result(r, t) for r, t in zip(requests, tokens, strict=True)]
            self.stats.calls += 1
            self.stats.rows += len(requests)
            self.stats.new_tokens += sum(r.new_tokens for r in results)
            self.stats.seconds += time.perf_counter() - start
            return results

    def _decode(
        self, generator: Any, requests: list[GenRequest], width: int, budget: int,
        processors: StepClock,
    ) -> list[list[int]]:
        """Each row's generated ids, step by step until every row has stopped or reached its
        limit; the batch's logits pass through its processors first when it has any."""
        import numpy as np

        rows = len(requests)
        seen = None
        if processors.inner:
            import torch

            # What the processors read of the sequences so far: their length and last token.
            seen = torch.full((rows, width + budget), self._pad, dtype=torch.long)
        out: list[list[int]] = [[] for _ in requests]
        open_rows = set(range(rows))
        for step in range(budget):
            if seen is not None:
                import torch

                logits = generator.get_logits()
                scores = torch.from_numpy(np.ascontiguousarray(logits.reshape(rows, -1)))
                scores = processors(seen[:, : width + step], scores)
                generator.set_logits(scores.numpy().reshape(logits.shape).astype(np.float32))
            generator.generate_next_token()
            chosen = generator.get_next_tokens()
            for i in list(open_rows):
                token = int(chosen[i])
                out[i].append(token)
                if token in self.stop_ids or len(out[i]) >= requests[i].max_new_tokens:
                    open_rows.discard(i)
            if seen is not None:
                seen[:, width + step] = torch.from_numpy(chosen.astype(np.int64))
            if not open_rows or generator.is_done():
                break
        return out


def _configured_eos(path: Path) -> Any:
    """The ``eos_token_id`` the model directory's generation config (else its config) names."""
    for name in ("generation_config.json", "config.json"):
        file = path / name
        if file.is_file():
            try:
                found = json.loads(file.read_text(encoding="utf-8")).get("eos_token_id")
            except (OSError, json.JSONDecodeError) as e:
                raise LocalModelError(f"{file}: unreadable ({e})") from None
            if found is not None:
                return found
    return None
