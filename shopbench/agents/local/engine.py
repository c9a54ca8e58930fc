"""A loaded local model and one batched ``generate`` call over many prompts.

The leading tokens every prompt of a batch shares (the system prompt and the tool schemas,
the same in every episode) are processed once and kept: later batches whose prompts open
the same way start from those keys and values. Each row's own rest is left-padded after
the shared part; rows stop at the model's end-of-turn tokens. Greedy
rows take the argmax; sampled rows draw with temperature and top-p from their own seeded
``torch.Generator`` inside a logits processor, so a row's tokens depend on its prompt and
seed alone, never on which other rows shared its batch.

torch and transformers are imported when an engine is made, not before. The tokenizer's side
(prompt ids, stop ids, reply text, the logits processors) is :mod:`.text`'s, shared with the
onnxruntime-genai engine (:mod:`.ort_engine`), which :func:`shared_engine` picks by the
config's ``engine``.
"""

from __future__ import annotations

import gc
import inspect
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shopbench.agents.errors import LocalModelError
from shopbench.agents.local.config import HFPolicyConfig, check_model_dir
from shopbench.agents.local.kvstore import KVEntry, KVStore
from shopbench.agents.local.request import EngineStats as EngineStats
from shopbench.agents.local.request import GenRequest as GenRequest  # where callers import it
from shopbench.agents.local.request import GenResult as GenResult
from shopbench.agents.local.text import EngineText, StepClock

if TYPE_CHECKING:
    from shopbench.agents.local.ort_engine import ORTEngine

MIN_CACHED_PREFIX = 32
"""Shared prompt tokens below which no prefix cache is computed or reused."""


class HFEngine(EngineText):
    """A model directory loaded with transformers: its tokenizer, its model, its stop ids."""

    def __init__(
        self, path: Path, *, dtype: str = "float32", threads: int | None = None,
        prefix_cache: bool = True, kv_tokens: int = 0, buffered: bool = False,
    ) -> None:
        check_model_dir(path)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the commands draw their own progress
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path))
            self.model = AutoModelForCausalLM.from_pretrained(
                str(path), dtype=getattr(torch, "float32" if dtype == "int8" else dtype)
            )
        except (OSError, ValueError) as e:
            raise LocalModelError(f"{path}: cannot load the model ({e})") from None
        self.model.eval()
        if dtype == "int8":
            self.model = _quantized(self.model)
        configured_eos = getattr(self.model.generation_config, "eos_token_id", None)
        self._load_text(path, self.tokenizer, configured_eos)
        self.max_positions = int(
            getattr(self.model.config, "max_position_embeddings", 0) or 1 << 30
        )
        self._lock = threading.Lock()
        self.stats = EngineStats()
        # Every episode's prompt opens with the same system prompt and tool schemas: their
        # keys and values are computed once. Windowed attention caches differently: no reuse.
        layer_types = getattr(self.model.config, "layer_types", None) or ()
        self.prefix_cache = prefix_cache and "sliding_attention" not in layer_types
        # transformers renamed generate's past_key_values to cache (the old name warns).
        forward = inspect.signature(self.model.forward).parameters
        self._cache_argument = "cache" if "cache" in forward else "past_key_values"
        self._prefix_ids: tuple[int, ...] = ()
        self._prefix_kv: list[tuple[Any, Any]] = []
        # With kv_tokens, every row's prompt and reply are kept (kvstore.py) and a later
        # prompt that continues one prefills only its new tokens; this replaces the
        # shared-prefix cache, whose system prompt any kept sequence opens with.
        self.kv_store = KVStore(kv_tokens) if kv_tokens > 0 and self.prefix_cache else None
        # With kept keys and values, each call's cache may write generated tokens into room
        # set aside instead of concatenating at every step (buffered_cache.py).
        self.buffered = buffered

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Generate every request in one batch; results in the requests' order."""
        if not requests:
            return []
        if self.kv_store is not None:
            with self._lock:
                return self._generate_kept(requests)
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        with self._lock:
            start = time.perf_counter()
            shared = self._shared_prefix([r.prompt for r in requests])
            tail = max(len(r.prompt) for r in requests) - shared
            width = shared + tail
            ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(requests), width), dtype=torch.long)
            for i, r in enumerate(requests):
                # The shared prefix first (cached), then the padding, then each row's own rest:
                # positions come from the mask, so every row reads as if unpadded.
                ids[i, :shared] = torch.tensor(r.prompt[:shared], dtype=torch.long)
                mask[i, :shared] = 1
                rest = r.prompt[shared:]
                ids[i, width - len(rest) :] = torch.tensor(rest, dtype=torch.long)
                mask[i, width - len(rest) :] = 1
            cache = self._prefix_cache(shared, len(requests))
            budget = max(r.max_new_tokens for r in requests)
            clock = StepClock(self._processors(requests))
            config = GenerationConfig(
                max_new_tokens=budget,
                do_sample=False,
                eos_token_id=sorted(self.stop_ids),
                pad_token_id=self.pad_id,
            )
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    generation_config=config,
                    logits_processor=LogitsProcessorList([clock]),
                    **({self._cache_argument: cache} if cache is not None else {}),
                )
            clock.record(self.stats, start, len(requests) * tail)
            results = [
                self._result(r, out[i, width:].tolist()) for i, r in enumerate(requests)
            ]
            self.stats.calls += 1
            self.stats.rows += len(requests)
            self.stats.new_tokens += sum(r.new_tokens for r in results)
            self.stats.cached_prompt_tokens += shared * len(requests)
            self.stats.seconds += time.perf_counter() - start
            return results

    def _generate_kept(self, requests: list[GenRequest]) -> list[GenResult]:
        """:meth:`generate` starting each row from the kept sequence that opens its prompt
        (:class:`KVStore`), keeping each row's prompt and reply for later turns.

        Row i reuses the keys and values of its first ``c_i`` tokens: they sit right-aligned
        in a cache of width ``C = max c_i`` (left-padded, masked), its other tokens follow,
        left-padded to a common width; positions come from the mask, so every row reads
        as if it were alone and unpadded."""
        import numpy as np
        import torch
        from transformers import DynamicCache, GenerationConfig, LogitsProcessorList

        start = time.perf_counter()
        assert self.kv_store is not None
        prompts = [np.asarray(r.prompt, dtype=np.int64) for r in requests]
        found = [self.kv_store.longest(p) for p in prompts]
        self._keep_shared_opening(requests, [n for _, n in found])
        found = [self.kv_store.longest(p) for p in prompts]
        # Each row runs at least one token of its own; short matches are not worth a copy.
        reused = [min(n, len(p) - 1) for (_, n), p in zip(found, prompts, strict=True)]
        reused = [n if n >= MIN_CACHED_PREFIX else 0 for n in reused]
        width_c = max(reused)
        rests = [p[n:] for p, n in zip(prompts, reused, strict=True)]
        width_r = max(len(r) for r in rests)
        width = width_c + width_r
        rows = len(requests)
        ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((rows, width), dtype=torch.long)
        for i, (n, rest) in enumerate(zip(reused, rests, strict=True)):
            if n:
                ids[i, width_c - n : width_c] = torch.from_numpy(prompts[i][:n])
                mask[i, width_c - n : width_c] = 1
            ids[i, width - len(rest) :] = torch.from_numpy(rest)
            mask[i, width - len(rest) :] = 1
        cache = None
        longest = max(r.max_new_tokens for r in requests)
        if self.buffered:
            from shopbench.agents.local.buffered_cache import buffered_cache

            cache = buffered_cache(self.model.config, width + longest)
        if width_c:
            cache = cache if cache is not None else DynamicCache(config=self.model.config)
            template = next(e for e, _ in found if e is not None).layers
            for layer, (k0, v0) in enumerate(template):
                heads, dim = k0.shape[0], k0.shape[-1]
                keys = k0.new_zeros((rows, heads, width_c, dim))
                values = v0.new_zeros((rows, v0.shape[0], width_c, v0.shape[-1]))
                for i, ((entry, _), n) in enumerate(zip(found, reused, strict=True)):
                    if n and entry is not None:
                        k, v = entry.layers[layer]
                        keys[i, :, width_c - n :] = k[:, :n]
                        values[i, :, width_c - n :] = v[:, :n]
                cache.update(keys, values, layer)
        clock = StepClock(self._processors(requests))
        config = GenerationConfig(  # type: ignore[no-untyped-call]
            max_new_tokens=longest, do_sample=False,
            eos_token_id=sorted(self.stop_ids), pad_token_id=self.pad_id,
            return_dict_in_generate=True,
        )  # fmt: skip
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids, attention_mask=mask, generation_config=config,
                logits_processor=LogitsProcessorList([clock]),
                **({self._cache_argument: cache} if cache is not None else {}),
            )  # fmt: skip
        clock.record(self.stats, start, rows * width_r)
        sequences = out.sequences
        results = [self._result(r, sequences[i, width:].tolist()) for i, r in enumerate(requests)]
        self._keep(out, requests, results, reused, rests, width_c, width)
        self.stats.calls += 1
        self.stats.rows += rows
        self.stats.new_tokens += sum(r.new_tokens for r in results)
        self.stats.cached_prompt_tokens += sum(reused)
        self.stats.seconds += time.perf_counter() - start
        return results

    def _keep_shared_opening(self, requests: list[GenRequest], matched: list[int]) -> None:
        """When rows of a batch share an opening longer than anything kept matches (new
        episodes' system prompt and tools), compute it once and keep it."""
        import numpy as np
        import torch

        assert self.kv_store is not None
        if len(requests) < 2:
            return
        common = _common_prefix([r.prompt for r in requests],
                                min(len(r.prompt) for r in requests) - 1)  # fmt: skip
        if common < MIN_CACHED_PREFIX or all(n >= common for n in matched):
            return
        ids = torch.tensor([requests[0].prompt[:common]], dtype=torch.long)
        with torch.inference_mode():
            out = self.model(input_ids=ids, use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        layers = [(layer.keys[0].clone(), layer.values[0].clone()) for layer in cache.layers]
        self.kv_store.put(KVEntry(ids=np.asarray(requests[0].prompt[:common], dtype=np.int64),
                                  layers=layers))  # fmt: skip

    def _keep(
        self, out: Any, requests: list[GenRequest], results: list[GenResult],
        reused: list[int], rests: list[Any], width_c: int, width: int,
    ) -> None:  # fmt: skip
        """Keep each row's prompt and the reply tokens whose keys and values the cache holds
        (every generated token but the batch's last step)."""
        import numpy as np
        import torch

        assert self.kv_store is not None
        cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
        if cache is None:
            return
        held = cache.layers[0].keys.shape[2]  # width + generated steps - 1
        for i, (request, result) in enumerate(zip(requests, results, strict=True)):
            n, rest = reused[i], rests[i]
            generated = out.sequences[i, width:].tolist()[: result.new_tokens]
            replied = generated[: max(0, held - width)]
            index = torch.tensor(
                [*range(width_c - n, width_c), *range(width - len(rest), width),
                 *range(width, width + len(replied))], dtype=torch.long,
            )  # fmt: skip
            layers = [
                (layer.keys[i].index_select(1, index).clone(),
                 layer.values[i].index_select(1, index).clone())
                for layer in cache.layers
            ]  # fmt: skip
            ids = np.asarray([*request.prompt, *replied], dtype=np.int64)
            self.kv_store.put(KVEntry(ids=ids, layers=layers))

    def _shared_prefix(self, prompts: list[tuple[int, ...]]) -> int:
        """How many leading tokens every prompt shares and are served from the prefix cache
        (0: none). Each prompt keeps at least one token to run. The cache holds the last
        long enough shared prefix; one that no longer fits is recomputed."""
        if not self.prefix_cache:
            return 0
        limit = min(len(p) for p in prompts) - 1
        common = _common_prefix(prompts, limit)
        if self._prefix_ids:
            reused = _common_prefix([self._prefix_ids, prompts[0][:common]], common)
            if reused >= MIN_CACHED_PREFIX:
                return reused
        if common < MIN_CACHED_PREFIX:
            return 0
        import torch

        ids = torch.tensor([prompts[0][:common]], dtype=torch.long)
        with torch.inference_mode():
            out = self.model(input_ids=ids, use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        self._prefix_kv = [(layer.keys, layer.values) for layer in cache.layers]
        self._prefix_ids = tuple(prompts[0][:common])
        return common

    def _prefix_cache(self, shared: int, rows: int) -> Any:
        """A cache holding the first `shared` prefix tokens for `rows` rows (None for 0)."""
        if shared == 0:
            return None
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for i, (k, v) in enumerate(self._prefix_kv):
            cache.update(
                k[:, :, :shared].repeat(rows, 1, 1, 1), v[:, :, :shared].repeat(rows, 1, 1, 1), i
            )
        return cache

def _quantized(model: Any) -> Any:
    """`model` with every linear layer's weights in int8, scaled per tensor, and its
    activations quantized on the fly (torch's dynamic quantization; CPU only). The
    embeddings, norms and attention stay float32."""
    import warnings

    import torch
    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates its quantized tensor API
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)  # type: ignore[no-untyped-call]


def _common_prefix(prompts: list[tuple[int, ...]], limit: int) -> int:
    """How many leading tokens all `prompts` share, at most `limit`."""
    n, first = 0, prompts[0]
    limit = min(limit, *(len(p) for p in prompts))
    while n < limit and all(p[n] == first[n] for p in prompts):
        n += 1
    return n


_ENGINES: dict[tuple[object, ...], HFEngine | ORTEngine] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(config: HFPolicyConfig) -> HFEngine | ORTEngine:
    """The engine of `config`'s model directory, loaded once per process and shared by every
    policy over it (the K samples of an evaluation share one model and one batcher): the
    transformers engine, or the onnxruntime-genai one over the folder ``shopbench distill
    export-onnx`` wrote (``engine: onnxruntime-genai``)."""
    if config.engine == "onnxruntime-genai":
        from shopbench.agents.local.ort_engine import ORTEngine, onnx_folder

        folder = onnx_folder(config.path, config.onnx_dir)
        key: tuple[object, ...] = (config.engine, str(folder.resolve()), config.threads)
        with _ENGINES_LOCK:
            found = _ENGINES.get(key)
            if found is None:
                found = _ENGINES[key] = ORTEngine(
                    config.path, onnx_dir=config.onnx_dir, threads=config.threads
                )
            return found
    key = (
        config.engine, str(config.path.resolve()), config.dtype, config.threads,
        config.prefix_cache, config.kv_cache_tokens, config.buffered_cache,
    )  # fmt: skip
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = HFEngine(
                config.path, dtype=config.dtype, threads=config.threads,
                prefix_cache=config.prefix_cache, kv_tokens=config.kv_cache_tokens,
                buffered=config.buffered_cache,
            )
        return engine


def release_engines() -> int:
    """Let go of every shared engine (its weights, its kept keys and values); how many there
    were. A long process that evaluates one model and then trains another calls it between
    the two: the next policy over a model loads it again."""
    with _ENGINES_LOCK:
        count = len(_ENGINES)
        _ENGINES.clear()
    gc.collect()
    return count
