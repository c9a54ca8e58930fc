"""The policy over local weights: ``hf:PATH``, a model directory played with ``transformers``
(or its onnxruntime-genai export).

- :mod:`.config`: :class:`HFPolicyConfig` (decoding, batching, chat-template arguments) and the
  model directory's checks, which import no torch.
- :mod:`.request`: what an engine is asked (:class:`GenRequest`) and answers.
- :mod:`.text`: an engine's tokenizer side (prompt ids, stop ids, reply text, logits processors).
- :mod:`.engine`: the model loaded with transformers and one batched ``generate`` call.
- :mod:`.ort_engine`: the same call over the model's onnxruntime-genai export (``engine:
  onnxruntime-genai``), and the export itself.
- :mod:`.batcher`: the pending turns of concurrent episodes gathered into one generation.
- :mod:`.policy`: :class:`HFPolicy`, what the registry makes of ``hf:PATH``.

The prompt is rendered and the generation read by :mod:`shopbench.agents.format`, the model's
text format, which an endpoint's replies are read by too.
"""
